// KV group layout (kv/group_layout.h) and the memory plan over it: groups
// of g layers of one attention kind for the Gemma patterns (alternating
// 1:1, 5:1, tiny-gemma3's 2:1), irregular patterns, and Llama (one group of
// every layer, the plan's bytes and offsets exactly those of a cache
// without groups); per-sequence block counts, and what a 32K-token
// sequence holds on gemma2-9b and gemma3-12b shapes.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "kv/group_layout.h"
#include "kv/memory_plan.h"

namespace rf {
namespace {

// Windows per layer for llama.cpp's period rule (model/config.h
// set_swa_period): layer il is local when il % period < period - 1.
std::vector<int32_t> periodic(int32_t n_layer, int32_t period, int32_t window) {
  std::vector<int32_t> w(size_t(n_layer), 0);
  for (int32_t il = 0; il < n_layer; ++il) w[size_t(il)] = il % period < period - 1 ? window : 0;
  return w;
}

// Every group has g layers of its window's kind; each layer is in exactly
// one group, and each index 0..g-1 appears once per group.
void expect_consistent(const KVGroupLayout& L, const std::vector<int32_t>& windows) {
  const int32_t g = L.group_size();
  ASSERT_GT(g, 0);
  EXPECT_EQ(L.n_groups() * g, L.n_layer());
  std::set<int32_t> seen;
  for (int32_t gr = 0; gr < L.n_groups(); ++gr) {
    const auto layers = L.layers(gr);
    ASSERT_EQ(int32_t(layers.size()), g);
    std::set<int32_t> indices;
    for (int32_t il : layers) {
      EXPECT_TRUE(seen.insert(il).second) << "layer " << il << " twice";
      EXPECT_EQ(L.group_of(il), gr);
      EXPECT_EQ(windows[size_t(il)], L.window(gr)) << "layer " << il;
      indices.insert(L.index_in_group(il));
    }
    EXPECT_EQ(int32_t(indices.size()), g) << "group " << gr;
    EXPECT_EQ(*indices.rbegin(), g - 1);
  }
  EXPECT_EQ(int32_t(seen.size()), L.n_layer());
}

TEST(KVGroupLayout, Gemma2AlternatingLayers) {
  const auto w = periodic(42, 2, 4096);  // layers 0, 2, ... local
  const KVGroupLayout L(w);
  expect_consistent(L, w);
  EXPECT_EQ(L.group_size(), 21);
  EXPECT_EQ(L.n_groups(), 2);
  EXPECT_EQ(L.group_windows(), (std::vector<int32_t>{4096, 0}));
  EXPECT_EQ(L.n_window_groups(), 1);
  for (int32_t il = 0; il < 42; ++il) {
    EXPECT_EQ(L.group_of(il), il % 2);
    EXPECT_EQ(L.index_in_group(il), il / 2);
  }
  EXPECT_EQ(L.summary(), "2 groups of 21 layers: 1 window 4096, 1 full");
}

TEST(KVGroupLayout, Gemma3FiveLocalToOneGlobal) {
  const auto w = periodic(48, 6, 1024);  // 40 local, 8 global
  const KVGroupLayout L(w);
  expect_consistent(L, w);
  EXPECT_EQ(L.group_size(), 8);
  EXPECT_EQ(L.n_groups(), 6);
  EXPECT_EQ(L.group_windows(), (std::vector<int32_t>{1024, 1024, 1024, 1024, 1024, 0}));
  // The local layers in order, 8 per group; the global ones in the last.
  EXPECT_EQ(std::vector<int32_t>(L.layers(0).begin(), L.layers(0).end()),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 6, 7, 8}));
  EXPECT_EQ(std::vector<int32_t>(L.layers(5).begin(), L.layers(5).end()),
            (std::vector<int32_t>{5, 11, 17, 23, 29, 35, 41, 47}));
  EXPECT_EQ(L.index_in_group(47), 7);
}

