// Scheduler implementation (see scheduler.h for the policy); prefix hits at
// admission are in scheduler_prefix.cpp.
#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace rf {

Scheduler::Scheduler(const SchedulerConfig& config, BlockPool& pool) : config_(config), pool_(pool) {
  RF_CHECK(config.max_num_seqs > 0 && config.max_num_batched_tokens > 0, "scheduler: empty limits");
  RF_CHECK(!config.group_windows.empty(), "scheduler: no KV group");
  for (int32_t w : config.group_windows) RF_CHECK(w >= 0, "scheduler: KV group window ", w);
}

void Scheduler::add(Sequence* seq) {
  for (const BlockTable& t : seq->tables) RF_CHECK(t.blocks.empty(), "scheduler: a new sequence holds blocks");
  seq->tables.assign(size_t(n_groups()), BlockTable{});
  seq->status = SeqStatus::Waiting;
  waiting_.push_back(seq);
}

void Scheduler::release_blocks(Sequence* seq) {
  for (BlockTable& t : seq->tables) t.release_all(pool_);
  seq->n_computed = 0;
  seq->n_cached = 0;
  seq->n_hashed_blocks = 0;
  seq->last_hash = 0;
}

void Scheduler::slide_windows(Sequence* seq) {
  const int32_t bs = pool_.block_size();
  for (int32_t g = 0; g < n_groups(); ++g) {
    const int32_t w = config_.group_windows[size_t(g)];
    if (w > 0)
      window_releases_ += uint64_t(seq->tables[size_t(g)].release_before(first_needed_block(w, seq->n_computed, bs), pool_));
  }
}

void Scheduler::preempt(Sequence* seq) {
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  release_blocks(seq);
  seq->status = SeqStatus::Waiting;
  ++seq->n_preemptions;
  ++preemptions_;
  waiting_.push_front(seq);
}

void Scheduler::finish(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) waiting_.erase(it);
  release_blocks(seq);
  seq->status = SeqStatus::Finished;
}

bool Scheduler::allocate_for(Sequence* seq, int32_t end) {
  const int32_t bs = pool_.block_size();
  int32_t need = 0;
  for (int32_t g = 0; g < n_groups(); ++g) {
    const int32_t first = first_needed_block(config_.group_windows[size_t(g)], seq->n_computed, bs);
    need += seq->tables[size_t(g)].blocks_needed(first, end, bs);
  }
  if (!pool_.can_allocate(need)) return false;
  for (int32_t g = 0; g < n_groups(); ++g) {
    const int32_t first = first_needed_block(config_.group_windows[size_t(g)], seq->n_computed, bs);
    seq->tables[size_t(g)].grow(first, end, bs, pool_);
  }
  return true;
}

std::vector<ScheduledSeq> Scheduler::schedule() {
  std::vector<ScheduledSeq> out;
  int32_t budget = config_.max_num_batched_tokens;
  bool preempted = false;

  // Blocks that slid out of every window go back first, for anyone to take.
  for (Sequence* s : running_) slide_windows(s);

  // Running sequences, oldest admission first.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i];
    const int32_t n_new = std::min(s->n_pending(), budget);
    if (n_new <= 0) { ++i; continue; }
    bool self_preempted = false;
    while (!allocate_for(s, s->n_computed + n_new)) {
      Sequence* victim = running_.back();
      preempt(victim);
      preempted = true;
      if (victim == s) { self_preempted = true; break; }
    }
    if (self_preempted) break;  // s was the newest: nothing after it remains
    out.push_back({s, s->n_computed, n_new, s->n_computed + n_new == s->n_tokens()});
    budget -= n_new;
    ++i;
  }

  // Waiting sequences in order, unless this step had to preempt.
  while (!preempted && !waiting_.empty() && budget > 0 && int32_t(running_.size()) < config_.max_num_seqs) {
    Sequence* s = waiting_.front();
    if (config_.prefix_caching && s->reuse_prefix && s->n_blocks_held() == 0) apply_prefix_hits(s);
    const int32_t n_new = std::min(s->n_pending(), budget);
    if (!allocate_for(s, s->n_computed + n_new)) {
      release_blocks(s);  // give back any prefix hits; retry next step
      break;
    }
    waiting_.pop_front();
    s->status = SeqStatus::Running;
    running_.push_back(s);
    out.push_back({s, s->n_computed, n_new, s->n_computed + n_new == s->n_tokens()});
    budget -= n_new;
  }
  return out;
}

void Scheduler::complete(const std::vector<ScheduledSeq>& step) {
  const int32_t bs = pool_.block_size();
  for (const ScheduledSeq& e : step) {
    Sequence* s = e.seq;
    s->n_computed = e.start + e.n_new;
    if (!config_.prefix_caching) continue;
    while ((s->n_hashed_blocks + 1) * bs <= s->n_computed) {
      const std::span<const int32_t> toks(s->tokens.data() + size_t(s->n_hashed_blocks) * bs, size_t(bs));
      s->last_hash = BlockPool::chain_hash(s->last_hash, toks);
      for (int32_t g = 0; g < n_groups(); ++g) {
        const int32_t b = s->tables[size_t(g)].blocks[size_t(s->n_hashed_blocks)];
        if (b != kNullBlock) pool_.set_hash(b, BlockPool::group_key(s->last_hash, g));
      }
      ++s->n_hashed_blocks;
    }
  }
}

}  // namespace rf
