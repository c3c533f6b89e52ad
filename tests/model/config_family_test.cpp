// Reading each family's metadata (ModelConfig::from_gguf, model/arch.cpp)
// with llama.cpp's keys and defaults: RoPE styles, Gemma's attention scale
// (the 27B's is 1/sqrt(n_embd/n_head)), soft-cap and window defaults, the
// sliding-window layer patterns (Gemma 2: every other layer from 0; Gemma 3:
// period 6 by default, a per-layer array, no window without the key), Phi-3's
// ignored window, GLM-4's partial rotary, the experts of Mixtral (llama) and
// Qwen3-MoE; missing required keys, unequal key/value lengths, bad expert
// keys and unsupported architectures are errors naming them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "error_text.h"
#include "core/error.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "model/shard.h"

namespace rf {
namespace {

// The metadata of a small model of `arch`; `edit` adds or changes keys, and
// keys named in `drop` are left out.
ModelConfig config_of(const std::string& arch, const std::function<void(gguf::Writer&, const std::string&)>& edit = {},
                      const std::vector<std::string>& drop = {}, int32_t layers = 4) {
  gguf::Writer w;
  const std::string a = arch + ".";
  auto u32 = [&](const std::string& k, uint32_t v) {
    if (std::find(drop.begin(), drop.end(), k) == drop.end()) w.set_u32(a + k, v);
  };
  w.set_string("general.architecture", arch);
  u32("context_length", 4096);
  u32("embedding_length", 512);
  u32("block_count", uint32_t(layers));
  u32("feed_forward_length", 1024);
  u32("attention.head_count", 8);
  u32("attention.head_count_kv", 4);
  u32("vocab_size", 1000);
  if (std::find(drop.begin(), drop.end(), "attention.layer_norm_rms_epsilon") == drop.end())
    w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  if (edit) edit(w, a);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("rf_config_" + arch + "_" + std::to_string(getpid()) + ".gguf"))
                               .string();
  w.write(path);
  auto f = gguf::File::open(path);
  std::filesystem::remove(path);
  return ModelConfig::from_gguf(*f);
}

using test::error_of;

std::vector<uint8_t> layers(std::initializer_list<int> v) { return std::vector<uint8_t>(v.begin(), v.end()); }

TEST(ConfigFamily, LlamaAndQwen) {
  const ModelConfig llama = config_of("llama");
  EXPECT_FALSE(llama.rope.neox);
  EXPECT_EQ(llama.head_dim, 64);
  EXPECT_FLOAT_EQ(llama.attn_scale, 1.0f / 8.0f);
  EXPECT_EQ(llama.qkv_bias, BiasUse::None);
  const ModelConfig q2 = config_of("qwen2");
  EXPECT_TRUE(q2.rope.neox);
  EXPECT_EQ(q2.qkv_bias, BiasUse::Required);
  const ModelConfig q3 = config_of("qwen3", [](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "attention.key_length", 128);
    w.set_u32(a + "attention.value_length", 128);
  });
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_EQ(q3.head_dim, 128);
  EXPECT_EQ(q3.q_dim(), 1024);  // key_length, not n_embd / n_head
  EXPECT_EQ(q3.rope.n_rot, 128);
  EXPECT_FLOAT_EQ(q3.attn_scale, 1.0f / std::sqrt(128.0f));
}

TEST(ConfigFamily, Gemma2DefaultsAndPattern) {
  const ModelConfig c = config_of("gemma2");
  EXPECT_TRUE(c.rope.neox);
  EXPECT_EQ(c.activation, Activation::GeluTanh);
  EXPECT_TRUE(c.post_attn_norm && c.post_ffn_norm);
  EXPECT_FLOAT_EQ(c.embd_scale, std::sqrt(512.0f));
  EXPECT_EQ(c.attn_softcap, 50.0f);
  EXPECT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.swa_layers, layers({1, 0, 1, 0}));
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / 8.0f);
  // The 27B (46 layers): queries scaled by 1/sqrt(n_embd / n_head).
  const ModelConfig big = config_of(
      "gemma2", [](gguf::Writer& w, const std::string& a) { w.set_u32(a + "attention.key_length", 128),
                                                                 w.set_u32(a + "attention.value_length", 128); },
      {}, 46);
  EXPECT_FLOAT_EQ(big.attn_scale, 1.0f / 8.0f);  // 512 / 8 = 64, not the head size 128
  const ModelConfig keys = config_of("gemma2", [](gguf::Writer& w, const std::string& a) {
    w.set_f32(a + "attn_logit_softcapping", 2.0f);
    w.set_f32(a + "final_logit_softcapping", 0.4f);
    w.set_u32(a + "attention.sliding_window", 8);
  });
  EXPECT_EQ(keys.attn_softcap, 2.0f);
  EXPECT_EQ(keys.final_softcap, 0.4f);
  EXPECT_EQ(keys.sliding_window, 8);
  EXPECT_EQ(&keys.rope_for(0), &keys.rope_swa);
  EXPECT_EQ(&keys.rope_for(1), &keys.rope);
  EXPECT_EQ(keys.rope_swa.freq_base, keys.rope.freq_base);
}

