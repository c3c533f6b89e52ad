// Scheduler implementation (see scheduler.h for the policy).
#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace rf {

Scheduler::Scheduler(const SchedulerConfig& config, BlockPool& pool) : config_(config), pool_(pool) {
  RF_CHECK(config.max_num_seqs > 0 && config.max_num_batched_tokens > 0, "scheduler: empty limits");
}

void Scheduler::add(Sequence* seq) {
  seq->status = SeqStatus::Waiting;
  waiting_.push_back(seq);
}

void Scheduler::release_blocks(Sequence* seq) {
  // Tail first, so that its cached blocks are evicted before the prefix's.
  for (auto it = seq->table.blocks.rbegin(); it != seq->table.blocks.rend(); ++it) pool_.release(*it);
  seq->table.blocks.clear();
  seq->table.n_tokens = 0;
  seq->n_computed = 0;
  seq->n_cached = 0;
  seq->n_hashed_blocks = 0;
  seq->last_hash = 0;
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

bool Scheduler::allocate_for(Sequence* seq, int32_t n_tokens) {
  const int32_t need = seq->table.blocks_needed(n_tokens, pool_.block_size());
  if (!pool_.can_allocate(need)) return false;
  for (int32_t i = 0; i < need; ++i) seq->table.blocks.push_back(pool_.allocate());
  seq->table.n_tokens = std::max(seq->table.n_tokens, n_tokens);
  return true;
}

void Scheduler::apply_prefix_hits(Sequence* seq) {
  const int32_t bs = pool_.block_size();
  // Leave at least one token to compute so the step yields logits.
  const int32_t max_blocks = (seq->n_tokens() - 1) / bs;
  uint64_t h = 0;
  int32_t hits = 0;
  while (hits < max_blocks) {
    const std::span<const int32_t> toks(seq->tokens.data() + size_t(hits) * bs, size_t(bs));
    const uint64_t next = BlockPool::chain_hash(h, toks);
    const auto block = pool_.lookup(next);
    if (!block) break;
    seq->table.blocks.push_back(*block);
    h = next;
    ++hits;
  }
  seq->n_computed = seq->n_cached = hits * bs;
  seq->table.n_tokens = seq->n_computed;
  seq->n_hashed_blocks = hits;
  seq->last_hash = h;
}

std::vector<ScheduledSeq> Scheduler::schedule() {
  std::vector<ScheduledSeq> out;
  int32_t budget = config_.max_num_batched_tokens;
  bool preempted = false;

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
    if (config_.prefix_caching && s->table.blocks.empty()) apply_prefix_hits(s);
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
      pool_.set_hash(s->table.blocks[size_t(s->n_hashed_blocks)], s->last_hash);
      ++s->n_hashed_blocks;
    }
  }
}

}  // namespace rf
