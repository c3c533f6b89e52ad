// Query tiles of a step for tile-based prefill attention kernels
// (StepMeta::q_tiles): runs of up to kQueryTileTokens consecutive tokens of
// one sequence, each a block (per KV head) that walks the tile's keys in key
// tiles. A short chunk deep in its context (a chat turn after a cached
// history) is a few tiles of many key tiles each: a few blocks walking long
// ranges while most of the GPU idles. plan_query_tiles then splits the
// tiles longer than a fair share of the GPU's block slots into parts over
// their keys (each part's block leaves an unnormalized result in a partial
// slot, and a QuerySplit tells the combine step which slots to sum); and it
// puts the entries longest first, so that a launch of several waves ends on
// short blocks. GPU-free; the CUDA backend builds its tiles with it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rf {

constexpr int kQueryTileTokens = 16;  // tokens per query tile

// One block's work per KV head: tokens [first, first + count) of one
// sequence against keys [key_begin, key_end) (also clipped to each query's
// causal and window limits by the kernel). partial >= 0: a part of a split
// tile, its unnormalized output and per-row (max, sum) go to partial slot
// `partial`; -1: the finished output.
struct QueryTile {
  int32_t first = 0, count = 0;
  int32_t key_begin = 0, key_end = INT32_MAX;
  int32_t partial = -1;
};

// A split tile: its parts' results lie in slots [partial, partial + parts).
struct QuerySplit {
  int32_t first = 0, count = 0;
  int32_t partial = 0, parts = 0;
};

// A tile before planning: its tokens and the position of its last one (it
// sees keys 0 .. last_pos).
struct TileSpan {
  int32_t first = 0, count = 0, last_pos = 0;
};

// What the kernel and the GPU allow. key_tile == 0 or slots == 0: no
// splitting (the tiles still go longest first).
struct TileBalance {
  int key_tile = 0;         // keys per key tile: part boundaries are multiples
  int blocks_per_tile = 1;  // blocks an entry launches (KV heads x head chunks)
  int slots = 0;            // blocks the GPU runs at once
  int max_partials = 0;     // partial slots available
  int min_part_tiles = 2;   // no part shorter than this many key tiles
};

struct QueryTilePlan {
  std::vector<QueryTile> tiles;    // longest first
  std::vector<QuerySplit> splits;  // the split tiles, partial slots in order
  // Planning scratch: entries in planning order, their key tiles, the order.
  std::vector<QueryTile> unordered;
  std::vector<int64_t> work;
  std::vector<int32_t> order;
};

// Fills `plan` (its vectors keep their storage from step to step).
void plan_query_tiles(std::span<const TileSpan> spans, const TileBalance& balance, QueryTilePlan& plan);

}  // namespace rf
