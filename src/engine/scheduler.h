// Scheduler: decides each step's work with no GPU code (DESIGN.md step 2).
// Iteration-level batching under a token budget: running sequences first
// (one decode token each, or their next prompt chunk), then waiting ones in
// arrival order (chunked prefill), as long as there is budget, a sequence
// slot and KV blocks. When blocks run out it preempts the newest running
// sequence (frees its blocks; it is recomputed later). Prefix caching: full
// blocks are registered by chained hash and reused at admission.
//
// KV groups (kv/group_layout.h): a sequence has a block table per group, all
// drawing on the one BlockPool. Full-attention groups hold every block of
// the context; a sliding-window group holds only the blocks from the window
// of the sequence's next query on: at each step, before anything is
// allocated, the blocks wholly before that window are released (hashed ones
// stay in the prefix cache). A prefix hit takes the leading blocks cached in
// every full group, shortened until every window group has all the blocks
// of the first computed query's window cached (kv/block_table.h).
//
// Hybrid models (recurrent layers, kv/state_pool.h): a sequence is admitted
// only with a free state slot, which it holds until it is preempted or
// ends; chunked prefill carries the state in the slot from step to step.
// With prefix caching, a step that ends a sequence's computed tokens on a
// block boundary saves the slot's state as a checkpoint keyed like the
// block that ends there (in the first full-attention group), and a prefix
// hit is shortened to the longest one with a checkpoint at its end, which
// is restored into the new sequence's slot (a hit without one starts from
// position 0). Checkpoints go with their block when the BlockPool forgets
// it. A prompt's chunk is cut at its last block boundary before the last
// token (the point a repeated prompt or a second choice hits), so that a
// checkpoint is saved there; past the prompt, each new checkpoint of a
// sequence replaces its previous one, keeping the latest for a
// conversation's next turn.
//
// Speculative decoding: a running decode sequence may carry proposed tokens
// (Sequence::n_draft). They are scheduled with its pending token or not at
// all: when the budget is short they are cut to what fits, when blocks are
// short they are dropped before anyone is preempted, and a sequence left
// out of the step (or preempted) loses them. After the forward pass the
// engine calls accept(): the rejected ones leave the sequence and the
// blocks only they reached go back to the pool, before complete() hashes
// blocks — so no block holding a rejected token is ever registered in the
// prefix cache (complete() hashes only blocks wholly below n_computed).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include <memory>

#include "engine/sequence.h"
#include "kv/block_pool.h"
#include "kv/state_pool.h"

namespace rf {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
  bool prefix_caching = true;
  // The sliding window of each KV group, 0 for full attention
  // (KVGroupLayout::group_windows()); by default one full-attention group.
  std::vector<int32_t> group_windows = {0};
  // Hybrid models: recurrent-state sequence slots (0: no recurrent layers)
  // and prefix-checkpoint rows (state rows [state_slots, state_slots +
  // state_checkpoints)).
  int32_t state_slots = 0;
  int32_t state_checkpoints = 0;
};

struct ScheduledSeq {
  Sequence* seq;
  int32_t start;   // first position computed this step (== seq->n_computed before the step)
  int32_t n_new;   // tokens computed this step
  bool sample;     // the chunk reaches the last token: sample the next one
  int32_t n_draft = 0;  // of n_new, trailing proposed tokens (speculative decoding): logits for each, plus the one before
  // Hybrid models: a checkpoint row restored into seq->state_slot before
  // the step, and one the slot is saved into after it (-1: none).
  int32_t state_load = -1;
  int32_t state_save = -1;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, BlockPool& pool);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a sequence (status Waiting) behind the others; gives it a block
  // table per KV group.
  void add(Sequence* seq);
  // This step's work; empty when nothing can run.
  std::vector<ScheduledSeq> schedule();
  // After the forward pass: marks the scheduled tokens computed and
  // registers newly full blocks in the prefix cache.
  void complete(const std::vector<ScheduledSeq>& step);
  // Speculative decoding, after the forward pass and before complete():
  // of the entry's n_draft proposed tokens the first n_accepted stay, the
  // others leave the sequence (e.n_new shrinks to match) and the blocks
  // that only they reached are released.
  void accept(ScheduledSeq& e, int32_t n_accepted);
  // Removes a sequence wherever it is and releases its blocks.
  void finish(Sequence* seq);

  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  uint64_t num_preemptions() const { return preemptions_; }
  // Blocks released because a sliding window moved past them.
  uint64_t num_window_releases() const { return window_releases_; }
  const BlockPool& pool() const { return pool_; }
  // The recurrent-state rows' bookkeeping (null without recurrent layers).
  const StatePool* state_pool() const { return state_.get(); }
  uint64_t num_checkpoint_hits() const { return checkpoint_hits_; }

 private:
  int32_t n_groups() const { return int32_t(config_.group_windows.size()); }
  void preempt(Sequence* seq);
  void release_blocks(Sequence* seq);
  // Gives back the sequence's state slot and a checkpoint it had reserved.
  void release_state(Sequence* seq);
  // Hybrid models with checkpoints: n_new cut at the sequence's last block
  // boundary before its last token, and the checkpoint row the step's end
  // is saved into (-1: none; scheduler_prefix.cpp).
  int32_t cut_for_checkpoint(const Sequence* seq, int32_t n_new) const;
  int32_t plan_checkpoint(Sequence* seq, int32_t end);
  uint64_t checkpoint_key(uint64_t chain_hash) const { return BlockPool::group_key(chain_hash, full_group_); }
  bool checkpoints() const { return state_ && config_.prefix_caching && state_->n_checkpoint_rows() > 0; }
  // A scheduled entry, with the state rows it loads and saves.
  ScheduledSeq entry(Sequence* seq, int32_t n_new);
  // Releases the window groups' blocks that the next query's window no longer reaches.
  void slide_windows(Sequence* seq);
  // Takes cached blocks for the sequence's leading full blocks
  // (scheduler_prefix.cpp).
  void apply_prefix_hits(Sequence* seq);
  // Holds every group's blocks for computing up to position `end`, or
  // nothing when the pool lacks them.
  bool allocate_for(Sequence* seq, int32_t end);

  SchedulerConfig config_;
  BlockPool& pool_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order; the last is preempted first
  uint64_t preemptions_ = 0;
  uint64_t window_releases_ = 0;
  std::vector<uint64_t> hashes_;  // apply_prefix_hits' scratch
  std::unique_ptr<StatePool> state_;  // hybrid models only
  int32_t full_group_ = 0;            // the first full-attention KV group: checkpoints are keyed by its blocks
  uint64_t checkpoint_hits_ = 0;
};

}  // namespace rf
