// Test harness for the Scheduler without a model: a simulated paged KV
// cache and a fake deterministic "model". Each step it writes (token,
// position, KV group) into the KV slots of the scheduled tokens in every
// group, checks that every earlier position a scheduled query sees (all of
// them in a full-attention group, the window in a sliding-window group)
// already holds the right token (so shared prefix blocks and recomputed
// blocks are verified), and for entries with `sample` derives the next
// token from what the last query reads back through each group's block
// table. The expected output of a sequence is the same function applied to
// its own tokens, with no scheduler involved. With recurrent-state slots
// (SchedulerConfig::state_slots), each state row records the tokens it has
// absorbed: a step's checkpoint loads copy rows first, every scheduled
// chunk must find its slot holding exactly the sequence's tokens before the
// chunk (or start at position 0), then absorbs the chunk, and saves copy the
// slot into the checkpoint row — so restored checkpoints are verified.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <tuple>
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

// The first position a query at `pos` sees in a group with this window.
inline int32_t first_visible(int32_t window, int32_t pos) { return window > 0 ? std::max(0, pos - window + 1) : 0; }

// What the fake model reads for the next token after `ctx`: each group's
// visible tokens for the last query, groups separated by a marker (one
// full group: ctx itself).
inline std::vector<int32_t> visible_context(const std::vector<int32_t>& ctx, const std::vector<int32_t>& windows) {
  std::vector<int32_t> v;
  const int32_t last = int32_t(ctx.size()) - 1;
  for (size_t g = 0; g < windows.size(); ++g) {
    if (g > 0) v.push_back(-1 - int32_t(g));
    v.insert(v.end(), ctx.begin() + first_visible(windows[g], last), ctx.end());
  }
  return v;
}

// The expected generated tokens of a prompt, computed directly.
inline std::vector<int32_t> reference_output(std::vector<int32_t> tokens, int32_t n_new,
                                             const std::vector<int32_t>& windows = {0}) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n_new; ++i) {
    out.push_back(fake_next(visible_context(tokens, windows)));
    tokens.push_back(out.back());
  }
  return out;
}

class SchedSim {
 public:
  SchedSim(SchedulerConfig cfg, int32_t num_blocks, int32_t block_size)
      : cfg_(cfg), pool_(num_blocks, block_size), sched_(cfg, pool_),
        kv_(size_t(num_blocks) * size_t(block_size), {-1, -1, -1}),
        state_(cfg.state_slots > 0 ? size_t(cfg.state_slots + cfg.state_checkpoints) : 0) {}

  int32_t n_groups() const { return int32_t(cfg_.group_windows.size()); }
  int32_t window(int32_t g) const { return cfg_.group_windows[size_t(g)]; }

  BlockPool& pool() { return pool_; }
  Scheduler& sched() { return sched_; }

  struct Entry {
    std::unique_ptr<Sequence> seq;
    int32_t max_new = 0;
    bool done = false;
    int64_t first_step = -1, done_step = -1;
    int32_t n_cached = 0;  // seq->n_cached when last scheduled (finish() resets the sequence's)
    // The most blocks held at once, after a step, in one window group and
    // in one full group.
    int32_t max_window_blocks = 0, max_full_blocks = 0;
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
    for (const ScheduledSeq& e : sched)
      if (e.state_load >= 0) {
        state_[size_t(e.seq->state_slot)] = state_[size_t(e.state_load)];
        ++checkpoint_loads_;
      }
    for (const ScheduledSeq& e : sched) run_entry(e);
    for (const ScheduledSeq& e : sched)
      if (e.state_save >= 0) {
        state_[size_t(e.state_save)] = state_[size_t(e.seq->state_slot)];
        ++checkpoint_saves_;
      }
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
  // Admissions that took blocks from the prefix cache.
  uint64_t prefix_hits() const { return prefix_hits_; }
  uint64_t checkpoint_loads() const { return checkpoint_loads_; }
  uint64_t checkpoint_saves() const { return checkpoint_saves_; }

