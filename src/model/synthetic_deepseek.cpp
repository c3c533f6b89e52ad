// DeepSeek V2/V3 synthetic presets, metadata and tensors
// (model/synthetic_deepseek.h).
//
// The published shapes (Hugging Face config.json of deepseek-ai/DeepSeek-V3
// and DeepSeek-V2-Lite):
//
// | preset           | embd | layers (dense first) | heads | q LoRA | latent | nope + rope / v | FFN   | experts (used, shared, FFN) | groups (used) | gating  | vocab  |
// |------------------|------|----------------------|-------|--------|--------|-----------------|-------|-----------------------------|---------------|---------|--------|
// | deepseek-v3      | 7168 | 61 (3)               | 128   | 1536   | 512    | 128 + 64 / 128  | 18432 | 256 (8, 1, 2048)            | 8 (4)         | sigmoid + exp_probs_b, norm, x2.5 | 129280 |
// | deepseek-v2-lite | 2048 | 27 (1)               | 16    | —      | 512    | 128 + 64 / 128  | 10944 | 64 (6, 2, 1408)             | —             | softmax, x1 | 102400 |
//
// Both: RMS eps 1e-6, RoPE base 1e4 (NORM pairs) with YaRN factor 40 over
// 4096 positions (beta 32 / 1), context 163840, untied output;
// yarn_log_multiplier 0.1 * mscale_all_dim (V3 1.0, V2-Lite 0.707), as the
// converter writes it. deepseek-v3-4l and deepseek-v2-lite-4l are their
// first 4 layers (V3: 3 dense, 1 MoE; V2-Lite: 1 dense, 3 MoE); tiny-deepseek2 keeps every block at test size (V3's blocks: q LoRA,
// groups, sigmoid routing with the bias).
#include "model/synthetic_deepseek.h"

#include <string>

