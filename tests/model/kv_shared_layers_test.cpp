// The KV memory of Gemma 4 (tiny-gemma4.gguf: layers 0, 1, 3, 4 sliding
// window 8, layers 2 and 5 full; head size 16 on window layers and 32 on
// full ones; layers 3-5 share the KV of layers 1 and 2): shared-KV layers
// belong to no KV group and hold no blocks, window groups only the window,
// so a 32K-token plan holds exactly the full layer's 32K tokens plus two
// windows; the cache maps each shared layer onto its source layer's arrays,
// and each layer sees its own head size, its slots as far apart as the
// widest layer's (the arrays are shared: blocks of every group index them).
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "gguf/reader.h"
#include "model/kv_cache.h"
#include "model/synthetic.h"
#include "testdata.h"

namespace rf {
namespace {

ModelConfig tiny_gemma4() {
  auto f = gguf::File::open(test::testdata_path("arch/tiny-gemma4.gguf"));
  return ModelConfig::from_gguf(*f);
}

TEST(KVSharedLayers, SharedLayersHoldNoBlocks) {
  RF_REQUIRE_TESTDATA("arch/tiny-gemma4.gguf");
  const ModelConfig c = tiny_gemma4();
  ASSERT_EQ(c.kv_source, (std::vector<int32_t>{0, 1, 2, 1, 1, 2}));
  const KVGroupLayout g = kv_group_layout(c);
  for (int32_t il = 0; il < 3; ++il) EXPECT_TRUE(g.has_kv(il)) << il;
  for (int32_t il = 3; il < 6; ++il) EXPECT_FALSE(g.has_kv(il)) << il;
  // Window layers 0 and 1 (one window kind of 2 layers), full layer 2: groups of 1.
  EXPECT_EQ(g.n_kv_layers(), 3);
  EXPECT_EQ(g.group_size(), 1);
  EXPECT_EQ(g.group_windows(), (std::vector<int32_t>{8, 8, 0}));
  EXPECT_EQ(g.summary(), "3 groups of 1 layers: 2 window 8, 1 full (3 layers without KV)");

  // A 32K-token sequence in 512-token chunks: the full group keeps all
  // 2048 blocks, each window group the window and a chunk.
  const int32_t bs = 16, ctx = 32768, chunk = 512;
  const int64_t window_blocks = window_blocks_bound(8, chunk, bs);
  EXPECT_EQ(window_blocks, 34);
  EXPECT_EQ(g.max_blocks_per_sequence(ctx, bs, chunk), 2048 + 2 * window_blocks);
  // Rows as wide as the widest KV layer's (layer 2: 1 KV head of 32 f32).
  const KVGeometry geo = kv_geometry(c, DType::F32, bs);
  EXPECT_EQ(geo.row_bytes, 32u * 4u);
  KVBudget budget;
  budget.max_seqs = 1;
  budget.max_model_len = ctx;
  budget.max_chunk = chunk;
  const KVMemoryPlan plan(geo, budget);
  EXPECT_EQ(plan.num_blocks(), 2048 + 2 * window_blocks);
  // K and V of one layer's 32K tokens plus two windows — nothing for layers 3-5.
  EXPECT_EQ(plan.total_bytes(), size_t(2048 + 2 * window_blocks) * bs * 2 * geo.row_bytes);

  // The same model without shared KV keeps layers 3-5 too: twice the bytes.
  ModelConfig own = c;
  own.kv_source.clear();
  const KVGeometry geo_own = kv_geometry(own, DType::F32, bs);
  EXPECT_EQ(geo_own.groups.n_kv_layers(), 6);
  KVMemoryPlan plan_own(geo_own, budget);
  EXPECT_EQ(plan_own.total_bytes(), 2 * plan.total_bytes());
}

TEST(KVSharedLayers, CacheMapsSharedLayersOntoTheirSource) {
  RF_REQUIRE_TESTDATA("arch/tiny-gemma4.gguf");
  const ModelConfig c = tiny_gemma4();
  CpuBackend be(1);
  KVBudget budget;
  budget.num_blocks = 8;
  const KVMemoryPlan plan(kv_geometry(c, DType::F32, 16), budget);
  KVCache kv(be, c, plan, DType::F32);
  EXPECT_EQ(kv.layer(3).k, kv.layer(1).k);
  EXPECT_EQ(kv.layer(4).v, kv.layer(1).v);
  EXPECT_EQ(kv.layer(5).k, kv.layer(2).k);
  // The groups' layers share the arrays (their blocks differ): the window
  // layers' 16-wide slots lie the full layer's 32 apart.
  EXPECT_EQ(kv.layer(0).k, kv.layer(2).k);
  EXPECT_EQ(kv.layer(0).slot_elems(), 32);
  EXPECT_EQ(kv.layer(1).slot_elems(), 32);
  EXPECT_EQ(kv.layer(2).slot_stride, 0);
  EXPECT_EQ(kv.layer(0).head_dim, 16);
  EXPECT_EQ(kv.layer(2).head_dim, 32);
  EXPECT_EQ(kv.layer(5).head_dim, 32);
  EXPECT_EQ(kv.layer(1).n_kv_heads, 1);
  EXPECT_EQ(kv.bytes(), plan.total_bytes());
}

// The full-size presets as the loader reads their headers: gemma4-31b's
// 50 window layers keep 1024 + a chunk of tokens, its 10 full ones all
// 32K; 16 KV heads of 256 on window layers and 4 of 512 (K as V) on full
// ones, so a slot is 4096 elements wide.
TEST(KVSharedLayers, FullSizeGemma4Plan) {
  const auto p = *synthetic_preset("gemma4-31b");
  auto f = gguf::File::from_header(synthetic_header(p, *quant_plan("q4_k_m")));
  const ModelConfig c = ModelConfig::from_gguf(*f);
  EXPECT_EQ(c.head_dim_of(0), 256);
  EXPECT_EQ(c.head_dim_of(5), 512);
  EXPECT_EQ(c.n_head_kv_of(0), 16);
  EXPECT_EQ(c.n_head_kv_of(5), 4);
  EXPECT_EQ(c.rope_swa.n_rot, 256);
  EXPECT_EQ(c.rope.n_rot, 512);
  EXPECT_TRUE(c.kv_source.empty());
  const KVGeometry geo = kv_geometry(c, DType::F16, 16);
  EXPECT_EQ(geo.row_bytes, 2u * 4096u);
  EXPECT_EQ(geo.group_size(), 10);  // gcd(50, 10): 5 window groups, 1 full
  EXPECT_EQ(geo.groups.n_window_groups(), 5);
  const int64_t window = window_blocks_bound(1024, 2048, 16);
  EXPECT_EQ(geo.groups.max_blocks_per_sequence(32768, 16, 2048), 2048 + 5 * window);
  const auto e2b_like = *synthetic_preset("tiny-gemma4");
  auto ft = gguf::File::from_header(synthetic_header(e2b_like, *quant_plan("f16")));
  const ModelConfig t = ModelConfig::from_gguf(*ft);
  EXPECT_EQ(t.kv_source, (std::vector<int32_t>{0, 1, 2, 1, 1, 2}));
  EXPECT_EQ(kv_group_layout(t).n_kv_layers(), 3);
}

}  // namespace
}  // namespace rf