  // Every finished (not cancelled) sequence generated its reference output.
  void expect_reference_outputs() const {
    for (const auto& e : entries_) {
      const Sequence& s = *e->seq;
      if (s.n_generated() < e->max_new) continue;  // cancelled
      const std::vector<int32_t> prompt(s.tokens.begin(), s.tokens.begin() + s.n_prompt);
      const std::vector<int32_t> got(s.tokens.begin() + s.n_prompt, s.tokens.end());
      EXPECT_EQ(got, reference_output(prompt, e->max_new, cfg_.group_windows)) << "sequence " << s.id;
    }
  }

  void expect_all_free() const {
    EXPECT_FALSE(sched_.has_work());
    EXPECT_EQ(pool_.num_free(), pool_.num_blocks());
    for (int32_t b = 0; b < pool_.num_blocks(); ++b) EXPECT_EQ(pool_.ref_count(b), 0) << "block " << b;
    if (const StatePool* sp = sched_.state_pool()) {
      EXPECT_EQ(sp->num_free_slots(), sp->n_slots()) << "state slots leaked";
      EXPECT_EQ(sp->num_reserved(), 0) << "checkpoint rows left reserved";
    }
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
      if (e.start == e.seq->n_cached && e.seq->n_cached > 0) ++prefix_hits_;  // admitted with a hit
    }
    // Running sequences hold no window-group block before the window of
    // their next query (released before anything was allocated).
    for (const auto& en : entries_) {
      const Sequence& s = *en->seq;
      if (en->done || s.status != SeqStatus::Running) continue;
      for (int32_t g = 0; g < n_groups(); ++g) {
        const BlockTable& t = s.tables[size_t(g)];
        const int32_t first = first_needed_block(window(g), s.n_computed, pool_.block_size());
        EXPECT_GE(t.first_live, std::min(first, int32_t(t.blocks.size()))) << "sequence " << s.id << " group " << g;
      }
    }
    EXPECT_LE(total, cfg_.max_num_batched_tokens);
    EXPECT_LE(int32_t(sched.size()), cfg_.max_num_seqs);
    EXPECT_LE(int32_t(sched_.num_running()), cfg_.max_num_seqs);
  }

  void run_entry(const ScheduledSeq& e) {
    Sequence& s = *e.seq;
    const int32_t bs = pool_.block_size();
    const int32_t end = e.start + e.n_new;
    if (!state_.empty()) {  // the slot holds the tokens before the chunk, then absorbs it
      ASSERT_GE(s.state_slot, 0) << "sequence " << s.id << " runs without a state slot";
      ASSERT_LT(s.state_slot, cfg_.state_slots);
      std::vector<int32_t>& st = state_[size_t(s.state_slot)];
      if (e.start == 0) st.clear();
      ASSERT_EQ(st, std::vector<int32_t>(s.tokens.begin(), s.tokens.begin() + e.start))
          << "sequence " << s.id << " state at position " << e.start << (e.state_load >= 0 ? " (restored)" : "");
      st.insert(st.end(), s.tokens.begin() + e.start, s.tokens.begin() + end);
    }
    ASSERT_EQ(int32_t(s.tables.size()), n_groups());
    for (int32_t g = 0; g < n_groups(); ++g) {
      const BlockTable& t = s.tables[size_t(g)];
      ASSERT_GE(int32_t(t.blocks.size()) * bs, end) << "block table too short in group " << g;
      auto slot = [&](int32_t p) {
        const int32_t b = t.blocks[size_t(p / bs)];
        EXPECT_GE(b, 0) << "sequence " << s.id << " reads position " << p << " from a null block in group " << g;
        return size_t(std::max(b, 0)) * size_t(bs) + size_t(p % bs);
      };
      // Context computed earlier (by this sequence, or shared from the
      // cache) that the step's first query sees.
      for (int32_t p = first_visible(window(g), e.start); p < e.start; ++p)
        ASSERT_EQ(kv_[slot(p)], std::make_tuple(s.tokens[size_t(p)], p, g))
            << "sequence " << s.id << " position " << p << " group " << g;
      // New tokens go only into blocks this sequence alone owns.
      for (int32_t p = e.start; p < end; ++p) {
        ASSERT_EQ(pool_.ref_count(t.blocks[size_t(p / bs)]), 1) << "write into a shared block";
        kv_[slot(p)] = {s.tokens[size_t(p)], p, g};
      }
    }
    if (!e.sample) return;
    // What the last query reads, group by group (as visible_context).
    std::vector<int32_t> view;
    for (int32_t g = 0; g < n_groups(); ++g) {
      if (g > 0) view.push_back(-1 - g);
      const BlockTable& t = s.tables[size_t(g)];
      for (int32_t p = first_visible(window(g), end - 1); p < end; ++p)
        view.push_back(std::get<0>(kv_[size_t(t.blocks[size_t(p / bs)]) * size_t(bs) + size_t(p % bs)]));
    }
    s.tokens.push_back(fake_next(view));
  }

