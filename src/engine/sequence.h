// Sequence: the scheduler's view of one request — its tokens (prompt, then
// generated), how many have KV in the cache, and its block table in each KV
// group (kv/group_layout.h); for hybrid models its recurrent-state slot and
// prefix checkpoints in flight (kv/state_pool.h). The engine keeps the
// generation state (sampler, detokenizer, stream) beside it.
//
// Speculative decoding (engine/speculative.h): a decoding sequence may end
// with n_draft proposed tokens, appended by the engine before the step is
// scheduled and verified by it after the forward pass. They are tokens like
// any other to the scheduler (n_pending counts them), except that it may
// drop them (budget or blocks short, preemption) rather than cut them or
// let them cost another sequence its place; none outlives the step.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/block_table.h"

namespace rf {

enum class SeqStatus { Waiting, Running, Finished };

struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;   // prompt followed by generated tokens
  int32_t n_prompt = 0;
  int32_t n_computed = 0;        // leading tokens whose KV is in the cache
  int32_t n_cached = 0;          // of those, taken from the prefix cache at admission
  std::vector<BlockTable> tables;  // one per KV group (the scheduler sizes it)
  int32_t n_hashed_blocks = 0;   // leading full blocks registered in the prefix cache (in every group)
  uint64_t last_hash = 0;        // chain hash of block n_hashed_blocks - 1
  bool reuse_prefix = true;      // prefix-cache hits at admission allowed (else every token is computed)
  SeqStatus status = SeqStatus::Waiting;
  int32_t n_preemptions = 0;
  // Hybrid models (recurrent layers):
  int32_t state_slot = -1;          // its state row while running
  int32_t state_load = -1;          // a prefix checkpoint to restore into the slot before its next step
  int32_t pending_checkpoint = -1;  // a checkpoint row this step saves the slot into
  uint64_t pending_key = 0;         // and its key
  uint64_t rolling_key = 0;         // the last checkpoint saved past the prompt (the next one replaces it)
  int32_t n_draft = 0;              // trailing tokens that are proposals under verification this step

  int32_t n_tokens() const { return int32_t(tokens.size()); }
  int32_t n_generated() const { return n_tokens() - n_prompt; }
  int32_t n_pending() const { return n_tokens() - n_computed; }
  // Drops the proposed tokens beyond the first `keep`.
  void drop_drafts(int32_t keep = 0) {
    if (keep >= n_draft) return;
    tokens.resize(tokens.size() - size_t(n_draft - keep));
    n_draft = keep;
  }
  // Blocks held in every group.
  int32_t n_blocks_held() const {
    int32_t n = 0;
    for (const BlockTable& t : tables) n += t.live_blocks();
    return n;
  }
};

}  // namespace rf
