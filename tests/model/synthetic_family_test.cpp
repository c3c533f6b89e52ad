// Synthetic models of every family (model/synthetic.h): the tiny-* presets
// written as f16 and q4_k_m load with the building blocks their architecture
// implies and run (finite logits, batched == alone to rounding; hybrid ones
// with their MTP block loaded); the q4_k_m mixture's
// rules for tied embeddings, fused q/k/v and mixtures of experts, and those of
// the non-linear and low-bit i-quant plans; the
// published shapes of the full-size presets.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "backend/cpu/cpu_backend.h"
#include "gguf/reader.h"
#include "model/runner.h"
#include "model/synthetic.h"
#include "model/temp_model.h"

namespace rf {
namespace {

using test::TempModel;

struct FamilyCase {
  std::string preset, type;
};

class SyntheticFamily : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(SyntheticFamily, LoadsWithItsBlocksAndRuns) {
  const FamilyCase fc = GetParam();
  TempModel tm(fc.preset, fc.type, 3);
  CpuBackend backend(2);
  test::ModelRunner runner(tm.path(), backend, 64, 4, 32, 8);
  const ModelConfig& c = runner.model().config();
  const auto p = *synthetic_preset(fc.preset);
  EXPECT_EQ(c.arch, p.arch);
  EXPECT_EQ(c.head_dim, p.hd());
  EXPECT_EQ(c.n_layer, p.n_layer);
  EXPECT_EQ(c.qk_norm, p.qk_norm);
  EXPECT_EQ(c.post_attn_norm, p.post_norms);
  EXPECT_EQ(c.fused_gate_up, p.fused_gate_up);
  EXPECT_EQ(runner.model().weights().layers[0].fused_qkv, p.fused_qkv);
  EXPECT_EQ(runner.model().weights().layers[0].bq.data != nullptr, p.qkv_bias);
  EXPECT_EQ(runner.model().weights().tied_output, p.tied_embeddings);
  EXPECT_EQ(c.n_expert, p.n_expert);
  if (p.n_expert > 0) {
    EXPECT_EQ(c.n_expert_used, p.n_expert_used);
    EXPECT_EQ(c.n_ff_expert, p.expert_ff());
    const LayerWeights& moe = runner.model().weights().layers[size_t(p.n_layer_dense_lead)];  // the first MoE layer
    EXPECT_EQ(moe.router.type, DType::F32);  // kept f32 by every plan
    EXPECT_EQ(moe.experts.gate.rows(), int64_t(p.n_expert) * p.expert_ff());
  }
  if (p.glm4moe()) {  // layer 0 dense, then experts with the choice bias and an ungated shared expert
    const ModelWeights& w = runner.model().weights();
    EXPECT_EQ(c.n_layer_dense_lead, 1);
    EXPECT_TRUE(w.layers[0].w_gate.data && !w.layers[0].router.data);
    EXPECT_TRUE(w.layers[1].choice_bias.data && w.layers[1].shexp_gate.data && !w.layers[1].shexp_gate_inp.data);
    EXPECT_EQ(c.moe().gating, MoeGating::Sigmoid);
    EXPECT_EQ(c.rope.n_rot, c.head_dim / 2);
    EXPECT_TRUE(c.rope.neox);
  }
  if (p.deepseek2()) {  // MLA (V3: q LoRA, 16 experts in 4 groups; lite: attn_q, softmax) with f16 per-head projections
    const ModelWeights& w = runner.model().weights();
    const bool lite = p.mla_q_lora == 0;
    EXPECT_TRUE(c.is_mla());
    EXPECT_EQ(c.n_head_kv, 1);
    EXPECT_EQ(c.mla_kv_lora, 64);
    EXPECT_EQ(c.mla_q_lora, lite ? 0 : 64);
    EXPECT_EQ(w.layers[0].wq_b.data == nullptr, lite);
    EXPECT_EQ(w.layers[0].wq.rows(), lite ? int64_t(c.mla_q_dim()) : 64);
    EXPECT_TRUE(w.layers[0].kv_a_norm.data);
    EXPECT_EQ(w.layers[0].w_kb.type, DType::F16);  // (f16 in the f16 and quantized plans)
    EXPECT_EQ(w.layers[0].w_kb.rows(), int64_t(c.n_head) * c.mla_kv_lora);
    EXPECT_EQ(w.layers[0].w_vb.rows(), int64_t(c.n_head) * c.mla_v);
    EXPECT_EQ(c.moe().n_group, lite ? 0 : 4);
    EXPECT_EQ(c.moe().gating, lite ? MoeGating::Softmax : MoeGating::Sigmoid);
    EXPECT_EQ(w.layers[1].choice_bias.data == nullptr, lite);
    EXPECT_EQ(c.n_ff_shexp, (lite ? 2 : 1) * c.n_ff_expert);
    EXPECT_FALSE(c.rope.neox);
  }
  if (p.arch == "gemma2") {
    EXPECT_EQ(c.sliding_window, 16);
    EXPECT_EQ(std::vector<uint8_t>(c.swa_layers), (std::vector<uint8_t>{1, 0, 1, 0}));
    EXPECT_EQ(c.attn_softcap, 50.0f);
    EXPECT_EQ(c.final_softcap, 30.0f);
  }
  if (p.arch == "gemma3") {
    EXPECT_EQ(std::vector<uint8_t>(c.swa_layers), (std::vector<uint8_t>{1, 1, 0, 1, 1, 0}));
    EXPECT_EQ(c.rope_swa.freq_base, 10000.0f);
    EXPECT_EQ(c.rope.freq_base, 1e6f);
  }
  if (p.arch == "glm4") {
    EXPECT_EQ(c.rope.n_rot, c.head_dim / 2);
    EXPECT_FALSE(c.rope.neox);
  }
  if (p.gemma4()) {  // window layers 0, 1, 3, 4 of head size 64 (2 KV heads), full ones of 128 (1), K as V there
    EXPECT_EQ(std::vector<uint8_t>(c.swa_layers), (std::vector<uint8_t>{1, 1, 0, 1, 1, 0}));
    EXPECT_EQ(c.layer_head_dim, (std::vector<int32_t>{64, 64, 128, 64, 64, 128}));
    EXPECT_EQ(c.layer_n_head_kv, (std::vector<int32_t>{2, 2, 1, 2, 2, 1}));
    EXPECT_TRUE(c.v_norm && c.moe_with_dense == (p.n_expert > 0));
    const ModelWeights& w = runner.model().weights();
    EXPECT_FALSE(w.layers[2].wv.data);
    EXPECT_TRUE(w.layers[1].wv.data);
    EXPECT_EQ(c.n_embd_per_layer, p.n_embd_per_layer);
    if (p.shared_kv_layers > 0) {
      EXPECT_EQ(c.kv_source, (std::vector<int32_t>{0, 1, 2, 1, 1, 2}));
      EXPECT_FALSE(w.layers[4].wk.data);
      EXPECT_EQ(w.layers[5].ple_embd.rows(), int64_t(p.n_vocab));
    }
  }
  if (p.hybrid()) {  // 3 Gated DeltaNet layers, then full attention; the MTP block loaded
    EXPECT_EQ(std::vector<uint8_t>(c.recurrent_layers), (std::vector<uint8_t>{1, 1, 1, 0}));
    EXPECT_TRUE(c.attn_output_gate);
    EXPECT_EQ(c.n_layer_nextn, 1);
    EXPECT_EQ(c.n_ff_shexp, p.n_ff_shexp);
    const ModelWeights& w = runner.model().weights();
    EXPECT_EQ(w.layers[0].ssm_conv.type, DType::F32);  // kept f32 by every plan
    ASSERT_EQ(w.mtp.size(), 1u);
    EXPECT_EQ(w.mtp[0].eh_proj.cols(), 2 * int64_t(c.n_embd));
    EXPECT_TRUE(w.mtp[0].layer.w_attn_gate.data && w.mtp[0].enorm.data && w.mtp[0].hnorm.data);
  }

