// The flattened batch of one engine step (DESIGN.md, "One engine step"):
// every sequence's new tokens laid end to end, with positions, and per KV
// group (layers sharing block tables, kv/group_layout.h; one group unless
// the model has sliding-window layers) the paged KV slots they write and
// each sequence's block table; which rows need logits. Built on the host
// once per step and uploaded to the device in one copy. Hybrid models
// (recurrent layers) add each sequence's recurrent-state row and the state
// rows to copy before and after the step (prefix checkpoints restored and
// saved, backend.h RecurrentLayer).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rf {

struct Batch {
  // Per token, [n_tokens]:
  std::vector<int32_t> token_ids;
  std::vector<int32_t> positions;     // position in its sequence; -1: padding
  std::vector<int32_t> token_seq;     // index of the token's sequence in this batch
  // Per sequence, [n_seqs] (seq_starts has n_seqs + 1 entries, like cu_seqlens):
  std::vector<int32_t> seq_starts;
  std::vector<int32_t> context_lens;  // tokens in the sequence's context after this step
  // Per KV group, [n_groups]:
  struct Group {
    std::vector<int32_t> slot_mapping;  // [n_tokens] KV slot = block * block_size + offset; -1: don't store (padding)
    // [n_seqs, max_blocks_per_seq]; unused entries 0. A negative entry is a
    // block released from a sliding-window group (kv/block_table.h's
    // kNullBlock): it lies wholly before the window of the sequence's first
    // new token and no kernel reads it.
    std::vector<int32_t> block_tables;
  };
  std::vector<Group> groups;
  int32_t max_blocks_per_seq = 0;
  int32_t block_size = 0;
  // Token rows whose logits are wanted, in output order.
  std::vector<int32_t> logits_rows;
  // Per sequence, [n_seqs]: its recurrent-state row (-1: none — padding, or
  // a model without recurrent layers).
  std::vector<int32_t> state_slots;
  // Whole state rows copied (every recurrent layer's part of the row):
  // state_loads before the step's first layer, state_saves after its last.
  struct StateCopy {
    int32_t src = -1, dst = -1;
  };
  std::vector<StateCopy> state_loads, state_saves;

  int32_t n_tokens() const { return int32_t(token_ids.size()); }
  int32_t n_seqs() const { return int32_t(context_lens.size()); }
  int32_t n_logits() const { return int32_t(logits_rows.size()); }
  int32_t n_groups() const { return int32_t(groups.size()); }
  int32_t max_new_tokens() const;   // longest run of new tokens of one sequence
  int32_t max_context_len() const;

  // Starts an empty batch of n_groups KV groups for sequences of at most
  // `max_blocks` blocks.
  void reset(int32_t block_size, int32_t max_blocks, int32_t n_groups = 1);
  // Appends `tokens` of one sequence, occupying positions [start_pos,
  // start_pos + tokens.size()), whose KV blocks in group g are
  // group_blocks[g] (covering at least start_pos + tokens.size() positions;
  // the blocks of the new tokens held). If `want_logits`, the last token's
  // logits are requested. `state_slot`: its recurrent-state row (hybrid
  // models). Returns the sequence's index.
  int32_t add_sequence(std::span<const int32_t> tokens, int32_t start_pos,
                       std::span<const std::span<const int32_t>> group_blocks, bool want_logits,
                       int32_t state_slot = -1);
  // The same for a batch of one KV group.
  int32_t add_sequence(std::span<const int32_t> tokens, int32_t start_pos, std::span<const int32_t> blocks,
                       bool want_logits, int32_t state_slot = -1);
  // Appends padding sequences of one token each (token 0, position -1, KV
  // slot -1, zero block tables, a logits row) until there are n_seqs: rows
  // no kernel stores or attends for, as decode graphs of a bucket size
  // replay them. A padding token's attention output is zero.
  void pad_to(int32_t n_seqs);
  // Checks internal consistency (sizes, ranges, slots within the tables,
  // released entries only where group_windows[g] > 0 and wholly before the
  // window of the sequence's first new token; with state_rows > 0, every
  // sequence's state row distinct and in [0, state_rows), loads into and
  // saves from rows of the step's sequences);
  // throws rf::Error.
  void validate(int64_t num_blocks, std::span<const int32_t> group_windows, int32_t state_rows = 0) const;
};

}  // namespace rf
