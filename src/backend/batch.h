// The flattened batch of one engine step (DESIGN.md, "One engine step"):
// every sequence's new tokens laid end to end, with positions, the paged KV
// slots they write, each sequence's block table and which rows need logits.
// Built on the host once per step and uploaded to the device in one copy.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rf {

struct Batch {
  // Per token, [n_tokens]:
  std::vector<int32_t> token_ids;
  std::vector<int32_t> positions;     // position in its sequence
  std::vector<int32_t> slot_mapping;  // KV slot = block * block_size + offset; -1: don't store (padding)
  std::vector<int32_t> token_seq;     // index of the token's sequence in this batch
  // Per sequence, [n_seqs] (seq_starts has n_seqs + 1 entries, like cu_seqlens):
  std::vector<int32_t> seq_starts;
  std::vector<int32_t> context_lens;  // tokens in the sequence's context after this step
  std::vector<int32_t> block_tables;  // [n_seqs, max_blocks_per_seq], unused entries 0
  int32_t max_blocks_per_seq = 0;
  int32_t block_size = 0;
  // Token rows whose logits are wanted, in output order.
  std::vector<int32_t> logits_rows;

  int32_t n_tokens() const { return int32_t(token_ids.size()); }
  int32_t n_seqs() const { return int32_t(context_lens.size()); }
  int32_t n_logits() const { return int32_t(logits_rows.size()); }
  int32_t max_new_tokens() const;   // longest run of new tokens of one sequence
  int32_t max_context_len() const;

  // Starts an empty batch for sequences of at most `max_blocks` blocks.
  void reset(int32_t block_size, int32_t max_blocks);
  // Appends `tokens` of one sequence, occupying positions [start_pos,
  // start_pos + tokens.size()), whose KV blocks are `blocks` (covering at
  // least start_pos + tokens.size() positions). If `want_logits`, the last
  // token's logits are requested. Returns the sequence's index.
  int32_t add_sequence(std::span<const int32_t> tokens, int32_t start_pos, std::span<const int32_t> blocks,
                       bool want_logits);
  // Checks internal consistency (sizes, ranges); throws rf::Error.
  void validate(int64_t num_blocks) const;
};

}  // namespace rf