TEST(KVGroupLayout, TinyGemma3TwoLocalToOneGlobal) {
  const auto w = periodic(6, 3, 8);  // 1 1 0 1 1 0
  const KVGroupLayout L(w);
  expect_consistent(L, w);
  EXPECT_EQ(L.group_size(), 2);
  EXPECT_EQ(L.group_windows(), (std::vector<int32_t>{8, 8, 0}));
  EXPECT_EQ(std::vector<int32_t>(L.layers(0).begin(), L.layers(0).end()), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(std::vector<int32_t>(L.layers(1).begin(), L.layers(1).end()), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(std::vector<int32_t>(L.layers(2).begin(), L.layers(2).end()), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(L.summary(), "3 groups of 2 layers: 2 window 8, 1 full");
}

TEST(KVGroupLayout, IrregularPatternsAndSeveralWindowSizes) {
  const std::vector<int32_t> w1 = {8, 0, 0, 8, 8};  // 3 local, 2 global: gcd 1
  const KVGroupLayout a(w1);
  expect_consistent(a, w1);
  EXPECT_EQ(a.group_size(), 1);
  EXPECT_EQ(a.group_windows(), (std::vector<int32_t>{8, 8, 8, 0, 0}));
  const std::vector<int32_t> w2 = {4, 16, 0, 4, 16, 0};  // two window sizes
  const KVGroupLayout b(w2);
  expect_consistent(b, w2);
  EXPECT_EQ(b.group_size(), 2);
  EXPECT_EQ(b.group_windows(), (std::vector<int32_t>{4, 16, 0}));
  const std::vector<int32_t> w3(4, 32);  // every layer local: one window group
  const KVGroupLayout c(w3);
  EXPECT_EQ(c.n_groups(), 1);
  EXPECT_EQ(c.group_size(), 4);
  EXPECT_EQ(c.window(0), 32);
  EXPECT_THROW(KVGroupLayout(std::vector<int32_t>{}), Error);
  EXPECT_THROW(KVGroupLayout(std::vector<int32_t>{0, -1}), Error);
}

TEST(KVGroupLayout, LlamaIsOneGroupWithTheSameBytes) {
  const int32_t n_layer = 32, bs = 16;
  const size_t row = 8 * 128 * 2;  // 8 KV heads of 128, f16
  const KVGroupLayout L(std::vector<int32_t>(size_t(n_layer), 0));
  EXPECT_EQ(L.n_groups(), 1);
  EXPECT_EQ(L.group_size(), n_layer);
  for (int32_t il = 0; il < n_layer; ++il) {
    EXPECT_EQ(L.group_of(il), 0);
    EXPECT_EQ(L.index_in_group(il), il);
  }
  // A block: both K and V of every layer for bs tokens, as without groups.
  const KVGeometry geo{L, row, bs};
  EXPECT_EQ(geo.bytes_per_block(), 2 * size_t(n_layer) * bs * row);
  KVBudget budget;
  budget.num_blocks = 100;
  const KVMemoryPlan plan(geo, budget);
  EXPECT_EQ(plan.array_bytes(), size_t(100) * bs * row);
  EXPECT_EQ(plan.total_bytes(), 2 * size_t(n_layer) * plan.array_bytes());
  for (int32_t il = 0; il < n_layer; ++il) {
    EXPECT_EQ(plan.k_offset(L.index_in_group(il)), 2 * size_t(il) * plan.array_bytes());
    EXPECT_EQ(plan.v_offset(L.index_in_group(il)), (2 * size_t(il) + 1) * plan.array_bytes());
  }
  // A sequence holds all of its blocks: the host default sizes max_seqs full contexts.
  for (int32_t n : {1, 16, 17, 4096, 32768}) EXPECT_EQ(L.max_blocks_per_sequence(n, bs, 2048), (n + bs - 1) / bs);
  EXPECT_EQ(L.max_tokens_for_blocks(100, bs, 2048), 1600);
  KVBudget host;
  host.max_seqs = 4;
  host.max_model_len = 1000;
  host.max_chunk = 256;
  EXPECT_EQ(KVMemoryPlan(geo, host).num_blocks(), 4 * 63);
}

// What one token's attention reads: every layer's K and V rows over the
// context, a window layer's over its window only (the bench's KV bandwidth).
TEST(KVGroupLayout, BytesReadPerTokenOfContext) {
  const size_t row = 100;
  const KVGeometry llama{KVGroupLayout(std::vector<int32_t>(4, 0)), row, 16};
  EXPECT_EQ(llama.bytes_read(0), 0u);
  EXPECT_EQ(llama.bytes_read(5), 2 * 4 * 5 * row);
  EXPECT_EQ(llama.bytes_read(5000), 2 * 4 * 5000 * row);
  const KVGeometry gemma{KVGroupLayout({8, 0, 8, 0}), row, 16};
  EXPECT_EQ(gemma.bytes_read(5), 2 * 4 * 5 * row);
  EXPECT_EQ(gemma.bytes_read(20), 2 * (8 + 20 + 8 + 20) * row);
  const KVGeometry mixed{KVGroupLayout({8, 8, 0, 16, 16, 0}), row, 16};
  EXPECT_EQ(mixed.bytes_read(12), 2 * (8 + 8 + 12 + 12 + 12 + 12) * row);
}

TEST(KVGroupLayout, WindowGroupsHoldTheWindowAndAChunk) {
  const int32_t bs = 16;
  const KVGroupLayout L(periodic(6, 3, 40));  // 2 window groups (40), 1 full
  // A chunk of 32 at start s reads keys from s - 39: at most (32 + 38) / 16 + 2 = 6 blocks.
  EXPECT_EQ(window_blocks_bound(40, 32, bs), 6);
  // Exhaustively: no chunk of <= 32 tokens spans more blocks than the bound.
  for (int32_t s = 0; s < 200; ++s)
    for (int32_t n = 1; n <= 32; ++n) {
      const int32_t first = std::max(0, s - 40 + 1) / bs, last = (s + n - 1) / bs;
      EXPECT_LE(last - first + 1, window_blocks_bound(40, 32, bs)) << s << " " << n;
    }
  EXPECT_EQ(L.max_blocks_per_sequence(10, bs, 32), 3);        // one block in each group
  EXPECT_EQ(L.max_blocks_per_sequence(1000, bs, 32), 63 + 2 * 6);
  EXPECT_EQ(L.max_tokens_for_blocks(63 + 12, bs, 32), 1008);  // 63 full blocks
  EXPECT_EQ(L.max_tokens_for_blocks(5, bs, 32), 16);
  // Memory plan: a block holds the 2 layers of one group.
  const KVGeometry geo{L, 64, bs};
  EXPECT_EQ(geo.bytes_per_block(), 2 * 2 * size_t(bs) * 64);
  KVBudget budget;
  budget.num_blocks = 10;
  const KVMemoryPlan plan(geo, budget);
  EXPECT_EQ(plan.total_bytes(), 4 * plan.array_bytes());
  EXPECT_EQ(plan.v_offset(1) + plan.array_bytes(), plan.total_bytes());
}

// What one 32K-token sequence holds (prefilled in 2048-token chunks, f16,
// 16-token blocks) on the published shapes: without groups every layer
// keeps 32K tokens; with them the window layers keep their window and a
// chunk.
TEST(KVGroupLayout, LongGemmaContextsAreBoundedByTheWindow) {
  struct Shape {
    const char* name;
    std::vector<int32_t> windows;
    size_t row;  // bytes of one token's K of one layer
  };
  const Shape shapes[] = {{"gemma2-9b", periodic(42, 2, 4096), 8 * 256 * 2},
                          {"gemma3-12b", periodic(48, 6, 1024), 8 * 256 * 2}};
  const int32_t bs = 16, n = 32768, chunk = 2048;
  for (const Shape& s : shapes) {
    const KVGroupLayout L(s.windows);
    const KVGeometry geo{L, s.row, bs};
    const double before = 2.0 * double(L.n_layer()) * n * double(s.row);  // every layer, every token
    const double after = double(L.max_blocks_per_sequence(n, bs, chunk)) * double(geo.bytes_per_block());
    const double decode = double(L.max_blocks_per_sequence(n, bs, 1)) * double(geo.bytes_per_block());
    std::printf("%s: 32K-token sequence %.2f GB before, %.2f GB with KV groups (%lld blocks of %.2f MB), %.2f GB "
                "once decoding\n",
                s.name, before / 1e9, after / 1e9, (long long)L.max_blocks_per_sequence(n, bs, chunk),
                double(geo.bytes_per_block()) / 1e6, decode / 1e9);
    EXPECT_LT(after, 0.6 * before) << s.name;
  }
}

}  // namespace
}  // namespace rf