namespace rf {
namespace {

SyntheticPreset deepseek(std::string name, int32_t embd, int32_t layers, int32_t lead, int32_t heads, int32_t q_lora,
                         int32_t kv_lora, int32_t nope, int32_t rope, int32_t v, int32_t ff, int32_t vocab,
                         int32_t n_expert, int32_t used, int32_t shared, int32_t ff_expert) {
  SyntheticPreset p;
  p.name = std::move(name);
  p.arch = "deepseek2";
  p.n_embd = embd, p.n_layer = layers, p.n_head = heads, p.n_head_kv = 1;
  p.head_dim = kv_lora + rope;  // the compressed cache's row
  p.n_rot = rope;
  p.mla_q_lora = q_lora, p.mla_kv_lora = kv_lora, p.mla_k_nope = nope, p.mla_v = v;
  p.n_ff = ff, p.n_vocab = vocab, p.n_ctx = 163840;
  p.rope_base = 10000.0f;
  p.rms_eps = 1e-6f;
  p.n_expert = n_expert, p.n_expert_used = used, p.n_ff_expert = ff_expert;
  p.n_expert_shared = shared, p.n_layer_dense_lead = lead;
  p.yarn_factor = 40.0f;
  p.yarn_orig_ctx = 4096;
  return p;
}

SyntheticPreset v3_routing(SyntheticPreset p, int32_t groups, int32_t groups_used) {
  p.n_expert_group = groups, p.n_expert_group_used = groups_used;
  p.expert_sigmoid = true;
  p.expert_weights_norm = true;
  p.expert_weights_scale = 2.5f;
  p.yarn_log_mul = 0.1f;
  return p;
}

}  // namespace

void add_deepseek_presets(std::vector<SyntheticPreset>& v) {
  const SyntheticPreset v3 = v3_routing(
      deepseek("deepseek-v3", 7168, 61, 3, 128, 1536, 512, 128, 64, 128, 18432, 129280, 256, 8, 1, 2048), 8, 4);
  v.push_back(v3);
  SyntheticPreset v3_4l = v3;
  v3_4l.name = "deepseek-v3-4l";
  v3_4l.n_layer = 4;
  v.push_back(v3_4l);
  SyntheticPreset lite = deepseek("deepseek-v2-lite", 2048, 27, 1, 16, 0, 512, 128, 64, 128, 10944, 102400, 64, 6, 2,
                                  1408);
  lite.yarn_log_mul = 0.0707f;
  v.push_back(lite);
  lite.name = "deepseek-v2-lite-4l";  // (1 dense layer, 3 MoE ones)
  lite.n_layer = 4;
  v.push_back(lite);
  // 16 experts in 4 groups (2 used), 4 used; expert FFN 256: whole K-quant blocks.
  v.push_back(v3_routing(deepseek("tiny-deepseek2", 256, 4, 1, 4, 64, 64, 32, 16, 32, 512, 1024, 16, 4, 1, 256), 4, 2));
  // V2-Lite's blocks at test size: attn_q (no q LoRA), softmax routing
  // without groups or bias, 2 shared experts.
  SyntheticPreset tiny_lite = deepseek("tiny-deepseek2-lite", 256, 4, 1, 4, 0, 64, 32, 16, 32, 512, 1024, 16, 4, 2, 256);
  tiny_lite.yarn_log_mul = 0.0707f;
  v.push_back(tiny_lite);
}

void describe_deepseek_metadata(gguf::Writer& w, const SyntheticPreset& p) {
  const std::string a = p.arch + ".";
  w.set_u32(a + "attention.key_length", uint32_t(p.mla_kv_lora + p.n_rot));
  w.set_u32(a + "attention.value_length", uint32_t(p.mla_kv_lora));
  w.set_u32(a + "attention.key_length_mla", uint32_t(p.mla_k_nope + p.n_rot));
  w.set_u32(a + "attention.value_length_mla", uint32_t(p.mla_v));
  w.set_u32(a + "attention.kv_lora_rank", uint32_t(p.mla_kv_lora));
  if (p.mla_q_lora > 0) w.set_u32(a + "attention.q_lora_rank", uint32_t(p.mla_q_lora));
  w.set_u32(a + "expert_shared_count", uint32_t(p.n_expert_shared));
  w.set_u32(a + "leading_dense_block_count", uint32_t(p.n_layer_dense_lead));
  w.set_u32(a + "expert_gating_func", p.expert_sigmoid ? 2 : 1);
  w.set_f32(a + "expert_weights_scale", p.expert_weights_scale);
  w.set_bool(a + "expert_weights_norm", p.expert_weights_norm);
  if (p.n_expert_group > 0) {
    w.set_u32(a + "expert_group_count", uint32_t(p.n_expert_group));
    w.set_u32(a + "expert_group_used_count", uint32_t(p.n_expert_group_used));
  }
  if (p.yarn_log_mul > 0) w.set_f32(a + "rope.scaling.yarn_log_multiplier", p.yarn_log_mul);
}

void describe_deepseek_tensors(const TensorSink& t, const SyntheticPreset& p) {
  const int64_t h = p.n_head, q_head = p.mla_k_nope + p.n_rot;
  for (int32_t l = 0; l < p.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    t.vec(b + "attn_norm.weight", p.n_embd, 1.0f);
    if (p.mla_q_lora > 0) {
      t.matrix(b + "attn_q_a.weight", p.n_embd, p.mla_q_lora, 0);
      t.vec(b + "attn_q_a_norm.weight", p.mla_q_lora, 1.0f);
      t.matrix(b + "attn_q_b.weight", p.mla_q_lora, h * q_head, 0);
    } else {
      t.matrix(b + "attn_q.weight", p.n_embd, h * q_head, 0);
    }
    t.matrix(b + "attn_kv_a_mqa.weight", p.n_embd, p.mla_kv_lora + p.n_rot, 0);
    t.vec(b + "attn_kv_a_norm.weight", p.mla_kv_lora, 1.0f);
    t.matrix(b + "attn_k_b.weight", p.mla_k_nope, p.mla_kv_lora, h);
    t.matrix(b + "attn_v_b.weight", p.mla_kv_lora, p.mla_v, h);
    t.matrix(b + "attn_output.weight", h * p.mla_v, p.n_embd, 0);
    t.vec(b + "ffn_norm.weight", p.n_embd, 1.0f);
    if (l < p.n_layer_dense_lead) {
      t.matrix(b + "ffn_gate.weight", p.n_embd, p.n_ff, 0);
      t.matrix(b + "ffn_up.weight", p.n_embd, p.n_ff, 0);
      t.matrix(b + "ffn_down.weight", p.n_ff, p.n_embd, 0);
      continue;
    }
    const int64_t ff = p.n_ff_expert, sh = ff * p.n_expert_shared;
    t.matrix(b + "ffn_gate_inp.weight", p.n_embd, p.n_expert, 0);
    if (p.expert_sigmoid) t.vec(b + "exp_probs_b.bias", p.n_expert, 0.0f);
    t.matrix(b + "ffn_gate_exps.weight", p.n_embd, ff, p.n_expert);
    t.matrix(b + "ffn_up_exps.weight", p.n_embd, ff, p.n_expert);
    t.matrix(b + "ffn_down_exps.weight", ff, p.n_embd, p.n_expert);
    t.matrix(b + "ffn_gate_shexp.weight", p.n_embd, sh, 0);
    t.matrix(b + "ffn_up_shexp.weight", p.n_embd, sh, 0);
    t.matrix(b + "ffn_down_shexp.weight", sh, p.n_embd, 0);
  }
}

int32_t deepseek_tensors(const SyntheticPreset& p) {
  int32_t n = 0;
  for (int32_t l = 0; l < p.n_layer; ++l) {
    n += 1 + (p.mla_q_lora > 0 ? 3 : 1) + 5 + 1;  // norm, q, kv_a + norm, k_b, v_b, output, ffn_norm
    n += l < p.n_layer_dense_lead ? 3 : 1 + (p.expert_sigmoid ? 1 : 0) + 3 + 3;
  }
  return n;
}

}  // namespace rf