TEST(ConfigFamily, Gemma3Windows) {
  // No sliding_window key: every layer global, no final soft-cap.
  const ModelConfig none = config_of("gemma3", {}, {}, 12);
  EXPECT_EQ(none.sliding_window, 0);
  for (int il = 0; il < 12; ++il) EXPECT_FALSE(none.is_swa(il));
  EXPECT_EQ(none.final_softcap, 0.0f);
  EXPECT_TRUE(none.qk_norm);
  // Default period 6: layers 5 and 11 global; local RoPE base 1e4, unscaled.
  const ModelConfig def = config_of("gemma3", [](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "attention.sliding_window", 1024);
    w.set_f32(a + "rope.freq_base", 1e6f);
    w.set_string(a + "rope.scaling.type", "linear");
    w.set_f32(a + "rope.scaling.factor", 8.0f);
  }, {}, 12);
  EXPECT_EQ(def.swa_layers, layers({1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(def.rope.freq_base, 1e6f);
  EXPECT_FLOAT_EQ(def.rope.freq_scale, 0.125f);
  EXPECT_EQ(def.rope_swa.freq_base, 10000.0f);
  EXPECT_EQ(def.rope_swa.freq_scale, 1.0f);
  EXPECT_TRUE(def.rope_swa.neox);
  // An explicit period and local base, and a per-layer array.
  const ModelConfig p3 = config_of("gemma3", [](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "attention.sliding_window", 8);
    w.set_u32(a + "attention.sliding_window_pattern", 3);
    w.set_f32(a + "rope.freq_base_swa", 5000.0f);
  }, {}, 6);
  EXPECT_EQ(p3.swa_layers, layers({1, 1, 0, 1, 1, 0}));
  EXPECT_EQ(p3.rope_swa.freq_base, 5000.0f);
  const ModelConfig arr = config_of("gemma3", [](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "attention.sliding_window", 8);
    w.set_i32s(a + "attention.sliding_window_pattern", {0, 1, 1, 0});
  });
  EXPECT_EQ(arr.swa_layers, layers({0, 1, 1, 0}));
  EXPECT_NE(error_of([] {
              config_of("gemma3", [](gguf::Writer& w, const std::string& a) {
                w.set_u32(a + "attention.sliding_window", 8);
                w.set_i32s(a + "attention.sliding_window_pattern", {0, 1});
              });
            }).find("sliding_window_pattern"),
            std::string::npos);
}

TEST(ConfigFamily, Phi3AndGlm4) {
  const ModelConfig phi = config_of("phi3", [](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "attention.sliding_window", 2047);  // in real files; llama.cpp ignores it
  });
  EXPECT_TRUE(phi.rope.neox);
  EXPECT_TRUE(phi.fused_gate_up);
  EXPECT_EQ(phi.sliding_window, 0);
  const ModelConfig glm = config_of("glm4", [](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "rope.dimension_count", 32);
  });
  EXPECT_FALSE(glm.rope.neox);
  EXPECT_EQ(glm.rope.n_rot, 32);
  EXPECT_EQ(glm.head_dim, 64);
  EXPECT_EQ(glm.qkv_bias, BiasUse::Optional);
  EXPECT_TRUE(glm.post_attn_norm && glm.post_ffn_norm && glm.fused_gate_up);
  EXPECT_NE(glm.summary().find("rotary 32/64"), std::string::npos) << glm.summary();
}

