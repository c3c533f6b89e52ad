// DeepSeek V2/V3 (deepseek2) as the loader reads it: the published presets'
// headers (model/synthetic_deepseek.cpp) give llama.cpp's shapes — the q
// LoRA or attn_q, the compressed MLA cache of kv_lora_rank + RoPE dims, the
// per-head sizes, the YaRN attention scale, expert groups, gating and the
// shared experts — and the KV memory plan holds one row of 576 values a
// token a layer (1,152 bytes at f16, no V array); the tiny file's cache is
// allocated that way; missing or inconsistent MLA keys are named.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/kv_cache.h"
#include "model/shard.h"
#include "model/synthetic.h"
#include "testdata.h"

namespace rf {
namespace {

ModelConfig preset_config(const std::string& name, const char* type = "q4_k_m") {
  auto f = gguf::File::from_header(synthetic_header(*synthetic_preset(name), *quant_plan(type)));
  return ModelConfig::from_gguf(*f);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeepseekConfig, V3Shapes) {
  const ModelConfig c = preset_config("deepseek-v3");
  EXPECT_EQ(c.arch, "deepseek2");
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.n_layer, 61);
  EXPECT_EQ(c.n_head, 128);
  EXPECT_EQ(c.n_head_kv, 1);
  EXPECT_EQ(c.mla_q_lora, 1536);
  EXPECT_EQ(c.mla_kv_lora, 512);
  EXPECT_EQ(c.mla_k_nope, 128);
  EXPECT_EQ(c.rope.n_rot, 64);
  EXPECT_EQ(c.mla_v, 128);
  EXPECT_EQ(c.head_dim, 576);  // the compressed cache's row: latent + RoPE key
  EXPECT_EQ(c.kv_dim(), 576);
  EXPECT_FALSE(c.rope.neox);
  // YaRN factor 40 with yarn_log_multiplier 0.1: scale (1 + 0.1 ln 40)^2 /
  // sqrt(192), the rotation's own 1 + 0.1 ln 40 cancelled.
  const double m = 1.0 + 0.1 * std::log(40.0);
  EXPECT_NEAR(c.attn_scale, m * m / std::sqrt(192.0), 1e-6);
  EXPECT_NEAR(c.rope.attn_factor * (1.0 + 0.1 * std::log(40.0)), 1.0, 1e-6);
  EXPECT_EQ(c.n_layer_dense_lead, 3);
  EXPECT_EQ(c.n_expert, 256);
  EXPECT_EQ(c.n_expert_used, 8);
  EXPECT_EQ(c.n_ff_expert, 2048);
  EXPECT_EQ(c.n_ff_shexp, 2048);
  EXPECT_FALSE(c.shexp_gated);
  EXPECT_TRUE(c.expert_choice_bias);
  const MoeParams p = c.moe();
  EXPECT_EQ(p.gating, MoeGating::Sigmoid);
  EXPECT_TRUE(p.norm_weights);
  EXPECT_FLOAT_EQ(p.weights_scale, 2.5f);
  EXPECT_EQ(p.n_group, 8);
  EXPECT_EQ(p.n_group_used, 4);
  EXPECT_NE(c.summary().find("MLA"), std::string::npos) << c.summary();
  EXPECT_NE(c.summary().find("expert groups 4 of 8"), std::string::npos) << c.summary();
}

// DeepSeek-V2-Lite: no q LoRA (attn_q), softmax routing without groups or
// bias, 2 shared experts, weights unnormalised; yarn_log_multiplier 0.0707.
TEST(DeepseekConfig, V2LiteShapes) {
  const ModelConfig c = preset_config("deepseek-v2-lite");
  EXPECT_EQ(c.n_layer, 27);
  EXPECT_EQ(c.n_embd, 2048);
  EXPECT_EQ(c.n_head, 16);
  EXPECT_EQ(c.mla_q_lora, 0);
  EXPECT_EQ(c.mla_q_dim(), 16 * 192);
  EXPECT_EQ(c.head_dim, 576);
  EXPECT_EQ(c.n_layer_dense_lead, 1);
  EXPECT_EQ(c.n_expert, 64);
  EXPECT_EQ(c.n_expert_used, 6);
  EXPECT_EQ(c.n_ff_shexp, 2 * 1408);
  EXPECT_FALSE(c.expert_choice_bias);
  const MoeParams p = c.moe();
  EXPECT_EQ(p.gating, MoeGating::Softmax);
  EXPECT_FALSE(p.norm_weights);
  EXPECT_FALSE(p.grouped());
  const double m = 1.0 + 0.0707 * std::log(40.0);
  EXPECT_NEAR(c.attn_scale, m * m / std::sqrt(192.0), 1e-5);
}

// The KV memory plan: one compressed row a token a layer (576 values,
// 1,152 bytes at f16), K only.
TEST(DeepseekConfig, CompressedCachePlan) {
  const ModelConfig c = preset_config("deepseek-v3");
  const KVGeometry geo = kv_geometry(c, DType::F16, 16);
  EXPECT_EQ(geo.arrays_per_layer, 1);
  EXPECT_EQ(geo.row_bytes, 576u * 2u);
  EXPECT_EQ(geo.token_bytes(), 1152u);
  EXPECT_EQ(geo.bytes_per_block(), size_t(61) * 16 * 1152);
  EXPECT_EQ(geo.bytes_read(100), size_t(61) * 100 * 1152);
  KVBudget b;
  b.num_blocks = 10;
  const KVMemoryPlan plan(geo, b);
  EXPECT_EQ(plan.total_bytes(), size_t(61) * 10 * 16 * 1152);
  EXPECT_EQ(plan.k_offset(1), plan.array_bytes());  // the arrays follow each other, no V between
  // A model with K and V keeps two arrays a layer.
  const ModelConfig g = preset_config("glm-4.5-air");
  EXPECT_EQ(kv_geometry(g, DType::F16, 16).token_bytes(), 2u * 8 * 128 * 2);
}

// The tiny file's cache on the CPU: a K row of 40 f32 a slot and layer, no V.
TEST(DeepseekConfig, TinyCacheHoldsK) {
  RF_REQUIRE_TESTDATA("arch/tiny-deepseek2.gguf");
  auto f = gguf::File::open(test::testdata_path("arch/tiny-deepseek2.gguf"));
  const ModelConfig c = ModelConfig::from_gguf(*f);
  EXPECT_EQ(c.head_dim, 40);
  EXPECT_EQ(c.mla_k_nope, 16);
  EXPECT_EQ(c.mla_v, 16);
  EXPECT_EQ(c.n_expert_group, 4);
  EXPECT_EQ(c.n_expert_group_used, 2);
  const double m = 1.0 + 0.1 * std::log(40.0);
  EXPECT_NEAR(c.attn_scale, m * m / std::sqrt(24.0), 1e-6);
  CpuBackend be(1);
  KVBudget b;
  b.num_blocks = 4;
  const KVMemoryPlan plan(kv_geometry(c, DType::F32, 16), b);
  KVCache kv(be, c, plan, DType::F32);
  EXPECT_EQ(kv.bytes(), size_t(4) * 4 * 16 * 40 * 4);
  for (int32_t il = 0; il < c.n_layer; ++il) {
    EXPECT_EQ(kv.layer(il).n_kv_heads, 1);
    EXPECT_EQ(kv.layer(il).head_dim, 40);
    EXPECT_EQ(kv.layer(il).v, nullptr);
  }
  EXPECT_NE(error_of([&] { KVCache fp8(be, c, KVMemoryPlan(kv_geometry(c, DType::F8_E4M3, 16), b), DType::F8_E4M3); })
                .find("compressed MLA cache"),
            std::string::npos);
  EXPECT_NE(error_of([&] { shard_config(c, ShardSpec{0, 2}); }).find("multi-head latent attention"),
            std::string::npos);
}

// Keys the compressed cache needs, named when missing or inconsistent.
TEST(DeepseekConfig, MlaKeyErrors) {
  auto header = [](const std::function<void(gguf::Writer&, const std::string&)>& edit) {
    gguf::Writer w;
    const std::string a = "deepseek2.";
    w.set_string("general.architecture", "deepseek2");
    for (const auto& [k, v] : std::vector<std::pair<std::string, uint32_t>>{
             {"context_length", 4096}, {"embedding_length", 64}, {"block_count", 2}, {"feed_forward_length", 128},
             {"attention.head_count", 4}, {"attention.head_count_kv", 1}, {"vocab_size", 100},
             {"attention.key_length", 40}, {"attention.value_length", 32}, {"attention.key_length_mla", 24},
             {"attention.value_length_mla", 16}, {"attention.kv_lora_rank", 32}, {"rope.dimension_count", 8},
             {"expert_count", 8}, {"expert_used_count", 2}, {"expert_feed_forward_length", 16},
             {"expert_shared_count", 1}})
      w.set_u32(a + k, v);
    w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    edit(w, a);
    return w.header();
  };
  auto error = [&](const std::function<void(gguf::Writer&, const std::string&)>& edit) {
    return error_of([&] { ModelConfig::from_gguf(*gguf::File::from_header(header(edit))); });
  };
  EXPECT_EQ(error([](gguf::Writer&, const std::string&) {}), "");
  EXPECT_NE(error([](gguf::Writer& w, const std::string& a) { w.set_u32(a + "attention.key_length", 48); })
                .find("kv_lora_rank + rope.dimension_count"),
            std::string::npos);
  EXPECT_NE(error([](gguf::Writer& w, const std::string& a) { w.set_u32(a + "expert_group_count", 3); })
                .find("deepseek2.expert_group_count"),
            std::string::npos);
  EXPECT_NE(error([](gguf::Writer& w, const std::string& a) {
              w.set_u32(a + "expert_group_count", 4);
              w.set_u32(a + "expert_group_used_count", 5);
            }).find("deepseek2.expert_group_used_count"),
            std::string::npos);
  EXPECT_NE(error([](gguf::Writer& w, const std::string& a) { w.set_u32(a + "attention.key_length_mla", 8); })
                .find("deepseek2.attention.key_length_mla"),
            std::string::npos);
}

}  // namespace
}  // namespace rf