  // A prompt longer than gemma's window of 16, alone and beside another.
  std::vector<int32_t> prompt;
  for (int i = 0; i < 30; ++i) prompt.push_back(3 + (i * 37) % 1000);
  test::ModelRunner::Seq a, b, a2, b2;
  a.tokens = prompt;
  const auto alone = runner.step({&a})[0];
  for (float x : alone) ASSERT_TRUE(std::isfinite(x)) << fc.preset << " " << fc.type;
  runner.release(a);
  a2.tokens = prompt;
  b2.tokens = {1, 5, 9};
  const auto both = runner.step({&b2, &a2});
  // (A single logit row takes the fused quantized dot product, two rows the
  // dequantized one: equal to rounding.)
  double err = 0, top = 0;
  for (size_t i = 0; i < alone.size(); ++i) {
    err = std::max(err, std::abs(double(both[1][i]) - alone[i]));
    top = std::max(top, std::abs(double(alone[i])));
  }
  EXPECT_LE(err, 1e-5 * top) << fc.preset << " " << fc.type;
  runner.release(a2);
  runner.release(b2);
}

std::vector<FamilyCase> cases() {
  std::vector<FamilyCase> v;
  for (const char* p : {"tiny-qwen2", "tiny-qwen3", "tiny-gemma2", "tiny-gemma3", "tiny-phi3", "tiny-glm4",
                        "tiny-mixtral", "tiny-qwen3moe", "tiny-qwen35", "tiny-qwen35moe", "tiny-gemma4",
                        "tiny-gemma4moe", "tiny-glm4moe", "tiny-deepseek2", "tiny-deepseek2-lite"})
    for (const char* t : {"f16", "q4_k_m"}) v.push_back({p, t});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Presets, SyntheticFamily, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string n = info.param.preset + "_" + info.param.type;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
});

TEST(SyntheticFamily, QuantMixtureRules) {
  const auto plan = *quant_plan("q4_k_m");
  // Tied embeddings are quantized as the output they also are.
  EXPECT_EQ(plan_tensor_type(plan, "token_embd.weight", 4096, 2, 32, true), DType::Q6_K);
  EXPECT_EQ(plan_tensor_type(plan, "token_embd.weight", 4096, 2, 32, false), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(plan, "output.weight", 4096, 2, 32), DType::Q6_K);
  EXPECT_EQ(plan_tensor_type(plan, "blk.3.attn_qkv.weight", 3072, 2, 32), DType::Q5_K);
  EXPECT_EQ(plan_tensor_type(*quant_plan("q5_k_m"), "blk.3.attn_qkv.weight", 3072, 2, 32), DType::Q6_K);
  EXPECT_EQ(plan_tensor_type(plan, "blk.0.attn_q.bias", 4096, 1, 32), DType::F32);
  // GLM-4's FFN of 13696 is no multiple of 256: ffn_down falls back as
  // llama.cpp's does, Q6_K layers (the first eighth, ...) to Q8_0, Q4_K
  // ones to Q5_0; Q5_K (q5_k_m) to Q5_1.
  EXPECT_EQ(plan_tensor_type(plan, "blk.1.ffn_down.weight", 13696, 2, 40), DType::Q8_0);
  EXPECT_EQ(plan_tensor_type(plan, "blk.6.ffn_down.weight", 13696, 2, 40), DType::Q5_0);
  EXPECT_EQ(plan_tensor_type(*quant_plan("q5_k_m"), "blk.6.ffn_down.weight", 13696, 2, 40), DType::Q5_1);
  // Mixtures of experts (llama.cpp's llama_tensor_get_type): routers stay
  // f32 under every plan; the experts' ffn_down_exps follow ffn_down's
  // "more bits" layers; 8-expert models get Q8_0 attn_k / attn_v and, under
  // q4_k_m, Q5_K attn_output.
  for (const char* type : {"q4_k_m", "q8_0", "f16"})
    EXPECT_EQ(plan_tensor_type(*quant_plan(type), "blk.0.ffn_gate_inp.weight", 4096, 2, 32, false, 8), DType::F32);
  EXPECT_EQ(plan_tensor_type(plan, "blk.0.ffn_down_exps.weight", 14336, 3, 32, false, 8), DType::Q6_K);
  EXPECT_EQ(plan_tensor_type(plan, "blk.4.ffn_down_exps.weight", 14336, 3, 32, false, 8), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(plan, "blk.4.ffn_gate_exps.weight", 4096, 3, 32, false, 8), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(plan, "blk.4.attn_k.weight", 4096, 2, 32, false, 8), DType::Q8_0);
  EXPECT_EQ(plan_tensor_type(plan, "blk.0.attn_v.weight", 4096, 2, 32, false, 8), DType::Q8_0);
  EXPECT_EQ(plan_tensor_type(plan, "blk.4.attn_output.weight", 4096, 2, 32, false, 8), DType::Q5_K);
  EXPECT_EQ(plan_tensor_type(*quant_plan("q5_k_m"), "blk.4.attn_output.weight", 4096, 2, 32, false, 8), DType::Q5_K);
  EXPECT_EQ(plan_tensor_type(plan, "blk.4.attn_k.weight", 2048, 2, 48, false, 128), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(plan, "blk.4.attn_output.weight", 4096, 2, 48, false, 128), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(*quant_plan("q4_0"), "blk.4.attn_k.weight", 4096, 2, 32, false, 8), DType::Q4_0);
}

TEST(SyntheticFamily, QuantMixtureRulesOfTheNonLinearFormats) {
  // llama.cpp's IQ4_XS / IQ4_NL recipes (llama_tensor_get_type): Q6_K output,
  // Q5_K attn_v at 4+ query heads per KV head, Q5_K ffn_down in the first
  // eighth of the layers without an importance matrix.
  const auto xs = *quant_plan("iq4_xs");
  EXPECT_EQ(plan_tensor_type(xs, "output.weight", 4096, 2, 32), DType::Q6_K);
  EXPECT_EQ(plan_tensor_type(xs, "blk.9.attn_q.weight", 4096, 2, 32, false, 0, 4), DType::IQ4_XS);
  EXPECT_EQ(plan_tensor_type(xs, "blk.9.attn_v.weight", 4096, 2, 32, false, 0, 4), DType::Q5_K);
  EXPECT_EQ(plan_tensor_type(xs, "blk.9.attn_v.weight", 4096, 2, 32, false, 0, 2), DType::IQ4_XS);
  EXPECT_EQ(plan_tensor_type(xs, "blk.3.ffn_down.weight", 14336, 2, 32), DType::Q5_K);
  EXPECT_EQ(plan_tensor_type(xs, "blk.3.ffn_down.weight", 14336, 2, 32, false, 0, 4, true), DType::IQ4_XS);
  EXPECT_EQ(plan_tensor_type(xs, "blk.4.ffn_down.weight", 14336, 2, 32), DType::IQ4_XS);
  // Rows that are not whole 256-value blocks fall back to IQ4_NL, then F16.
  EXPECT_EQ(plan_tensor_type(xs, "blk.9.ffn_down.weight", 13696, 2, 40), DType::IQ4_NL);
  EXPECT_EQ(fit_row_width(DType::IQ4_XS, 48), DType::F16);
  EXPECT_EQ(fit_row_width(DType::Q2_K, 96), DType::Q4_0);
  EXPECT_EQ(fit_row_width(DType::Q3_K, 96), DType::Q4_0);
  EXPECT_EQ(fit_row_width(DType::IQ3_S, 96), DType::IQ4_NL);
  EXPECT_EQ(plan_tensor_type(*quant_plan("iq4_nl"), "blk.9.ffn_up.weight", 4096, 2, 32), DType::IQ4_NL);
  // MXFP4_MOE: experts MXFP4, other matrices (the output too) Q8_0.
  const auto mx = *quant_plan("mxfp4");
  EXPECT_EQ(plan_tensor_type(mx, "blk.0.ffn_up_exps.weight", 2880, 3, 24, false, 32), DType::MXFP4);
  EXPECT_EQ(plan_tensor_type(mx, "blk.0.attn_q.weight", 2880, 2, 24, false, 32), DType::Q8_0);
  EXPECT_EQ(plan_tensor_type(mx, "output.weight", 2880, 2, 24, false, 32), DType::Q8_0);
  // --pure: every matrix the base type.
  auto pure = mx;
  pure.mixture = false;
  EXPECT_EQ(plan_tensor_type(pure, "blk.0.attn_q.weight", 2880, 2, 24), DType::MXFP4);
  EXPECT_EQ(plan_tensor_type(pure, "output.weight", 2880, 2, 24), DType::MXFP4);
}

TEST(SyntheticFamily, QuantMixtureRulesOfTheLowBitIQuants) {
  // llama.cpp's file types of these names (llama_tensor_get_type_impl):
  // base types, general.file_type numbers, and the rules for output,
  // token_embd, attn_v, ffn_down, attn_output, attn_q/attn_k.
  struct Plan {
    const char* name;
    DType base;
    int32_t file_type;
  };
  for (const Plan& p : {Plan{"iq2_xxs", DType::IQ2_XXS, 19}, Plan{"iq2_xs", DType::IQ2_XS, 20},
                        Plan{"iq2_s", DType::IQ2_XS, 28}, Plan{"iq2_m", DType::IQ2_S, 29},
                        Plan{"iq3_xxs", DType::IQ3_XXS, 23}, Plan{"iq3_s", DType::IQ3_S, 26},
                        Plan{"iq3_m", DType::IQ3_S, 27}, Plan{"iq1_s", DType::IQ1_S, 24},
                        Plan{"iq1_m", DType::IQ1_M, 31}}) {
    const auto plan = quant_plan(p.name);
    ASSERT_TRUE(plan) << p.name;
    EXPECT_EQ(plan->base, p.base) << p.name;
    EXPECT_EQ(plan->file_type, p.file_type) << p.name;
    EXPECT_EQ(plan_tensor_type(*plan, "blk.9.ffn_up.weight", 4096, 2, 32, false, 0, 4, true), p.base) << p.name;
    const DType out = plan->base == DType::IQ3_S ? DType::Q6_K : DType::Q5_K;
    EXPECT_EQ(plan_tensor_type(*plan, "output.weight", 4096, 2, 32), out) << p.name;
    EXPECT_EQ(plan_tensor_type(*plan, "token_embd.weight", 4096, 2, 32, true), out) << p.name;  // tied
    EXPECT_EQ(plan_tensor_type(*plan, "output.weight", 2880, 2, 32), DType::Q8_0) << p.name;  // not whole 256s
    // --pure: the base type everywhere.
    auto pure = *plan;
    pure.mixture = false;
    EXPECT_EQ(plan_tensor_type(pure, "output.weight", 4096, 2, 32), p.base) << p.name;
    EXPECT_EQ(plan_tensor_type(pure, "blk.0.attn_v.weight", 4096, 2, 32), p.base) << p.name;
  }
  const auto xs = *quant_plan("iq2_xs"), s = *quant_plan("iq2_s"), m = *quant_plan("iq2_m");
  const auto xxs = *quant_plan("iq2_xxs"), one_s = *quant_plan("iq1_s"), one_m = *quant_plan("iq1_m");
  for (const auto& p : {xs, xxs, one_s, one_m}) {
    EXPECT_EQ(plan_tensor_type(p, "token_embd.weight", 4096, 2, 32), DType::Q2_K) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_v.weight", 4096, 2, 32, false, 0, 2, true), DType::Q2_K) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.3.ffn_down.weight", 14336, 2, 32, false, 0, 4, true), DType::Q2_K) << p.name;
  }
  for (const auto& p : {s, m}) {
    EXPECT_EQ(plan_tensor_type(p, "token_embd.weight", 4096, 2, 32), DType::IQ3_S) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_v.weight", 4096, 2, 32, false, 0, 2, true), DType::IQ3_S) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.3.ffn_down.weight", 14336, 2, 32, false, 0, 4, true), DType::IQ3_S) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_output.weight", 4096, 2, 32, false, 0, 4, true), DType::IQ3_S)
        << p.name;
  }
  for (const auto& p : {xs, s, m, xxs, one_s, one_m}) {
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_v.weight", 4096, 2, 32, false, 0, 4, true), DType::Q4_K) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_qkv.weight", 4096, 2, 32, false, 0, 4, true), DType::Q4_K) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.4.ffn_down.weight", 14336, 2, 32, false, 0, 4, true), p.base) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_q.weight", 4096, 2, 32, false, 0, 4, true), p.base) << p.name;
    // Mixtral (8 experts): Q4_K attn_k and attn_v, Q5_K attn_output.
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_k.weight", 4096, 2, 32, false, 8, 4, true), DType::Q4_K) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_v.weight", 4096, 2, 32, false, 8, 4, true), DType::Q4_K) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_output.weight", 4096, 2, 32, false, 8, 4, true), DType::Q5_K)
        << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.0.ffn_down_exps.weight", 14336, 3, 32, false, 8, 4, true),
              p.name == "iq2_s" || p.name == "iq2_m" ? DType::IQ3_S : DType::Q2_K)
        << p.name;
  }
  for (const auto& p : {one_s, one_m})
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_output.weight", 4096, 2, 32, false, 0, 4, true), DType::IQ2_XXS);
  EXPECT_EQ(plan_tensor_type(xs, "blk.9.attn_output.weight", 4096, 2, 32, false, 0, 4, true), DType::IQ2_XS);

  const auto x3 = *quant_plan("iq3_xxs"), s3 = *quant_plan("iq3_s"), m3 = *quant_plan("iq3_m");
  EXPECT_EQ(plan_tensor_type(x3, "token_embd.weight", 4096, 2, 32), DType::IQ3_S);
  EXPECT_EQ(plan_tensor_type(x3, "blk.9.attn_q.weight", 4096, 2, 32, false, 0, 4, true), DType::IQ2_S);
  EXPECT_EQ(plan_tensor_type(x3, "blk.9.attn_k.weight", 4096, 2, 32, false, 0, 4, true), DType::IQ2_S);
  EXPECT_EQ(plan_tensor_type(x3, "blk.9.attn_output.weight", 4096, 2, 32, false, 0, 4, true), DType::IQ3_S);
  EXPECT_EQ(plan_tensor_type(x3, "blk.9.attn_v.weight", 4096, 2, 32, false, 0, 4, true), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(x3, "blk.9.attn_v.weight", 4096, 2, 32, false, 0, 2, true), DType::IQ3_XXS);
  EXPECT_EQ(plan_tensor_type(x3, "blk.9.attn_v.weight", 4096, 2, 32, false, 0, 2, false), DType::IQ3_S);
  EXPECT_EQ(plan_tensor_type(x3, "blk.1.ffn_down.weight", 14336, 2, 32, false, 0, 4, false), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(x3, "blk.9.ffn_down.weight", 14336, 2, 32, false, 0, 4, false), DType::Q3_K);
  EXPECT_EQ(plan_tensor_type(x3, "blk.1.ffn_down.weight", 14336, 2, 32, false, 0, 4, true), DType::IQ3_XXS);
  EXPECT_EQ(plan_tensor_type(s3, "token_embd.weight", 4096, 2, 32), DType::IQ3_S);
  EXPECT_EQ(plan_tensor_type(s3, "blk.9.attn_v.weight", 4096, 2, 32, false, 0, 4), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(s3, "blk.9.attn_v.weight", 4096, 2, 32, false, 0, 2), DType::IQ3_S);
  EXPECT_EQ(plan_tensor_type(s3, "blk.1.ffn_down.weight", 14336, 2, 32), DType::IQ3_S);
  EXPECT_EQ(plan_tensor_type(s3, "blk.9.attn_output.weight", 4096, 2, 32), DType::IQ3_S);
  EXPECT_EQ(plan_tensor_type(m3, "blk.9.attn_v.weight", 4096, 2, 32, false, 0, 2), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(m3, "blk.9.attn_qkv.weight", 4096, 2, 32), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(m3, "blk.9.attn_output.weight", 4096, 2, 32), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(m3, "blk.3.ffn_down.weight", 14336, 2, 32), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(m3, "blk.9.ffn_down.weight", 14336, 2, 32), DType::IQ3_S);
  // With 8 experts also the "more bits" layers (6 of 32).
  EXPECT_EQ(plan_tensor_type(m3, "blk.6.ffn_down_exps.weight", 14336, 3, 32, false, 8), DType::Q4_K);
  EXPECT_EQ(plan_tensor_type(m3, "blk.7.ffn_down_exps.weight", 14336, 3, 32, false, 8), DType::IQ3_S);
  for (const auto& p : {x3, s3, m3}) {  // 8 experts
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_k.weight", 4096, 2, 32, false, 8, 4, true), DType::Q8_0) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_v.weight", 4096, 2, 32, false, 8, 4, true), DType::Q8_0) << p.name;
    EXPECT_EQ(plan_tensor_type(p, "blk.9.attn_output.weight", 4096, 2, 32, false, 8, 4, true), DType::Q5_K)
        << p.name;
  }
  // Rows that are not whole 256-value blocks fall back to IQ4_NL.
  EXPECT_EQ(plan_tensor_type(xs, "blk.9.ffn_down.weight", 13696, 2, 40, false, 0, 4, true), DType::IQ4_NL);
  EXPECT_EQ(plan_tensor_type(m3, "blk.9.ffn_down.weight", 13696, 2, 40), DType::IQ4_NL);
  // The types that need an importance matrix (llama.cpp's rule: not IQ3_S).
  for (DType t : {DType::IQ3_XXS, DType::IQ2_S, DType::IQ2_XS, DType::IQ2_XXS, DType::IQ1_M, DType::IQ1_S})
    EXPECT_TRUE(needs_importance(t)) << dtype_name(t);
  for (DType t : {DType::IQ3_S, DType::IQ4_XS, DType::Q2_K, DType::Q4_K, DType::F16})
    EXPECT_FALSE(needs_importance(t)) << dtype_name(t);
}

