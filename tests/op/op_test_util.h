// Helpers shared by the CPU op tests: random inputs and paged batches.
#pragma once

#include <random>
#include <vector>

#include "backend/batch.h"
#include "random_values.h"

namespace rf::test {

// One sequence of a test batch: context length (its new tokens included),
// new tokens (the last n_new of the context) and its block table.
struct BatchSeq {
  int ctx, n_new;
  std::vector<int32_t> blocks;
};

// A batch of those sequences (token ids 1), logits for every token.
inline Batch make_batch(int32_t block_size, int32_t max_blocks_per_seq, const std::vector<BatchSeq>& seqs) {
  Batch b;
  b.reset(block_size, max_blocks_per_seq);
  for (const auto& s : seqs) {
    std::vector<int32_t> toks(size_t(s.n_new), 1);
    b.add_sequence(toks, s.ctx - s.n_new, s.blocks, true);
  }
  return b;
}

}  // namespace rf::test