  // Ref counts equal the number of sequences holding each block; waiting
  // sequences hold none (nor a state slot); free + held == total; running
  // sequences' state slots are distinct.
  void check_pool() {
    std::map<int32_t, int32_t> holders;
    std::set<int32_t> slots;
    for (const auto& e : entries_) {
      const Sequence& s = *e->seq;
      if (e->done || s.status != SeqStatus::Running) {
        EXPECT_EQ(s.n_blocks_held(), 0) << "sequence " << s.id << " holds blocks while not running";
        EXPECT_EQ(s.state_slot, -1) << "sequence " << s.id << " holds a state slot while not running";
        EXPECT_EQ(s.pending_checkpoint, -1) << "sequence " << s.id;
        continue;
      }
      if (!state_.empty()) EXPECT_TRUE(slots.insert(s.state_slot).second) << "state slot " << s.state_slot << " twice";
      std::set<int32_t> own;
      size_t held = 0;
      for (int32_t g = 0; g < n_groups(); ++g) {
        const BlockTable& t = s.tables[size_t(g)];
        for (int32_t i = 0; i < int32_t(t.blocks.size()); ++i) {
          const int32_t b = t.blocks[size_t(i)];
          EXPECT_EQ(b == kNullBlock, i < t.first_live) << "sequence " << s.id << " group " << g << " entry " << i;
          if (b == kNullBlock) continue;
          own.insert(b);
          ++held;
          holders[b]++;
        }
        Entry& en = *e;
        int32_t& mx = window(g) > 0 ? en.max_window_blocks : en.max_full_blocks;
        mx = std::max(mx, t.live_blocks());
      }
      EXPECT_EQ(own.size(), held) << "a block twice in one sequence's tables";
    }
    for (int32_t b = 0; b < pool_.num_blocks(); ++b) {
      const auto it = holders.find(b);
      EXPECT_EQ(pool_.ref_count(b), it == holders.end() ? 0 : it->second) << "block " << b;
    }
    EXPECT_EQ(pool_.num_free() + int32_t(holders.size()), pool_.num_blocks());
    if (const StatePool* sp = sched_.state_pool()) {
      EXPECT_EQ(sp->num_free_slots() + int32_t(slots.size()), sp->n_slots());
      EXPECT_EQ(sp->num_reserved(), 0);  // between steps every checkpoint is committed or cancelled
    }
  }

  SchedulerConfig cfg_;
  BlockPool pool_;
  Scheduler sched_;
  std::vector<std::tuple<int32_t, int32_t, int32_t>> kv_;  // per slot: (token, position, KV group)
  std::vector<std::unique_ptr<Entry>> entries_;
  std::map<const Sequence*, Entry*> by_seq_;
  uint64_t next_id_ = 1;
  int64_t steps_ = 0;
  uint64_t prefix_hits_ = 0;
  std::vector<std::vector<int32_t>> state_;  // per state row: the tokens it absorbed
  uint64_t checkpoint_loads_ = 0, checkpoint_saves_ = 0;
};

// n tokens starting at `first` (distinct, so blocks differ unless meant to).
inline std::vector<int32_t> iota_tokens(int32_t n, int32_t first) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[size_t(i)] = first + i;
  return v;
}

}  // namespace rf::test