TEST(SyntheticFamily, FullSizePresetsHaveThePublishedShapes) {
  struct Shape {
    const char* name;
    int32_t embd, layers, heads, kv, hd, ff, vocab;
  };
  for (const Shape& s : {Shape{"qwen2.5-7b", 3584, 28, 28, 4, 128, 18944, 152064},
                         Shape{"qwen3-0.6b", 1024, 28, 16, 8, 128, 3072, 151936},
                         Shape{"qwen3-8b", 4096, 36, 32, 8, 128, 12288, 151936},
                         Shape{"gemma2-9b", 3584, 42, 16, 8, 256, 14336, 256000},
                         Shape{"gemma3-12b", 3840, 48, 16, 8, 256, 15360, 262208},
                         Shape{"phi3-mini", 3072, 32, 32, 32, 96, 8192, 32064},
                         Shape{"glm4-9b", 4096, 40, 32, 2, 128, 13696, 151552},
                         Shape{"mixtral-8x7b", 4096, 32, 32, 8, 128, 14336, 32000},
                         Shape{"qwen3-30b-a3b", 2048, 48, 32, 4, 128, 6144, 151936},
                         Shape{"glm-4.5-air", 4096, 46, 96, 8, 128, 10944, 151552},
                         // (MLA: one compressed KV row of 512 + 64)
                         Shape{"deepseek-v3", 7168, 61, 128, 1, 576, 18432, 129280},
                         Shape{"deepseek-v2-lite", 2048, 27, 16, 1, 576, 10944, 102400}}) {
    const auto p = synthetic_preset(s.name);
    ASSERT_TRUE(p) << s.name;
    EXPECT_EQ(p->n_embd, s.embd) << s.name;
    EXPECT_EQ(p->n_layer, s.layers) << s.name;
    EXPECT_EQ(p->n_head, s.heads) << s.name;
    EXPECT_EQ(p->n_head_kv, s.kv) << s.name;
    EXPECT_EQ(p->hd(), s.hd) << s.name;
    EXPECT_EQ(p->n_ff, s.ff) << s.name;
    EXPECT_EQ(p->n_vocab, s.vocab) << s.name;
    if (p->glm4moe()) {  // 128 experts of 1408 (8 used) after 1 dense layer, 1 shared, half of each head turning
      EXPECT_EQ(p->n_expert, 128);
      EXPECT_EQ(p->n_expert_used, 8);
      EXPECT_EQ(p->n_ff_expert, 1408);
      EXPECT_EQ(p->n_expert_shared, 1);
      EXPECT_EQ(p->n_layer_dense_lead, 1);
      EXPECT_EQ(p->n_rot, 64);
    }
    if (p->deepseek2()) {  // V3: 256 experts (8 used) in 8 groups (4 used) after 3 dense layers; V2-Lite: 64 (6)
      const bool v3 = p->name == "deepseek-v3";
      EXPECT_EQ(p->mla_q_lora, v3 ? 1536 : 0);
      EXPECT_EQ(p->mla_kv_lora, 512);
      EXPECT_EQ(p->mla_k_nope, 128);
      EXPECT_EQ(p->n_rot, 64);
      EXPECT_EQ(p->mla_v, 128);
      EXPECT_EQ(p->n_expert, v3 ? 256 : 64);
      EXPECT_EQ(p->n_expert_used, v3 ? 8 : 6);
      EXPECT_EQ(p->n_ff_expert, v3 ? 2048 : 1408);
      EXPECT_EQ(p->n_expert_shared, v3 ? 1 : 2);
      EXPECT_EQ(p->n_layer_dense_lead, v3 ? 3 : 1);
      EXPECT_EQ(p->n_expert_group, v3 ? 8 : 0);
    }
    // Its first 4 layers: the same preset otherwise.
    auto four = synthetic_preset(std::string(s.name) + "-4l");
    ASSERT_TRUE(four) << s.name;
    EXPECT_EQ(four->n_layer, 4) << s.name;
    four->n_layer = p->n_layer;
    four->name = p->name;
    EXPECT_TRUE(synthetic_header(*four, *quant_plan("q4_k_m")) == synthetic_header(*p, *quant_plan("q4_k_m")))
        << s.name;
  }
  // Their experts: count, used per token, each one's FFN width.
  const auto mixtral = *synthetic_preset("mixtral-8x7b");
  EXPECT_EQ(mixtral.arch, "llama");
  EXPECT_EQ(mixtral.n_expert, 8);
  EXPECT_EQ(mixtral.n_expert_used, 2);
  EXPECT_EQ(mixtral.expert_ff(), 14336);
  EXPECT_EQ(mixtral.rope_base, 1e6f);
  EXPECT_EQ(mixtral.n_ctx, 32768);
  const auto qwen = *synthetic_preset("qwen3-30b-a3b");
  EXPECT_EQ(qwen.arch, "qwen3moe");
  EXPECT_TRUE(qwen.qk_norm);
  EXPECT_EQ(qwen.n_expert, 128);
  EXPECT_EQ(qwen.n_expert_used, 8);
  EXPECT_EQ(qwen.expert_ff(), 768);
  EXPECT_EQ(qwen.rope_base, 1e6f);
  EXPECT_EQ(qwen.n_ctx, 40960);
  // Gemma 4 (synthetic_gemma4.cpp's table): window / full head sizes and KV
  // heads, 5 window layers then a full one, K as V on full layers.
  const auto g31 = *synthetic_preset("gemma4-31b");
  EXPECT_EQ(g31.arch, "gemma4");
  EXPECT_EQ(std::vector<int32_t>({g31.n_embd, g31.n_layer, g31.n_head, g31.n_head_kv_swa, g31.n_head_kv,
                                  g31.head_dim_swa, g31.hd(), g31.n_ff, g31.n_vocab, g31.sliding_window,
                                  g31.swa_pattern}),
            (std::vector<int32_t>{5376, 60, 32, 16, 4, 256, 512, 21504, 262144, 1024, 6}));
  EXPECT_TRUE(g31.k_eq_v && g31.tied_embeddings);
  EXPECT_EQ(g31.final_softcap, 30.0f);
  EXPECT_EQ(g31.rope_pairs_full, 64);
  const auto g26 = *synthetic_preset("gemma4-26b-a4b");
  EXPECT_EQ(std::vector<int32_t>({g26.n_embd, g26.n_layer, g26.n_head, g26.n_head_kv_swa, g26.n_head_kv,
                                  g26.head_dim_swa, g26.hd(), g26.n_ff, g26.n_expert, g26.n_expert_used,
                                  g26.n_ff_expert}),
            (std::vector<int32_t>{2816, 30, 16, 8, 2, 256, 512, 2112, 128, 8, 704}));
  // 50 window layers with q, k, v and 10 full ones with q, k: 11 tensors
  // each, plus 3 or 2; rope_freqs; token_embd and output_norm (tied).
  EXPECT_EQ(g31.n_tensors(), 2 + 1 + 50 * 14 + 10 * 13);
  EXPECT_EQ(g26.n_tensors(), 2 + 1 + 25 * (14 + 8) + 5 * (13 + 8));
  // The -4l presets: the published widths, three window layers then a full
  // one (both head sizes in one cache).
  for (const auto& [four, full] : {std::pair{*synthetic_preset("gemma4-31b-4l"), g31},
                                   std::pair{*synthetic_preset("gemma4-26b-a4b-4l"), g26}}) {
    EXPECT_EQ(four.n_layer, 4);
    EXPECT_EQ(four.swa_pattern, 4);
    EXPECT_EQ(std::vector<int32_t>({four.n_embd, four.n_head, four.n_head_kv_swa, four.n_head_kv, four.head_dim_swa,
                                    four.hd(), four.n_ff, four.n_expert}),
              (std::vector<int32_t>{full.n_embd, full.n_head, full.n_head_kv_swa, full.n_head_kv, full.head_dim_swa,
                                    full.hd(), full.n_ff, full.n_expert}));
    EXPECT_EQ(four.n_tensors(), 2 + 1 + 3 * (14 + (full.n_expert > 0 ? 8 : 0)) + (13 + (full.n_expert > 0 ? 8 : 0)));
  }
  // Routers and three 3-D expert tensors in place of the dense FFN's three.
  EXPECT_EQ(mixtral.n_tensors(), 3 + 32 * (2 + 3 + 1 + 4));
  // DeepSeek-V3: 3 dense layers of 13 (the q LoRA's 3, kv_a and its norm,
  // k_b, v_b, output, 2 norms, 3 FFN), 58 MoE ones of 18 (router, bias,
  // 3 experts, 3 shared).
  EXPECT_EQ(synthetic_preset("deepseek-v3")->n_tensors(), 3 + 3 * 13 + 58 * 18);
  for (const char* name : {"deepseek-v3", "deepseek-v2-lite", "tiny-deepseek2", "tiny-deepseek2-lite"}) {  // (what the header lists)
    const auto p = *synthetic_preset(name);
    EXPECT_EQ(int32_t(gguf::File::from_header(synthetic_header(p, *quant_plan("q4_k_m")))->tensors().size()),
              p.n_tensors())
        << name;
  }
  EXPECT_EQ(qwen.n_tensors(), 3 + 48 * (2 + 3 + 2 + 1 + 4));
}

}  // namespace
}  // namespace rf
