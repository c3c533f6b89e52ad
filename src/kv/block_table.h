// BlockTable: the blocks of one sequence's KV, in order (block i holds
// positions [i * block_size, (i + 1) * block_size)). The scheduler grows it
// from the BlockPool; the engine flattens it into the step's block tables.
#pragma once

#include <cstdint>
#include <vector>

namespace rf {

// The blocks of one sequence, in order; covers n_tokens positions.
struct BlockTable {
  std::vector<int32_t> blocks;
  int32_t n_tokens = 0;  // positions whose KV is (or is being) written

  int32_t blocks_needed(int32_t tokens, int32_t block_size) const {
    const int32_t need = (tokens + block_size - 1) / block_size;
    return need > int32_t(blocks.size()) ? need - int32_t(blocks.size()) : 0;
  }
};

}  // namespace rf
