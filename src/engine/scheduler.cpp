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
  if (config.state_slots > 0) {
    state_ = std::make_unique<StatePool>(config.state_slots, config.state_checkpoints);
    const auto full = std::find(config.group_windows.begin(), config.group_windows.end(), 0);
    RF_CHECK(full != config.group_windows.end(), "scheduler: recurrent state needs a full-attention KV group");
    full_group_ = int32_t(full - config.group_windows.begin());
    // A checkpoint is only useful with its block: it goes when the block does.
    pool_.set_forget_listener([this](uint64_t key) { state_->drop(key); });
  }
}

Scheduler::~Scheduler() {
  if (state_) pool_.set_forget_listener(nullptr);
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
  seq->state_load = -1;
}

void Scheduler::release_state(Sequence* seq) {
  if (!state_) return;
  if (seq->state_slot >= 0) state_->release_slot(seq->state_slot);
  if (seq->pending_checkpoint >= 0) state_->cancel(seq->pending_checkpoint);
  seq->state_slot = seq->pending_checkpoint = seq->state_load = -1;
  seq->pending_key = 0;
}

ScheduledSeq Scheduler::entry(Sequence* s, int32_t n_new) {
  ScheduledSeq e{s, s->n_computed, n_new, s->n_computed + n_new == s->n_tokens(), s->n_draft};
  if (!state_) return e;
  e.state_load = s->state_load;
  s->state_load = -1;
  e.state_save = plan_checkpoint(s, e.start + n_new);
  return e;
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
  seq->drop_drafts();
  release_blocks(seq);
  release_state(seq);
  seq->status = SeqStatus::Waiting;
  ++seq->n_preemptions;
  ++preemptions_;
  waiting_.push_front(seq);
}

void Scheduler::finish(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) waiting_.erase(it);
  seq->drop_drafts();
  release_blocks(seq);
  release_state(seq);
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
  size_t i = 0;
  for (; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i];
    // Proposed tokens come whole with the pending token or are cut to fit.
    if (s->n_draft > 0 && s->n_pending() > budget) s->drop_drafts(std::max(0, budget - (s->n_pending() - s->n_draft)));
    int32_t n_new = cut_for_checkpoint(s, std::min(s->n_pending(), budget));
    if (n_new <= 0) { ++i; continue; }
    bool self_preempted = false;
    while (!allocate_for(s, s->n_computed + n_new)) {
      if (s->n_draft > 0) {  // proposals never cost anyone blocks
        n_new -= s->n_draft;
        s->drop_drafts();
        continue;
      }
      Sequence* victim = running_.back();
      preempt(victim);
      preempted = true;
      if (victim == s) { self_preempted = true; break; }
    }
    if (self_preempted) break;  // s was the newest: nothing after it remains
    out.push_back(entry(s, n_new));
    budget -= n_new;
    ++i;
  }
  // Running sequences this step leaves out keep no proposals.
  for (size_t j = i; j < running_.size(); ++j) running_[j]->drop_drafts();

  // Waiting sequences in order, unless this step had to preempt.
  while (!preempted && !waiting_.empty() && budget > 0 && int32_t(running_.size()) < config_.max_num_seqs) {
    if (state_ && !state_->has_free_slot()) break;  // a hybrid model's sequence needs its state slot
    Sequence* s = waiting_.front();
    if (config_.prefix_caching && s->reuse_prefix && s->n_blocks_held() == 0) apply_prefix_hits(s);
    const int32_t n_new = cut_for_checkpoint(s, std::min(s->n_pending(), budget));
    if (!allocate_for(s, s->n_computed + n_new)) {
      release_blocks(s);  // give back any prefix hits; retry next step
      break;
    }
    waiting_.pop_front();
    s->status = SeqStatus::Running;
    running_.push_back(s);
    if (state_) {
      s->state_slot = state_->acquire_slot();
      if (s->state_load >= 0) ++checkpoint_hits_;
    }
    out.push_back(entry(s, n_new));
    budget -= n_new;
  }
  return out;
}

void Scheduler::accept(ScheduledSeq& e, int32_t n_accepted) {
  Sequence* s = e.seq;
  RF_CHECK(n_accepted >= 0 && n_accepted <= e.n_draft && s->n_draft == e.n_draft &&
               e.start + e.n_new == s->n_tokens(),
           "scheduler: accepting ", n_accepted, " of ", e.n_draft, " proposed tokens");
  s->drop_drafts(n_accepted);
  s->n_draft = 0;
  e.n_new -= e.n_draft - n_accepted;
  // Blocks past the accepted tokens' KV held only rejected ones (never hashed).
  const int32_t bs = pool_.block_size();
  const int32_t keep = (e.start + e.n_new + bs - 1) / bs;
  for (BlockTable& t : s->tables) t.release_from(keep, pool_);
}

void Scheduler::complete(const std::vector<ScheduledSeq>& step) {
  const int32_t bs = pool_.block_size();
  for (const ScheduledSeq& e : step) {
    Sequence* s = e.seq;
    s->n_computed = e.start + e.n_new;
    if (s->pending_checkpoint >= 0) {  // the step saved the slot: the checkpoint is valid now
      state_->commit(s->pending_checkpoint, s->pending_key);
      const int32_t prompt_hit = (s->n_prompt - 1) / bs * bs;
      if (s->n_computed > prompt_hit) {  // past the prompt: the latest replaces the sequence's previous one
        if (s->rolling_key != 0 && s->rolling_key != s->pending_key) state_->drop(s->rolling_key);
        s->rolling_key = s->pending_key;
      }
      s->pending_checkpoint = -1;
      s->pending_key = 0;
    }
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
