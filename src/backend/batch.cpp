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

void Batch::reset(int32_t bs, int32_t max_blocks) {
  token_ids.clear();
  positions.clear();
  slot_mapping.clear();
  token_seq.clear();
  seq_starts.assign(1, 0);
  context_lens.clear();
  block_tables.clear();
  logits_rows.clear();
  block_size = bs;
  max_blocks_per_seq = max_blocks;
}

int32_t Batch::add_sequence(std::span<const int32_t> tokens, int32_t start_pos, std::span<const int32_t> blocks,
                            bool want_logits) {
  RF_CHECK(block_size > 0, "Batch::reset was not called");
  const int32_t n = int32_t(tokens.size());
  const int32_t end = start_pos + n;
  const int32_t needed = (end + block_size - 1) / block_size;
  RF_CHECK(int32_t(blocks.size()) >= needed, "sequence of ", end, " tokens needs ", needed, " blocks, has ",
           blocks.size());
  RF_CHECK(needed <= max_blocks_per_seq, "sequence needs ", needed, " blocks, batch allows ", max_blocks_per_seq);
  const int32_t seq = n_seqs();
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = start_pos + i;
    token_ids.push_back(tokens[i]);
    positions.push_back(pos);
    slot_mapping.push_back(blocks[pos / block_size] * block_size + pos % block_size);
    token_seq.push_back(seq);
  }
  seq_starts.push_back(int32_t(token_ids.size()));
  context_lens.push_back(end);
  const size_t row = block_tables.size();
  block_tables.resize(row + size_t(max_blocks_per_seq), 0);
  std::copy_n(blocks.begin(), std::min<size_t>(blocks.size(), size_t(max_blocks_per_seq)), block_tables.begin() + row);
  if (want_logits && n > 0) logits_rows.push_back(int32_t(token_ids.size()) - 1);
  return seq;
}

void Batch::validate(int64_t num_blocks) const {
  const size_t nt = token_ids.size();
  RF_CHECK(positions.size() == nt && slot_mapping.size() == nt && token_seq.size() == nt, "batch: token arrays differ in size");
  RF_CHECK(seq_starts.size() == context_lens.size() + 1, "batch: seq_starts size");
  RF_CHECK(block_tables.size() == context_lens.size() * size_t(max_blocks_per_seq), "batch: block_tables size");
  for (int32_t b : block_tables) RF_CHECK(b >= 0 && b < num_blocks, "batch: block id ", b, " out of range");
  for (int32_t s : slot_mapping) RF_CHECK(s >= -1 && s < num_blocks * block_size, "batch: slot ", s, " out of range");
  for (int32_t r : logits_rows) RF_CHECK(r >= 0 && size_t(r) < nt, "batch: logits row ", r, " out of range");
  for (int32_t s = 0; s < n_seqs(); ++s) {
    RF_CHECK(context_lens[s] <= max_blocks_per_seq * block_size, "batch: context too long for block table");
    RF_CHECK(seq_starts[s] <= seq_starts[s + 1], "batch: seq_starts not sorted");
  }
}

}  // namespace rf
