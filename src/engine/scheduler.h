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
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/sequence.h"
#include "kv/block_pool.h"

namespace rf {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
  bool prefix_caching = true;
  // The sliding window of each KV group, 0 for full attention
  // (KVGroupLayout::group_windows()); by default one full-attention group.
  std::vector<int32_t> group_windows = {0};
};

struct ScheduledSeq {
  Sequence* seq;
  int32_t start;   // first position computed this step (== seq->n_computed before the step)
  int32_t n_new;   // tokens computed this step
  bool sample;     // the chunk reaches the last token: sample the next one
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, BlockPool& pool);

  // Queues a sequence (status Waiting) behind the others; gives it a block
  // table per KV group.
  void add(Sequence* seq);
  // This step's work; empty when nothing can run.
  std::vector<ScheduledSeq> schedule();
  // After the forward pass: marks the scheduled tokens computed and
  // registers newly full blocks in the prefix cache.
  void complete(const std::vector<ScheduledSeq>& step);
  // Removes a sequence wherever it is and releases its blocks.
  void finish(Sequence* seq);

  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  uint64_t num_preemptions() const { return preemptions_; }
  // Blocks released because a sliding window moved past them.
  uint64_t num_window_releases() const { return window_releases_; }
  const BlockPool& pool() const { return pool_; }

 private:
  int32_t n_groups() const { return int32_t(config_.group_windows.size()); }
  void preempt(Sequence* seq);
  void release_blocks(Sequence* seq);
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
};

}  // namespace rf
