// Batch construction and validation.
#include "backend/batch.h"

#include <algorithm>

#include "core/error.h"

namespace rf {

int32_t Batch::max_new_tokens() const {
  int32_t m = 0;
  for (int32_t s = 0; s < n_seqs(); ++s) m = std::max(m, seq_starts[s + 1] - seq_starts[s]);
  return m;
}

int32_t Batch::max_context_len() const {
  int32_t m = 0;
  for (int32_t c : context_lens) m = std::max(m, c);
  return m;
}

void Batch::reset(int32_t bs, int32_t max_blocks, int32_t n_groups) {
  RF_CHECK(n_groups >= 1, "Batch::reset: ", n_groups, " KV groups");
  token_ids.clear();
  positions.clear();
  token_seq.clear();
  seq_starts.assign(1, 0);
  context_lens.clear();
  groups.resize(size_t(n_groups));
  for (Group& g : groups) {
    g.slot_mapping.clear();
    g.block_tables.clear();
  }
  logits_rows.clear();
  state_slots.clear();
  state_loads.clear();
  state_saves.clear();
  block_size = bs;
  max_blocks_per_seq = max_blocks;
}

int32_t Batch::add_sequence(std::span<const int32_t> tokens, int32_t start_pos,
                            std::span<const std::span<const int32_t>> group_blocks, bool want_logits,
                            int32_t state_slot) {
  RF_CHECK(block_size > 0, "Batch::reset was not called");
  RF_CHECK(group_blocks.size() == groups.size(), "sequence has block tables for ", group_blocks.size(),
           " KV groups, the batch ", groups.size());
  const int32_t n = int32_t(tokens.size());
  const int32_t end = start_pos + n;
  const int32_t needed = (end + block_size - 1) / block_size;
  RF_CHECK(needed <= max_blocks_per_seq, "sequence needs ", needed, " blocks, batch allows ", max_blocks_per_seq);
  for (size_t g = 0; g < groups.size(); ++g)
    RF_CHECK(int32_t(group_blocks[g].size()) >= needed, "sequence of ", end, " tokens needs ", needed,
             " blocks, has ", group_blocks[g].size(), " in KV group ", g);
  const int32_t seq = n_seqs();
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = start_pos + i;
    token_ids.push_back(tokens[i]);
    positions.push_back(pos);
    token_seq.push_back(seq);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::span<const int32_t> blocks = group_blocks[g];
    Group& gr = groups[g];
    for (int32_t pos = start_pos; pos < end; ++pos) {
      const int32_t b = blocks[size_t(pos / block_size)];
      RF_CHECK(b >= 0, "position ", pos, " has no KV block in group ", g);
      gr.slot_mapping.push_back(b * block_size + pos % block_size);
    }
    const size_t row = gr.block_tables.size();
    gr.block_tables.resize(row + size_t(max_blocks_per_seq), 0);
    std::copy_n(blocks.begin(), std::min<size_t>(blocks.size(), size_t(max_blocks_per_seq)),
                gr.block_tables.begin() + long(row));
  }
  seq_starts.push_back(int32_t(token_ids.size()));
  context_lens.push_back(end);
  state_slots.push_back(state_slot);
  if (want_logits && n > 0) logits_rows.push_back(int32_t(token_ids.size()) - 1);
  return seq;
}

int32_t Batch::add_sequence(std::span<const int32_t> tokens, int32_t start_pos, std::span<const int32_t> blocks,
                            bool want_logits, int32_t state_slot) {
  const std::span<const int32_t> one[1] = {blocks};
  return add_sequence(tokens, start_pos, one, want_logits, state_slot);
}

