// Planning a step's prefill query tiles (query_tiles.h): key-range parts for
// tiles longer than a fair share, longest first.
#include "backend/query_tiles.h"

#include <algorithm>

namespace rf {

namespace {

int64_t key_tiles(const TileSpan& s, int key_tile) { return int64_t(s.last_pos) / key_tile + 1; }

}  // namespace

void plan_query_tiles(std::span<const TileSpan> spans, const TileBalance& b, QueryTilePlan& plan) {
  plan.tiles.clear();
  plan.splits.clear();
  plan.work.clear();
  const int kt_size = std::max(b.key_tile, 1);  // without splitting, only the order uses it
  // Parts per tile for a cap of `cap` key tiles a block.
  auto parts_of = [&](const TileSpan& s, int64_t cap) {
    const int64_t kt = key_tiles(s, kt_size);
    return kt > cap ? (kt + cap - 1) / cap : int64_t(1);
  };
  int64_t cap = INT64_MAX;
  // Only a step whose whole tiles leave at least half the GPU's slots idle
  // splits (a short chunk deep in its context: a chat turn after a cached
  // history, a long prompt's later chunks under a small budget). Where the
  // tiles already fill the GPU, the parts' extra blocks, partial stores and
  // sum cost more than the balance gains (H100, pp512 f16 with 256 blocks
  // on 264 slots: 34,500 -> 33,200 tok/s split).
  const int64_t whole_blocks = int64_t(spans.size()) * std::max(b.blocks_per_tile, 1);
  if (b.key_tile > 0 && b.slots > 0 && b.max_partials >= 2 && 2 * whole_blocks <= b.slots) {
    int64_t units = 0, longest = 0;
    for (const TileSpan& s : spans) {
      units += key_tiles(s, kt_size) * std::max(b.blocks_per_tile, 1);
      longest = std::max(longest, key_tiles(s, kt_size));
    }
    // A fair share of the key tiles per block slot; raised until the parts
    // fit the partial slots and their blocks the GPU at once.
    cap = std::max<int64_t>(std::max(b.min_part_tiles, 1), (units + b.slots - 1) / b.slots);
    for (;; ++cap) {
      if (cap >= longest) break;
      int64_t partials = 0, entries = 0;
      for (const TileSpan& s : spans) {
        const int64_t p = parts_of(s, cap);
        entries += p;
        if (p > 1) partials += p;
      }
      if (partials <= b.max_partials && entries * std::max(b.blocks_per_tile, 1) <= b.slots) break;
    }
  }
  int32_t next_slot = 0;
  for (const TileSpan& s : spans) {
    const int64_t kt = key_tiles(s, kt_size), parts = parts_of(s, cap);
    if (parts == 1) {
      plan.tiles.push_back(QueryTile{s.first, s.count, 0, INT32_MAX, -1});
      plan.work.push_back(kt);
      continue;
    }
    plan.splits.push_back(QuerySplit{s.first, s.count, next_slot, int32_t(parts)});
    for (int64_t j = 0; j < parts; ++j) {
      const int64_t lo = j * kt / parts, hi = (j + 1) * kt / parts;
      const int32_t key_end = j + 1 == parts ? INT32_MAX : int32_t(hi * kt_size);
      plan.tiles.push_back(QueryTile{s.first, s.count, int32_t(lo * kt_size), key_end, next_slot++});
      plan.work.push_back(hi - lo);
    }
  }
  // Longest first (ties in planning order).
  plan.order.resize(plan.tiles.size());
  for (size_t i = 0; i < plan.order.size(); ++i) plan.order[i] = int32_t(i);
  std::stable_sort(plan.order.begin(), plan.order.end(),
                   [&](int32_t x, int32_t y) { return plan.work[size_t(x)] > plan.work[size_t(y)]; });
  plan.unordered.swap(plan.tiles);
  plan.tiles.clear();
  for (const int32_t i : plan.order) plan.tiles.push_back(plan.unordered[size_t(i)]);
}

}  // namespace rf
