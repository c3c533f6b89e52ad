// Test harness for the Scheduler without a model: a simulated paged KV
// cache and a fake deterministic "model". Each step it writes (token,
// position) into the KV slots of the scheduled tokens, checks that every
// earlier position of a scheduled sequence already holds the right token
// (so shared prefix blocks and recomputed blocks are verified), and for
// entries with `sample` derives the next token from what it reads back
// through the block table. The expected output of a sequence is the same
// function applied to its own tokens, with no scheduler involved.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "engine/scheduler.h"
#include "kv/block_pool.h"

namespace rf::test {

// The fake model: the next token after `ctx`.
inline int32_t fake_next(const std::vector<int32_t>& ctx) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : ctx) h = (h ^ uint64_t(uint32_t(t))) * 1099511628211ull;
  return int32_t(h % 997);
}

// The expected generated tokens of a prompt, computed directly.
inline std::vector<int32_t> reference_output(std::vector<int32_t> tokens, int32_t n_new) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n_new; ++i) {
    out.push_back(fake_next(tokens));
    tokens.push_back(out.back());
  }
  return out;
}

class SchedSim {
 public:
  SchedSim(SchedulerConfig cfg, int32_t num_blocks, int32_t block_size)
      : cfg_(cfg), pool_(num_blocks, block_size), sched_(cfg, pool_),
        kv_(size_t(num_blocks) * size_t(block_size), {-1, -1}) {}

  BlockPool& pool() { return pool_; }
  Scheduler& sched() { return sched_; }

  struct Entry {
    std::unique_ptr<Sequence> seq;
    int32_t max_new = 0;
    bool done = false;
    int64_t first_step = -1, done_step = -1;
    int32_t n_cached = 0;  // seq->n_cached when last scheduled (finish() resets the sequence's)
  };

  Sequence* add(std::vector<int32_t> prompt, int32_t max_new) {
    auto e = std::make_unique<Entry>();
    e->seq = std::make_unique<Sequence>();
    e->seq->id = next_id_++;
    e->seq->tokens = std::move(prompt);
    e->seq->n_prompt = e->seq->n_tokens();
    e->max_new = max_new;
    Sequence* s = e->seq.get();
    by_seq_[s] = e.get();
    entries_.push_back(std::move(e));
    sched_.add(s);
    return s;
  }

  // Cancels (or otherwise ends) a sequence wherever it is.
  void cancel(Sequence* s) {
    sched_.finish(s);
    by_seq_.at(s)->done = true;
    check_pool();
  }

  // One step: schedule, "run" it, sample, complete, finish the sequences
  // that reached their length. Returns the schedule.
  std::vector<ScheduledSeq> step() {
    const auto sched = sched_.schedule();
    check_schedule(sched);
    for (const ScheduledSeq& e : sched) run_entry(e);
    sched_.complete(sched);
    for (const ScheduledSeq& e : sched) {
      Entry& en = *by_seq_.at(e.seq);
      EXPECT_EQ(e.seq->n_computed, e.start + e.n_new);
      if (e.sample && e.seq->n_generated() >= en.max_new) {
        sched_.finish(e.seq);
        en.done = true;
        en.done_step = steps_;
      }
    }
    check_pool();
    ++steps_;
    return sched;
  }

  // Steps until every sequence is done; fails after max_steps.
  int64_t run(int64_t max_steps = 100000) {
    const int64_t start = steps_;
    while (!all_done()) {
      if (steps_ - start >= max_steps) {
        ADD_FAILURE() << "sequences still unfinished after " << max_steps << " steps";
        return steps_ - start;
      }
      step();
      if (::testing::Test::HasFatalFailure()) break;
    }
    return steps_ - start;
  }

  bool all_done() const {
    return std::all_of(entries_.begin(), entries_.end(), [](const auto& e) { return e->done; });
  }
  const Entry& entry(const Sequence* s) const { return *by_seq_.at(s); }
  int64_t steps() const { return steps_; }

  // Every finished (not cancelled) sequence generated its reference output.
  void expect_reference_outputs() const {
    for (const auto& e : entries_) {
      const Sequence& s = *e->seq;
      if (s.n_generated() < e->max_new) continue;  // cancelled
      const std::vector<int32_t> prompt(s.tokens.begin(), s.tokens.begin() + s.n_prompt);
      const std::vector<int32_t> got(s.tokens.begin() + s.n_prompt, s.tokens.end());
      EXPECT_EQ(got, reference_output(prompt, e->max_new)) << "sequence " << s.id;
    }
  }