TEST(ConfigFamily, BadMetadataIsNamed) {
  EXPECT_NE(error_of([] { config_of("gemma2", {}, {"attention.layer_norm_rms_epsilon"}); })
                .find("'gemma2.attention.layer_norm_rms_epsilon'"),
            std::string::npos);
  EXPECT_NE(error_of([] { config_of("qwen3", {}, {"context_length"}); }).find("qwen3.context_length"),
            std::string::npos);
  EXPECT_NE(error_of([] { config_of("glm4", {}, {"embedding_length"}); }).find("glm4.embedding_length"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              config_of("qwen2", [](gguf::Writer& w, const std::string& a) {
                w.set_u32(a + "attention.value_length", 32);
              });
            }).find("value_length"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              config_of("glm4", [](gguf::Writer& w, const std::string& a) { w.set_u32(a + "rope.dimension_count", 65); });
            }).find("rope.dimension_count"),
            std::string::npos);
  const std::string arch = error_of([] { config_of("gpt2"); });
  EXPECT_NE(arch.find("unsupported model architecture 'gpt2'"), std::string::npos) << arch;
  const std::string moe = error_of([] {
    config_of("qwen2", [](gguf::Writer& w, const std::string& a) { w.set_u32(a + "expert_count", 8); });
  });
  EXPECT_NE(moe.find("mixture-of-experts"), std::string::npos) << moe;
}

TEST(ConfigFamily, Experts) {
  const ModelConfig dense = config_of("llama");
  EXPECT_FALSE(dense.has_experts());
  EXPECT_EQ(dense.moe().n_expert, 0);
  // Mixtral: llama with experts, each feed_forward_length wide.
  const ModelConfig mixtral = config_of("llama", [](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "expert_count", 8);
    w.set_u32(a + "expert_used_count", 2);
  });
  EXPECT_FALSE(mixtral.rope.neox);
  EXPECT_TRUE(mixtral.has_experts());
  const MoeParams m = mixtral.moe();
  EXPECT_EQ(m.n_expert, 8);
  EXPECT_EQ(m.n_used, 2);
  EXPECT_EQ(m.n_ff, 1024);
  EXPECT_TRUE(m.norm_weights);
  EXPECT_EQ(m.act, Activation::SiLU);
  EXPECT_NE(mixtral.summary().find("8 experts (2 used) of ffn 1024"), std::string::npos) << mixtral.summary();
  // Qwen3-MoE: qwen3's blocks; expert width from its own key, else
  // feed_forward_length / expert_used_count (llama.cpp's default).
  const ModelConfig q = config_of("qwen3moe", [](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "expert_count", 128);
    w.set_u32(a + "expert_used_count", 8);
    w.set_u32(a + "expert_feed_forward_length", 768);
  });
  EXPECT_TRUE(q.rope.neox);
  EXPECT_TRUE(q.qk_norm);
  EXPECT_EQ(q.n_expert, 128);
  EXPECT_EQ(q.n_expert_used, 8);
  EXPECT_EQ(q.n_ff_expert, 768);
  const ModelConfig q_default = config_of("qwen3moe", [](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "expert_count", 16);
    w.set_u32(a + "expert_used_count", 4);
  });
  EXPECT_EQ(q_default.n_ff_expert, 1024 / 4);
  // expert_weights_norm, an optional bool (default true).
  const ModelConfig unnormed = config_of("qwen3moe", [](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "expert_count", 8);
    w.set_u32(a + "expert_used_count", 2);
    w.set_bool(a + "expert_weights_norm", false);
  });
  EXPECT_FALSE(unnormed.moe().norm_weights);
  EXPECT_NE(unnormed.summary().find("weights unnormalised"), std::string::npos) << unnormed.summary();
}

