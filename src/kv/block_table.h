// BlockTable: the blocks of one sequence's KV in one KV group
// (kv/group_layout.h), in order: entry i holds positions [i * block_size,
// (i + 1) * block_size). Full-attention groups keep every entry; in a
// sliding-window group the entries wholly before the window of the next
// query are released to the pool and become kNullBlock, which no kernel
// reads. The released entries are always a leading run (first_live). The
// scheduler grows and trims the tables from the BlockPool; the engine
// flattens them into the step's block tables.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kv/block_pool.h"

namespace rf {

// A table entry with no block: released as the window moved past it (or
// never taken, before a prefix-cache hit's window).
inline constexpr int32_t kNullBlock = -1;

// The first block that queries from position `first_query` on read in a
// group with this window (0: full attention, every block from 0): the
// block of key max(0, first_query - window + 1).
inline int32_t first_needed_block(int32_t window, int32_t first_query, int32_t block_size) {
  return window > 0 ? std::max(0, first_query - window + 1) / block_size : 0;
}

struct BlockTable {
  std::vector<int32_t> blocks;  // pool block ids; kNullBlock before first_live
  int32_t first_live = 0;       // entries [0, first_live) are kNullBlock

  int32_t live_blocks() const { return int32_t(blocks.size()) - first_live; }

  // Blocks to take from the pool so that entries [first, ceil(end / bs))
  // are all held (entries before `first` may stay null).
  int32_t blocks_needed(int32_t first, int32_t end, int32_t block_size) const {
    const int32_t want = (end + block_size - 1) / block_size;
    return std::max(0, want - std::max(first, int32_t(blocks.size())));
  }
  // Takes those blocks (the pool must have them): entries before `first`
  // that the table did not reach yet are added as kNullBlock (after
  // release_before(first), so the null entries stay a leading run).
  void grow(int32_t first, int32_t end, int32_t block_size, BlockPool& pool) {
    const int32_t want = (end + block_size - 1) / block_size;
    RF_CHECK(int32_t(blocks.size()) >= std::min(first, want) || first_live == int32_t(blocks.size()),
             "BlockTable::grow: live blocks before the window start ", first);
    while (int32_t(blocks.size()) < std::min(first, want)) {
      blocks.push_back(kNullBlock);
      ++first_live;
    }
    while (int32_t(blocks.size()) < want) blocks.push_back(pool.allocate());
  }
  // Releases the held entries before `first` (the window moved past them);
  // returns how many. Hashed ones stay in the pool's prefix cache.
  int32_t release_before(int32_t first, BlockPool& pool) {
    const int32_t end = std::min(first, int32_t(blocks.size()));
    int32_t n = 0;
    for (; first_live < end; ++first_live, ++n) {
      pool.release(blocks[size_t(first_live)]);
      blocks[size_t(first_live)] = kNullBlock;
    }
    return n;
  }
  // Releases the entries from `keep` on (positions a rolled-back tail no
  // longer reaches: rejected speculative tokens), tail first; returns how
  // many held blocks went back to the pool.
  int32_t release_from(int32_t keep, BlockPool& pool) {
    int32_t n = 0;
    while (int32_t(blocks.size()) > std::max(keep, 0)) {
      if (int32_t(blocks.size()) > first_live) {
        pool.release(blocks.back());
        ++n;
      } else {
        --first_live;
      }
      blocks.pop_back();
    }
    return n;
  }
  // Releases every held block, tail first (so the tail's cached blocks are
  // evicted before the prefix's), and empties the table.
  void release_all(BlockPool& pool) {
    for (int32_t i = int32_t(blocks.size()) - 1; i >= first_live; --i) pool.release(blocks[size_t(i)]);
    blocks.clear();
    first_live = 0;
  }
};

}  // namespace rf