  void expect_all_free() const {
    EXPECT_FALSE(sched_.has_work());
    EXPECT_EQ(pool_.num_free(), pool_.num_blocks());
    for (int32_t b = 0; b < pool_.num_blocks(); ++b) EXPECT_EQ(pool_.ref_count(b), 0) << "block " << b;
  }

 private:
  void check_schedule(const std::vector<ScheduledSeq>& sched) {
    int32_t total = 0;
    std::set<const Sequence*> seen;
    for (const ScheduledSeq& e : sched) {
      EXPECT_TRUE(seen.insert(e.seq).second) << "sequence scheduled twice";
      EXPECT_GT(e.n_new, 0);
      EXPECT_EQ(e.start, e.seq->n_computed);
      EXPECT_LE(e.start + e.n_new, e.seq->n_tokens());
      EXPECT_EQ(e.sample, e.start + e.n_new == e.seq->n_tokens());
      EXPECT_EQ(e.seq->status, SeqStatus::Running);
      EXPECT_FALSE(by_seq_.at(e.seq)->done);
      total += e.n_new;
      Entry& en = *by_seq_.at(e.seq);
      if (en.first_step < 0) en.first_step = steps_;
      en.n_cached = e.seq->n_cached;
    }
    EXPECT_LE(total, cfg_.max_num_batched_tokens);
    EXPECT_LE(int32_t(sched.size()), cfg_.max_num_seqs);
    EXPECT_LE(int32_t(sched_.num_running()), cfg_.max_num_seqs);
  }

  void run_entry(const ScheduledSeq& e) {
    Sequence& s = *e.seq;
    const int32_t bs = pool_.block_size();
    const int32_t end = e.start + e.n_new;
    ASSERT_GE(int32_t(s.table.blocks.size()) * bs, end) << "block table too short";
    auto slot = [&](int32_t p) { return size_t(s.table.blocks[size_t(p / bs)]) * size_t(bs) + size_t(p % bs); };
    // Context computed earlier (by this sequence, or shared from the cache).
    for (int32_t p = 0; p < e.start; ++p)
      ASSERT_EQ(kv_[slot(p)], std::make_pair(s.tokens[size_t(p)], p)) << "sequence " << s.id << " position " << p;
    // New tokens go only into blocks this sequence alone owns.
    for (int32_t p = e.start; p < end; ++p) {
      ASSERT_EQ(pool_.ref_count(s.table.blocks[size_t(p / bs)]), 1) << "write into a shared block";
      kv_[slot(p)] = {s.tokens[size_t(p)], p};
    }
    if (!e.sample) return;
    std::vector<int32_t> ctx;
    for (int32_t p = 0; p < end; ++p) ctx.push_back(kv_[slot(p)].first);
    s.tokens.push_back(fake_next(ctx));
  }

  // Ref counts equal the number of sequences holding each block; waiting
  // sequences hold none; free + held == total.
  void check_pool() {
    std::map<int32_t, int32_t> holders;
    for (const auto& e : entries_) {
      const Sequence& s = *e->seq;
      if (e->done || s.status != SeqStatus::Running) {
        EXPECT_TRUE(s.table.blocks.empty()) << "sequence " << s.id << " holds blocks while not running";
        continue;
      }
      std::set<int32_t> own(s.table.blocks.begin(), s.table.blocks.end());
      EXPECT_EQ(own.size(), s.table.blocks.size()) << "a block twice in one table";
      for (int32_t b : s.table.blocks) holders[b]++;
    }
    for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
      const auto it = holders.find(b);
      EXPECT_EQ(pool_.ref_count(b), it == holders.end() ? 0 : it->second) << "block " << b;
    }
    EXPECT_EQ(pool_.num_free() + int32_t(holders.size()), pool_.num_blocks());
  }

  SchedulerConfig cfg_;
  BlockPool pool_;
  Scheduler sched_;
  std::vector<std::pair<int32_t, int32_t>> kv_;  // per slot: (token, position)
  std::vector<std::unique_ptr<Entry>> entries_;
  std::map<const Sequence*, Entry*> by_seq_;
  uint64_t next_id_ = 1;
  int64_t steps_ = 0;
};

// n tokens starting at `first` (distinct, so blocks differ unless meant to).
inline std::vector<int32_t> iota_tokens(int32_t n, int32_t first) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[size_t(i)] = first + i;
  return v;
}

}  // namespace rf::test