TEST(ConfigFamily, BadExpertMetadataIsNamed) {
  using Edit = std::function<void(gguf::Writer&, const std::string&)>;
  auto experts = [](int64_t count, int64_t used) -> Edit {
    return [=](gguf::Writer& w, const std::string& a) {
      if (count >= 0) w.set_u32(a + "expert_count", uint32_t(count));
      if (used >= 0) w.set_u32(a + "expert_used_count", uint32_t(used));
    };
  };
  struct Case {
    std::string arch;
    Edit edit;
    std::vector<std::string> expect;  // substrings of the message
  };
  const std::vector<Case> cases = {
      {"qwen3moe", experts(-1, 2), {"'qwen3moe.expert_count'"}},       // required for qwen3moe
      {"qwen3moe", experts(0, 0), {"'qwen3moe.expert_count'", "out of range"}},
      {"llama", experts(8, -1), {"'llama.expert_used_count'"}},         // required with experts
      {"llama", experts(8, 9), {"'llama.expert_used_count' = 9", "(1..8)"}},
      {"llama", experts(8, 0), {"'llama.expert_used_count' = 0"}},
      {"llama", experts(-1, 2), {"'llama.expert_used_count' = 2 without experts"}},
      {"llama", experts(1000, 2), {"'llama.expert_count' = 1000"}},
      {"llama",
       [=](gguf::Writer& w, const std::string& a) {
         experts(4, 2)(w, a);
         w.set_string(a + "expert_weights_norm", "yes");
       },
       {"llama.expert_weights_norm", "expected a bool"}},
      {"qwen3moe",
       [=](gguf::Writer& w, const std::string& a) {
         experts(4, 2)(w, a);
         w.set_u32(a + "expert_feed_forward_length", 0);
       },
       {"'qwen3moe.expert_feed_forward_length' = 0"}},
      {"qwen2", experts(8, 2), {"'qwen2' with 8 experts", "qwen2.expert_count", "mixture-of-experts"}},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of([&] { config_of(c.arch, c.edit); });
    for (const std::string& e : c.expect) EXPECT_NE(msg.find(e), std::string::npos) << c.arch << ": " << msg;
  }
}

}  // namespace
}  // namespace rf

namespace rf {
namespace {

// Gemma 4's metadata as the 26B-A4B-style tiny file has it (6 layers,
// window layers 0, 1, 3, 4), with `edit` changing keys.
ModelConfig gemma4_of(const std::function<void(gguf::Writer&, const std::string&)>& edit = {},
                      const std::vector<std::string>& drop = {}) {
  return config_of(
      "gemma4",
      [&](gguf::Writer& w, const std::string& a) {
        auto u32 = [&](const std::string& k, uint32_t v) {
          if (std::find(drop.begin(), drop.end(), k) == drop.end()) w.set_u32(a + k, v);
        };
        w.set_i32s(a + "feed_forward_length", {64, 64, 64, 128, 128, 128});
        w.set_i32s(a + "attention.head_count_kv", {2, 2, 1, 2, 2, 1});
        u32("attention.key_length", 128);
        u32("attention.value_length", 128);
        u32("attention.key_length_swa", 64);
        u32("attention.value_length_swa", 64);
        u32("attention.sliding_window", 8);
        w.set_i32s(a + "attention.sliding_window_pattern", {1, 1, 0, 1, 1, 0});
        w.set_f32(a + "rope.freq_base", 1e6f);
        w.set_f32(a + "rope.freq_base_swa", 1e4f);
        w.set_f32(a + "final_logit_softcapping", 30.0f);
        if (edit) edit(w, a);
      },
      [&] {
        std::vector<std::string> d = {"feed_forward_length", "attention.head_count_kv"};
        d.insert(d.end(), drop.begin(), drop.end());
        return d;
      }(),
      6);
}

// GLM-4.5 (glm4moe): llama.cpp's keys and defaults (sigmoid gating, weights
// unnormalised, scale 1 where 0 or absent), the shared expert's width
// (expert_feed_forward_length x expert_shared_count), the leading dense
// layers and the MTP blocks counted in block_count; missing or bad keys named.
TEST(ConfigFamily, Glm4Moe) {
  auto glm = [](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "expert_count", 128);
    w.set_u32(a + "expert_used_count", 8);
    w.set_u32(a + "expert_feed_forward_length", 1408);
    w.set_u32(a + "expert_shared_count", 1);
    w.set_u32(a + "leading_dense_block_count", 1);
    w.set_u32(a + "expert_gating_func", 2);
    w.set_f32(a + "expert_weights_scale", 2.5f);
    w.set_bool(a + "expert_weights_norm", true);
    w.set_u32(a + "nextn_predict_layers", 1);
  };
  const ModelConfig c = config_of("glm4moe", glm, {}, 5);
  EXPECT_TRUE(c.rope.neox);
  EXPECT_EQ(c.qkv_bias, BiasUse::Required);
  EXPECT_FALSE(c.qk_norm);  // (no attn_q_norm tensor in this file)
  EXPECT_EQ(c.ffn_norm_name, "post_attention_norm");
  EXPECT_EQ(c.n_layer, 4);
  EXPECT_EQ(c.n_layer_nextn, 1);
  EXPECT_EQ(c.n_layer_dense_lead, 1);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_EQ(c.n_ff_expert, 1408);
  EXPECT_EQ(c.n_ff_shexp, 1408);
  EXPECT_FALSE(c.shexp_gated);
  EXPECT_TRUE(c.expert_choice_bias);
  const MoeParams p = c.moe();
  EXPECT_EQ(p.gating, MoeGating::Sigmoid);
  EXPECT_FLOAT_EQ(p.weights_scale, 2.5f);
  EXPECT_TRUE(p.norm_weights);
  EXPECT_NE(c.summary().find("sigmoid routing"), std::string::npos) << c.summary();
  // llama.cpp's defaults: no gating key is sigmoid, norm false, scale 0 is 1.
  const ModelConfig d = config_of("glm4moe", [&](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "expert_count", 8);
    w.set_u32(a + "expert_used_count", 2);
    w.set_u32(a + "expert_feed_forward_length", 16);
    w.set_u32(a + "expert_shared_count", 2);
    w.set_f32(a + "expert_weights_scale", 0.0f);
  });
  EXPECT_EQ(d.moe().gating, MoeGating::Sigmoid);
  EXPECT_FALSE(d.moe().norm_weights);
  EXPECT_FLOAT_EQ(d.moe().weights_scale, 1.0f);
  EXPECT_EQ(d.n_ff_shexp, 32);
  EXPECT_EQ(d.n_layer_dense_lead, 0);
  // Missing required keys and bad values are named.
  for (const char* key : {"expert_feed_forward_length", "expert_shared_count", "expert_count", "expert_used_count"}) {
    const std::string msg = error_of([&] {
      config_of("glm4moe", [&](gguf::Writer& w, const std::string& a) {
        const std::pair<const char*, uint32_t> keys[] = {{"expert_count", 8},
                                                         {"expert_used_count", 2},
                                                         {"expert_feed_forward_length", 16},
                                                         {"expert_shared_count", 1}};
        for (const auto& [k, v] : keys)
          if (std::string(k) != key) w.set_u32(a + k, v);
      });
    });
    EXPECT_NE(msg.find(std::string("glm4moe.") + key), std::string::npos) << key << ": " << msg;
  }
  auto bad = [&](const char* key, uint32_t v) {
    return error_of([&] {
      config_of("glm4moe", [&](gguf::Writer& w, const std::string& a) {
        glm(w, a);
        w.set_u32(a + key, v);
      }, {}, 5);
    });
  };
  EXPECT_NE(bad("expert_gating_func", 3).find("glm4moe.expert_gating_func"), std::string::npos);
  EXPECT_NE(bad("leading_dense_block_count", 9).find("glm4moe.leading_dense_block_count"), std::string::npos);
  EXPECT_NE(bad("nextn_predict_layers", 5).find("glm4moe.nextn_predict_layers"), std::string::npos);
}

