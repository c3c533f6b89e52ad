// plan_query_tiles (query_tiles.h): every tile's keys covered exactly once
// by its parts, parts at key-tile boundaries, splits only where a step's
// tiles would leave the GPU waiting on the longest, the partial slots
// bounded, and entries longest first.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "backend/query_tiles.h"

namespace rf {
namespace {

// One prompt of n tokens from position `start`, as the CUDA backend cuts it.
std::vector<TileSpan> prompt(int n, int start, int first_token = 0) {
  std::vector<TileSpan> spans;
  for (int t = 0; t < n; t += kQueryTileTokens) {
    const int count = std::min(kQueryTileTokens, n - t);
    spans.push_back({first_token + t, count, start + t + count - 1});
  }
  return spans;
}

int64_t work(const QueryTile& t, int last_pos, int key_tile) {
  const int64_t end = std::min<int64_t>(t.key_end, int64_t(last_pos) + 1);
  return (end + key_tile - 1) / key_tile - t.key_begin / key_tile;
}

// Every span's keys 0..last_pos are covered by its entries without overlap;
// split tiles' slots match their QuerySplit; entries go longest first.
void check_plan(const std::vector<TileSpan>& spans, const TileBalance& b, const QueryTilePlan& plan) {
  std::map<int, TileSpan> by_first;
  for (const TileSpan& s : spans) by_first[s.first] = s;
  std::map<int, std::vector<QueryTile>> parts;
  for (const QueryTile& t : plan.tiles) parts[t.first].push_back(t);
  ASSERT_EQ(parts.size(), spans.size());
  std::map<int, QuerySplit> splits;
  int slots = 0;
  for (const QuerySplit& s : plan.splits) {
    EXPECT_EQ(s.partial, slots) << "partial slots in order";
    slots += s.parts;
    splits[s.first] = s;
  }
  if (b.max_partials > 0) {
    EXPECT_LE(slots, b.max_partials);
  }
  const int kt = std::max(b.key_tile, 1);
  for (auto& [first, list] : parts) {
    const TileSpan& s = by_first.at(first);
    std::sort(list.begin(), list.end(), [](const QueryTile& x, const QueryTile& y) { return x.key_begin < y.key_begin; });
    EXPECT_EQ(list.front().key_begin, 0);
    EXPECT_EQ(list.back().key_end, INT32_MAX);
    for (size_t i = 0; i < list.size(); ++i) {
      EXPECT_EQ(list[i].count, s.count);
      EXPECT_EQ(list[i].key_begin % kt, 0);
      if (i + 1 < list.size()) {
        EXPECT_EQ(list[i].key_end, list[i + 1].key_begin);
        EXPECT_LT(list[i].key_begin, list[i].key_end) << "no empty part";
      }
    }
    if (list.size() == 1) {
      EXPECT_EQ(list[0].partial, -1);
      EXPECT_EQ(splits.count(first), 0u);
    } else {
      const QuerySplit& sp = splits.at(first);
      ASSERT_EQ(size_t(sp.parts), list.size());
      std::vector<int> got;
      for (const QueryTile& t : list) got.push_back(t.partial);
      std::sort(got.begin(), got.end());
      for (int i = 0; i < sp.parts; ++i) EXPECT_EQ(got[size_t(i)], sp.partial + i);
    }
  }
  for (size_t i = 1; i < plan.tiles.size(); ++i)
    EXPECT_GE(work(plan.tiles[i - 1], by_first.at(plan.tiles[i - 1].first).last_pos, kt),
              work(plan.tiles[i], by_first.at(plan.tiles[i].first).last_pos, kt))
        << "longest first";
}

// The plan of `spans`, checked by check_plan.
QueryTilePlan planned(const std::vector<TileSpan>& spans, const TileBalance& b) {
  QueryTilePlan plan;
  plan_query_tiles(spans, b, plan);
  check_plan(spans, b, plan);
  return plan;
}

// A 512-token prompt on an H100-like GPU (132 SMs x 2 blocks, 8 blocks a
// tile): its 256 blocks fill the GPU, so nothing splits.
TEST(QueryTiles, Prompt512StaysWhole) {
  const TileBalance b{64, 8, 264, 64, 2};
  const auto spans = prompt(512, 0);
  const QueryTilePlan plan = planned(spans, b);
  EXPECT_TRUE(plan.splits.empty());
}

// A 128-token chunk after 4,000 tokens of context: 64 blocks of 63-64 key
// tiles each on 264 slots. The tiles split to about fill the slots but not
// past them, no part much longer than the fair share (4,096 key tiles over
// 264 slots: 16).
TEST(QueryTiles, ShortChunkDeepInContextSplits) {
  const TileBalance b{64, 8, 264, 64, 2};
  const auto spans = prompt(128, 4000);
  const QueryTilePlan plan = planned(spans, b);
  EXPECT_EQ(plan.splits.size(), spans.size());
  int64_t longest = 0;
  for (const QueryTile& t : plan.tiles) longest = std::max(longest, work(t, 4000 + (t.first + t.count) - 1, 64));
  EXPECT_LE(longest, 17);
  EXPECT_LE(plan.tiles.size() * 8, 264u);
  EXPECT_GE(plan.tiles.size() * 8, 200u);
}

// Many prompts fill the GPU several times over: nothing splits, but the
// entries still go longest first.
TEST(QueryTiles, ManyPromptsDoNotSplit) {
  const TileBalance b{64, 8, 264, 64, 2};
  std::vector<TileSpan> spans;
  for (int p = 0; p < 4; ++p) {
    const auto one = prompt(512, 0, 512 * p);
    spans.insert(spans.end(), one.begin(), one.end());
  }
  const QueryTilePlan plan = planned(spans, b);
  EXPECT_TRUE(plan.splits.empty());
  EXPECT_EQ(plan.tiles.size(), spans.size());
}

// A chunk deep into a long context (a prefix hit or a later chunk): every
// tile is long; the parts must fit the partial slots.
TEST(QueryTiles, DeepChunkBoundedByPartialSlots) {
  const TileBalance b{64, 8, 264, 16, 2};
  const auto spans = prompt(128, 8000);
  const QueryTilePlan plan = planned(spans, b);
  int slots = 0;
  for (const QuerySplit& s : plan.splits) slots += s.parts;
  EXPECT_GT(slots, 0);
  EXPECT_LE(slots, 16);
}

// Head size 256: key tiles of 32; a short prompt, far below the GPU's
// slots: blocks of at most min_part_tiles key tiles, tiles of that many or
// fewer whole.
TEST(QueryTiles, ShortPromptMinimumPart) {
  const TileBalance b{32, 4, 264, 64, 2};
  const auto spans = prompt(100, 0);
  const QueryTilePlan plan = planned(spans, b);
  EXPECT_FALSE(plan.splits.empty());
  for (const QueryTile& t : plan.tiles) {
    EXPECT_LE(work(t, t.first + t.count - 1, 32), 2);
    if (t.first < 64) {
      EXPECT_EQ(t.partial, -1) << "tiles of one or two key tiles stay whole";
    }
  }
}

// Without a balance (no tile kernel, or splitting off): whole tiles.
TEST(QueryTiles, NoBalanceNoSplit) {
  const auto spans = prompt(700, 30);
  for (const TileBalance& b : {TileBalance{}, TileBalance{64, 8, 264, 0, 2}}) {
    EXPECT_TRUE(planned(spans, b).splits.empty());
  }
}

}  // namespace
}  // namespace rf