namespace {

// Recurrent-state rows: every non-padding sequence has its own row; copies
// stay within the rows, and a load targets a row its sequence reads.
void validate_state(const Batch& b, int32_t state_rows) {
  RF_CHECK(b.state_slots.size() == b.context_lens.size(), "batch: ", b.state_slots.size(), " state slots for ",
           b.n_seqs(), " sequences");
  std::vector<uint8_t> used(size_t(std::max(state_rows, 0)), 0);
  for (int32_t s = 0; s < b.n_seqs(); ++s) {
    const int32_t slot = b.state_slots[size_t(s)];
    const bool padding = b.seq_starts[s] < b.seq_starts[s + 1] && b.positions[size_t(b.seq_starts[s])] < 0;
    if (padding) {
      RF_CHECK(slot < 0, "batch: padding sequence ", s, " has state row ", slot);
      continue;
    }
    RF_CHECK(slot >= 0 && slot < state_rows, "batch: sequence ", s, " has state row ", slot, " of ", state_rows);
    RF_CHECK(!used[size_t(slot)], "batch: state row ", slot, " given to two sequences");
    used[size_t(slot)] = 1;
  }
  for (const auto* copies : {&b.state_loads, &b.state_saves})
    for (const Batch::StateCopy& c : *copies) {
      RF_CHECK(c.src >= 0 && c.src < state_rows && c.dst >= 0 && c.dst < state_rows && c.src != c.dst,
               "batch: state copy ", c.src, " -> ", c.dst, " outside the ", state_rows, " rows");
      const int32_t own = copies == &b.state_loads ? c.dst : c.src;
      RF_CHECK(used[size_t(own)], "batch: state copy ", c.src, " -> ", c.dst, " touches no row of the step's sequences");
    }
}

}  // namespace

void Batch::validate(int64_t num_blocks, std::span<const int32_t> group_windows, int32_t state_rows) const {
  const size_t nt = token_ids.size();
  RF_CHECK(positions.size() == nt && token_seq.size() == nt, "batch: token arrays differ in size");
  RF_CHECK(seq_starts.size() == context_lens.size() + 1, "batch: seq_starts size");
  RF_CHECK(group_windows.size() == groups.size(), "batch: ", groups.size(), " KV groups, ", group_windows.size(),
           " windows");
  for (int32_t r : logits_rows) RF_CHECK(r >= 0 && size_t(r) < nt, "batch: logits row ", r, " out of range");
  if (state_rows > 0) validate_state(*this, state_rows);
  for (int32_t s = 0; s < n_seqs(); ++s) {
    RF_CHECK(context_lens[s] <= max_blocks_per_seq * block_size, "batch: context too long for block table");
    RF_CHECK(seq_starts[s] <= seq_starts[s + 1], "batch: seq_starts not sorted");
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const Group& gr = groups[g];
    const int32_t window = group_windows[g];
    RF_CHECK(gr.slot_mapping.size() == nt, "batch: group ", g, " slot_mapping size");
    RF_CHECK(gr.block_tables.size() == context_lens.size() * size_t(max_blocks_per_seq), "batch: group ", g,
             " block_tables size");
    for (int32_t s = 0; s < n_seqs(); ++s) {
      const int32_t* table = gr.block_tables.data() + size_t(s) * size_t(max_blocks_per_seq);
      // Keys the sequence's first new token sees start at first_key: a
      // released entry must end at or before it.
      const int32_t first_pos = seq_starts[s] < seq_starts[s + 1] ? positions[size_t(seq_starts[s])] : 0;
      const int32_t first_key = window > 0 ? std::max(0, first_pos - window + 1) : 0;
      for (int32_t i = 0; i < max_blocks_per_seq; ++i) {
        const int32_t b = table[i];
        RF_CHECK(b < num_blocks, "batch: block id ", b, " out of range");
        if (b >= 0 || i * block_size >= context_lens[s]) continue;
        RF_CHECK(window > 0 && (i + 1) * block_size <= first_key, "batch: sequence ", s, " reads released block ",
                 i, " in KV group ", g, " (window ", window, ")");
      }
      for (int32_t t = seq_starts[s]; t < seq_starts[s + 1]; ++t) {
        const int32_t slot = gr.slot_mapping[size_t(t)], pos = positions[size_t(t)];
        if (slot < 0 && pos < 0) continue;  // padding
        RF_CHECK(pos >= 0 && pos < context_lens[s], "batch: position ", pos, " outside the context");
        RF_CHECK(slot == table[pos / block_size] * block_size + pos % block_size && slot >= 0, "batch: slot ", slot,
                 " of position ", pos, " is not in the block table of group ", g);
      }
    }
  }
}

void Batch::pad_to(int32_t n) {
  for (int32_t i = n_seqs(); i < n; ++i) {
    token_ids.push_back(0);
    positions.push_back(-1);
    token_seq.push_back(i);
    seq_starts.push_back(seq_starts.back() + 1);
    context_lens.push_back(0);
    state_slots.push_back(-1);
    for (Group& g : groups) {
      g.slot_mapping.push_back(-1);
      g.block_tables.resize(g.block_tables.size() + size_t(max_blocks_per_seq), 0);
    }
    logits_rows.push_back(int32_t(token_ids.size()) - 1);
  }
}

}  // namespace rf