TEST(ConfigFamily, Gemma4LayerShapes) {
  const ModelConfig c = gemma4_of();
  EXPECT_EQ(c.swa_layers, layers({1, 1, 0, 1, 1, 0}));
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.layer_head_dim, (std::vector<int32_t>{64, 64, 128, 64, 64, 128}));
  EXPECT_EQ(c.layer_n_head_kv, (std::vector<int32_t>{2, 2, 1, 2, 2, 1}));
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.layer_n_ff, (std::vector<int32_t>{64, 64, 64, 128, 128, 128}));
  EXPECT_EQ(c.n_ff, 128);
  EXPECT_EQ(c.q_dim_of(0), 8 * 64);
  EXPECT_EQ(c.q_dim_of(2), 8 * 128);
  EXPECT_EQ(c.kv_dim_of(2), 128);
  EXPECT_EQ(c.max_kv_dim(), 128);
  EXPECT_EQ(c.rope.n_rot, 128);
  EXPECT_EQ(c.rope_swa.n_rot, 64);  // rope.dimension_count_swa's default: key_length_swa
  EXPECT_EQ(c.rope_swa.freq_base, 1e4f);
  EXPECT_TRUE(c.freq_factors_full_only);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f);
  EXPECT_TRUE(c.qk_norm && c.v_norm && c.post_attn_norm && c.post_ffn_norm && c.layer_out_scale);
  EXPECT_EQ(c.final_softcap, 30.0f);
  EXPECT_TRUE(c.kv_source.empty());  // no shared_kv_layers key
  EXPECT_FALSE(c.has_experts());
  EXPECT_EQ(c.n_embd_per_layer, 0);
  EXPECT_TRUE(c.stepwise_layers());
  // Shared KV: the last 3 layers reuse layer 1 (window) and layer 2 (full),
  // as llama.cpp's n_kv_from_start - 2 / - 1.
  const ModelConfig s = gemma4_of([](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "attention.shared_kv_layers", 3);
    w.set_u32(a + "embedding_length_per_layer_input", 8);
  });
  EXPECT_EQ(s.kv_source, (std::vector<int32_t>{0, 1, 2, 1, 1, 2}));
  EXPECT_TRUE(s.shares_kv(3) && s.shares_kv(5) && !s.shares_kv(2));
  EXPECT_EQ(s.n_embd_per_layer, 8);
  // Experts beside the dense FFN.
  const ModelConfig moe = gemma4_of([](gguf::Writer& w, const std::string& a) {
    w.set_u32(a + "expert_count", 8);
    w.set_u32(a + "expert_used_count", 2);
    w.set_u32(a + "expert_feed_forward_length", 16);
  });
  EXPECT_TRUE(moe.has_experts() && moe.moe_with_dense);
  EXPECT_EQ(moe.n_ff_expert, 16);
  EXPECT_EQ(moe.expert_activation, Activation::GeluTanh);
}

