// The KV cache's element types (model/kv_cache.h): the bytes of a token's
// row for f16, f32 and the 8-bit e4m3 cache (its elements, then one f32
// scale per KV head); how KVCache carves an F8_E4M3 cache on the CPU (each
// K or V array's scales just past its elements, inside the allocation, the
// next array right after them), with and without sliding-window KV groups;
// --kv-cache-dtype's parsing and what each value means on the CPU backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "error_text.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "model/kv_cache.h"

namespace rf {
namespace {

ModelConfig config(int32_t n_layer, int32_t n_kv, int32_t hd, int32_t window = 0) {
  ModelConfig c;
  c.arch = "llama";
  c.n_layer = n_layer;
  c.n_head = 4 * n_kv;
  c.n_head_kv = n_kv;
  c.head_dim = hd;
  c.n_embd = c.n_head * hd;
  c.sliding_window = window;
  c.swa_layers.assign(size_t(n_layer), 0);
  for (int32_t il = 0; il < n_layer; il += 2) c.swa_layers[size_t(il)] = window > 0;  // 0, 2, ...: local
  return c;
}

using test::error_of;

TEST(KVCacheDType, RowBytesPerElementType) {
  for (const auto& [n_kv, hd] : std::vector<std::pair<int32_t, int32_t>>{{8, 128}, {4, 8}, {1, 256}, {2, 64}}) {
    const ModelConfig c = config(4, n_kv, hd);
    const size_t kv_dim = size_t(n_kv) * size_t(hd);
    EXPECT_EQ(kv_geometry(c, DType::F32, 16).row_bytes, 4 * kv_dim);
    EXPECT_EQ(kv_geometry(c, DType::F16, 16).row_bytes, 2 * kv_dim);
    const KVGeometry g8 = kv_geometry(c, DType::F8_E4M3, 16);
    EXPECT_EQ(g8.row_bytes, kv_dim + 4 * size_t(n_kv)) << n_kv << " x " << hd;
    // Relative to f16: (hd + 4) / (2 hd), e.g. 0.516 at head_dim 128.
    EXPECT_DOUBLE_EQ(double(g8.row_bytes) / double(kv_geometry(c, DType::F16, 16).row_bytes),
                     double(hd + 4) / double(2 * hd));
    EXPECT_EQ(g8.bytes_per_block(), 2 * size_t(4) * 16 * g8.row_bytes);
  }
}

// Carves an F8_E4M3 cache for `c` and checks every layer's arrays.
void expect_fp8_carving(const ModelConfig& c, int32_t num_blocks, int32_t bs) {
  CpuBackend be(1);
  KVBudget budget;
  budget.num_blocks = num_blocks;
  const KVMemoryPlan plan(kv_geometry(c, DType::F8_E4M3, bs), budget);
  const KVCache kv(be, c, plan, DType::F8_E4M3);
  EXPECT_EQ(kv.type(), DType::F8_E4M3);
  EXPECT_EQ(kv.bytes(), plan.total_bytes());
  const size_t slots = size_t(num_blocks) * size_t(bs);
  const size_t elems = slots * size_t(c.kv_dim());  // one array's e4m3 bytes
  const size_t scales = slots * size_t(c.n_head_kv);
  ASSERT_EQ(elems + 4 * scales, plan.array_bytes());
  auto* base = static_cast<const uint8_t*>(kv.layer(0).k);
  for (int32_t il = 0; il < c.n_layer; ++il) base = std::min(base, static_cast<const uint8_t*>(kv.layer(il).k));
  const uint8_t* end = base + kv.bytes();
  std::set<const void*> k_arrays;
  for (int32_t il = 0; il < c.n_layer; ++il) {
    const KVLayer& l = kv.layer(il);
    SCOPED_TRACE("layer " + std::to_string(il));
    EXPECT_EQ(l.type, DType::F8_E4M3);
    EXPECT_EQ(l.n_kv_heads, c.n_head_kv);
    EXPECT_EQ(l.head_dim, c.head_dim);
    ASSERT_NE(l.k_scale, nullptr);
    ASSERT_NE(l.v_scale, nullptr);
    const auto* k = static_cast<const uint8_t*>(l.k);
    const auto* v = static_cast<const uint8_t*>(l.v);
    EXPECT_EQ(k, base + plan.k_offset(kv.groups().index_in_group(il)));
    // Scales just past the elements; the V array right after K's scales.
    EXPECT_EQ(reinterpret_cast<const uint8_t*>(l.k_scale), k + elems);
    EXPECT_EQ(reinterpret_cast<const uint8_t*>(l.v_scale), v + elems);
    EXPECT_EQ(reinterpret_cast<const uint8_t*>(l.k_scale + scales), v);
    EXPECT_LE(reinterpret_cast<const uint8_t*>(l.v_scale + scales), end);
    EXPECT_GE(k, base);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(l.k_scale) % alignof(float), 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(l.v_scale) % alignof(float), 0u);
    k_arrays.insert(l.k);
  }
  // One K/V pair per index within a KV group, the last one ending the allocation.
  EXPECT_EQ(int32_t(k_arrays.size()), kv.groups().group_size());
  EXPECT_EQ(static_cast<const uint8_t*>(*k_arrays.rbegin()) + 2 * plan.array_bytes(), end);
}

TEST(KVCacheDType, Fp8CacheCarvesScalesAfterEachArray) {
  expect_fp8_carving(config(3, 2, 64), 10, 16);
  expect_fp8_carving(config(5, 4, 8), 7, 4);            // stories260K's shape, odd block count
  expect_fp8_carving(config(6, 2, 16, 8), 9, 16);      // 3 local and 3 global layers: KV groups of 3
}

TEST(KVCacheDType, F32CacheHasNoScales) {
  CpuBackend be(1);
  const ModelConfig c = config(2, 2, 16);
  KVBudget budget;
  budget.num_blocks = 4;
  const KVCache kv(be, c, KVMemoryPlan(kv_geometry(c, DType::F32, 16), budget), DType::F32);
  for (int32_t il = 0; il < c.n_layer; ++il) {
    EXPECT_EQ(kv.layer(il).k_scale, nullptr);
    EXPECT_EQ(kv.layer(il).v_scale, nullptr);
  }
  // A plan made for another element type is refused.
  EXPECT_THROW(KVCache(be, c, KVMemoryPlan(kv_geometry(c, DType::F32, 16), budget), DType::F8_E4M3), Error);
  // The CPU backend has no f16 cache.
  EXPECT_THROW(KVCache(be, c, KVMemoryPlan(kv_geometry(c, DType::F16, 16), budget), DType::F16), Error);
}

TEST(KVCacheDType, ParsingAndMeaningOnTheCpu) {
  EXPECT_EQ(parse_kv_cache_dtype("auto"), KVCacheDType::Auto);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), KVCacheDType::Fp8);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e4m3"), KVCacheDType::Fp8);
  for (const char* bad : {"fp16", "FP8", "", "fp8_e5m2", "int8"}) {
    const std::string e = error_of([&] { parse_kv_cache_dtype(bad); });
    EXPECT_NE(e.find(std::string("'") + bad + "'"), std::string::npos) << e;
    EXPECT_NE(e.find("auto, fp8 or fp8_e4m3"), std::string::npos) << e;
  }
  CpuBackend cpu(1);
  EXPECT_EQ(kv_element_type(cpu, KVCacheDType::Fp8), DType::F8_E4M3);
  EXPECT_EQ(kv_element_type(cpu, KVCacheDType::Auto), DType::F32);
  EXPECT_TRUE(cpu.supports_kv_type(DType::F8_E4M3));
  EXPECT_FALSE(cpu.supports_kv_type(DType::F16));
  EXPECT_STREQ(dtype_name(DType::F8_E4M3), "f8_e4m3");
  EXPECT_FALSE(dtype_info(uint32_t(DType::F8_E4M3)).has_value());  // never a GGUF file's type
}

}  // namespace
}  // namespace rf