TEST(ConfigFamily, Gemma4BadMetadataIsNamed) {
  auto err = [](const std::function<void(gguf::Writer&, const std::string&)>& edit,
                const std::vector<std::string>& drop = {}) { return error_of([&] { gemma4_of(edit, drop); }); };
  EXPECT_NE(err({}, {"attention.key_length_swa"}).find("'gemma4.attention.key_length_swa'"), std::string::npos);
  EXPECT_NE(err({}, {"attention.sliding_window"}).find("'gemma4.attention.sliding_window'"), std::string::npos);
  EXPECT_NE(err([](gguf::Writer& w, const std::string& a) { w.set_u32(a + "attention.value_length_swa", 32); })
                .find("value_length_swa"),
            std::string::npos);
  EXPECT_NE(err([](gguf::Writer& w, const std::string& a) { w.set_u32(a + "attention.key_length_swa", 256); })
                .find("key_length_swa"),
            std::string::npos);
  EXPECT_NE(err([](gguf::Writer& w, const std::string& a) { w.set_u32(a + "attention.shared_kv_layers", 5); })
                .find("shared_kv_layers"),
            std::string::npos);
  // 2 shared layers: window layer 4 would reuse layer 2 (full).
  EXPECT_NE(err([](gguf::Writer& w, const std::string& a) { w.set_u32(a + "attention.shared_kv_layers", 2); })
                .find("layer 4 would reuse the KV of layer 2"),
            std::string::npos);
  EXPECT_NE(err([](gguf::Writer& w, const std::string& a) {
              w.set_i32s(a + "feed_forward_length", {64, 64});
            }).find("'gemma4.feed_forward_length' has 2 entries"),
            std::string::npos);
  EXPECT_NE(err([](gguf::Writer& w, const std::string& a) {
              w.set_i32s(a + "attention.head_count_kv", {2, 2, 3, 2, 2, 1});
            }).find("head_count_kv 3"),
            std::string::npos);
  EXPECT_NE(err([](gguf::Writer& w, const std::string& a) {
              w.set_i32s(a + "attention.head_count_kv", {2, 2, 0, 2, 2, 1});
            }).find("'gemma4.attention.head_count_kv'"),
            std::string::npos);
  EXPECT_NE(err([](gguf::Writer& w, const std::string& a) {
              w.set_u32(a + "expert_count", 8);
              w.set_u32(a + "expert_used_count", 2);
            }).find("'gemma4.expert_feed_forward_length'"),
            std::string::npos);
  EXPECT_NE(err([](gguf::Writer& w, const std::string& a) {
              w.set_u32(a + "embedding_length_per_layer_input", 100000);
            }).find("embedding_length_per_layer_input"),
            std::string::npos);
  // Tensor parallelism refuses it, naming what it lacks.
  const ModelConfig c = gemma4_of();
  EXPECT_NE(error_of([&] { shard_config(c, ShardSpec{0, 2}); }).find("tensor parallelism of 'gemma4'"),
            std::string::npos);
}

}  // namespace
}  // namespace rf
