// Synthetic hybrid Qwen3.5 / Qwen3.6 models (see synthetic_hybrid.h).
//
// Shapes, from each model's published config.json (Hugging Face Qwen/...):
// hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
// head_dim 256, intermediate_size (dense) or moe_intermediate_size and
// shared_expert_intermediate_size, num_experts / num_experts_per_tok,
// linear_num_key_heads, linear_num_value_heads, linear_key_head_dim =
// linear_value_head_dim 128, linear_conv_kernel_dim 4,
// full_attention_interval 4, partial_rotary_factor 0.25 (64 of 256 dims
// rotate), rope_theta 1e7, mrope_section [11, 11, 10], vocabulary 248320,
// context 262144, RMS eps 1e-6, mtp_num_hidden_layers 1. llama.cpp's
// loader and tests agree on what they name: 40 layers for 35B-A3B and 48
// for 122B-A10B (qwen35moe.cpp's size names), 64 for the 27B
// (qwen35.cpp); the 27B's 5120 / 17408 / 24 heads, 4 KV heads, 248320
// (tests/snapshots/qwen3.6-27b.schema) and head size 256 with 6 query heads
// per KV head (test-backend-ops); the 35B-A3B's 16 query and 2 KV heads
// (ggml-opencl) and 256 experts (ggml-webgpu). The converter's metadata:
// conversion/qwen.py (ssm.* keys, full_attention_interval,
// rope.dimension_sections with a fourth 0, nextn_predict_layers counted
// into block_count).
#include "model/synthetic_hybrid.h"

namespace rf {
namespace {

SyntheticPreset hybrid(std::string name, const std::string& arch, int32_t embd, int32_t layers, int32_t heads,
                       int32_t kv, int32_t hd, int32_t ff, int32_t vocab, int32_t ctx, int32_t k_heads,
                       int32_t v_heads, int32_t ssm_hd, bool tied) {
  SyntheticPreset p;
  p.name = std::move(name);
  p.arch = arch;
  p.n_embd = embd, p.n_layer = layers, p.n_head = heads, p.n_head_kv = kv, p.head_dim = hd, p.n_ff = ff;
  p.n_vocab = vocab, p.n_ctx = ctx, p.rope_base = 1e7f, p.tied_embeddings = tied, p.rms_eps = 1e-6f;
  p.qk_norm = true;
  p.n_rot = hd / 4;  // partial_rotary_factor 0.25
  // mrope_section [11, 11, 10] of 32 pairs; test sizes in the same ratio.
  p.rope_sections = hd == 256 ? std::vector<int32_t>{11, 11, 10, 0}
                              : std::vector<int32_t>{p.n_rot / 6 + 1, p.n_rot / 6 + 1, p.n_rot / 2 - 2 * (p.n_rot / 6 + 1), 0};
  p.ssm_k_heads = k_heads, p.ssm_v_heads = v_heads, p.ssm_head_dim = ssm_hd;
  p.nextn_layers = 1;
  return p;
}

SyntheticPreset hybrid_moe(SyntheticPreset p, int32_t n_expert, int32_t n_used, int32_t ff_expert, int32_t ff_shared) {
  p.n_expert = n_expert, p.n_expert_used = n_used, p.n_ff_expert = ff_expert, p.n_ff_shexp = ff_shared;
  return p;
}

bool recurrent(const SyntheticPreset& p, int32_t il) {
  return il < p.n_layer && (il + 1) % p.full_attention_interval != 0;
}

}  // namespace

void add_hybrid_presets(std::vector<SyntheticPreset>& v) {
  // Qwen3.5-27B: 5120 / 64 / 24 heads, 4 KV / 256 / 17408; DeltaNet 16 q/k
  // heads, 48 value heads of 128.
  const SyntheticPreset q27 =
      hybrid("qwen3.5-27b", "qwen35", 5120, 64, 24, 4, 256, 17408, 248320, 262144, 16, 48, 128, false);
  // Qwen3.6-35B-A3B (the Qwen3.5-35B-A3B shape): 2048 / 40 / 16 heads, 2 KV
  // / 256; 256 experts of 512, 8 used, a shared expert of 512; DeltaNet 16
  // q/k heads, 32 value heads of 128.
  const SyntheticPreset q35 = hybrid_moe(
      hybrid("qwen3.6-35b-a3b", "qwen35moe", 2048, 40, 16, 2, 256, 0, 248320, 262144, 16, 32, 128, false), 256, 8,
      512, 512);
  // Qwen3.5-122B-A10B: 3072 / 48 / 32 heads, 2 KV / 256; 256 experts of
  // 1024, 8 used, a shared expert of 1024; DeltaNet 16 q/k heads, 64 value
  // heads of 128.
  const SyntheticPreset q122 = hybrid_moe(
      hybrid("qwen3.5-122b-a10b", "qwen35moe", 3072, 48, 32, 2, 256, 0, 248320, 262144, 16, 64, 128, false), 256, 8,
      1024, 1024);
  for (const SyntheticPreset& p : {q27, q35, q122}) {
    v.push_back(p);
    SyntheticPreset four = p;  // the first 4 layers (3 DeltaNet, 1 full attention) and the MTP block
    four.name += "-4l";
    four.n_layer = 4;
    v.push_back(four);
  }
  // Test sizes: 4 layers (0-2 DeltaNet, 3 full attention) and an MTP block.
  v.push_back(hybrid("tiny-qwen35", "qwen35", 256, 4, 4, 2, 64, 512, 1024, 2048, 2, 4, 32, true));
  v.push_back(hybrid_moe(hybrid("tiny-qwen35moe", "qwen35moe", 256, 4, 4, 2, 64, 0, 1024, 2048, 2, 4, 32, false), 8,
                         2, 128, 128));
}

void describe_hybrid_metadata(gguf::Writer& w, const SyntheticPreset& p) {
  const std::string a = p.arch + ".";
  w.set_u32(a + "ssm.conv_kernel", uint32_t(p.ssm_conv_kernel));
  w.set_u32(a + "ssm.state_size", uint32_t(p.ssm_head_dim));
  w.set_u32(a + "ssm.group_count", uint32_t(p.ssm_k_heads));
  w.set_u32(a + "ssm.time_step_rank", uint32_t(p.ssm_v_heads));
  w.set_u32(a + "ssm.inner_size", uint32_t(p.ssm_v_heads * p.ssm_head_dim));
  w.set_u32(a + "full_attention_interval", uint32_t(p.full_attention_interval));
  w.set_i32s(a + "rope.dimension_sections", p.rope_sections);
  if (p.nextn_layers > 0) w.set_u32(a + "nextn_predict_layers", uint32_t(p.nextn_layers));
  if (p.n_ff_shexp > 0) w.set_u32(a + "expert_shared_feed_forward_length", uint32_t(p.n_ff_shexp));
}

int32_t hybrid_block_tensors(const SyntheticPreset& p, int32_t il) {
  const int32_t mixer = recurrent(p, il) ? 10 : 7;  // attn_norm and the mixer's tensors
  const int32_t ffn = p.n_expert > 0 ? 4 + (p.n_ff_shexp > 0 ? 4 : 0) : 3;
  return mixer + 1 + ffn + (il >= p.n_layer ? 3 : 0);
}

void describe_hybrid_block(const TensorSink& t, const SyntheticPreset& p, int32_t il) {
  const std::string b = "blk." + std::to_string(il) + ".";
  const int64_t embd = p.n_embd, hd = p.hd(), q_dim = int64_t(p.n_head) * hd, kv_dim = int64_t(p.n_head_kv) * hd;
  t.vec(b + "attn_norm.weight", embd, 1.0f);
  if (recurrent(p, il)) {
    const int64_t inner = int64_t(p.ssm_v_heads) * p.ssm_head_dim;
    const int64_t channels = 2 * int64_t(p.ssm_k_heads) * p.ssm_head_dim + inner;
    t.matrix(b + "attn_qkv.weight", embd, channels, 0);
    t.matrix(b + "attn_gate.weight", embd, inner, 0);
    t.f32_matrix(b + "ssm_conv1d.weight", p.ssm_conv_kernel, channels);
    t.vec(b + "ssm_dt.bias", p.ssm_v_heads, 0.0f);
    t.vec(b + "ssm_a", p.ssm_v_heads, -1.0f);  // -exp(A_log): decay
    t.matrix(b + "ssm_beta.weight", embd, p.ssm_v_heads, 0);
    t.matrix(b + "ssm_alpha.weight", embd, p.ssm_v_heads, 0);
    t.vec(b + "ssm_norm.weight", p.ssm_head_dim, 1.0f);
    t.matrix(b + "ssm_out.weight", inner, embd, 0);
  } else {  // per head hd query rows then hd gate rows
    t.matrix(b + "attn_q.weight", embd, 2 * q_dim, 0);
    t.matrix(b + "attn_k.weight", embd, kv_dim, 0);
    t.matrix(b + "attn_v.weight", embd, kv_dim, 0);
    t.matrix(b + "attn_output.weight", q_dim, embd, 0);
    t.vec(b + "attn_q_norm.weight", hd, 1.0f);
    t.vec(b + "attn_k_norm.weight", hd, 1.0f);
  }
  t.vec(b + "post_attention_norm.weight", embd, 1.0f);
  if (p.n_expert > 0) {
    const int64_t ff = p.expert_ff();
    t.matrix(b + "ffn_gate_inp.weight", embd, p.n_expert, 0);
    t.matrix(b + "ffn_gate_exps.weight", embd, ff, p.n_expert);
    t.matrix(b + "ffn_up_exps.weight", embd, ff, p.n_expert);
    t.matrix(b + "ffn_down_exps.weight", ff, embd, p.n_expert);
    if (p.n_ff_shexp > 0) {
      t.vec(b + "ffn_gate_inp_shexp.weight", embd, 0.0f);
      t.matrix(b + "ffn_gate_shexp.weight", embd, p.n_ff_shexp, 0);
      t.matrix(b + "ffn_up_shexp.weight", embd, p.n_ff_shexp, 0);
      t.matrix(b + "ffn_down_shexp.weight", p.n_ff_shexp, embd, 0);
    }
  } else {
    t.matrix(b + "ffn_gate.weight", embd, p.n_ff, 0);
    t.matrix(b + "ffn_up.weight", embd, p.n_ff, 0);
    t.matrix(b + "ffn_down.weight", p.n_ff, embd, 0);
  }
  if (il >= p.n_layer) {  // the MTP block's own
    t.matrix(b + "nextn.eh_proj.weight", 2 * embd, embd, 0);
    t.vec(b + "nextn.enorm.weight", embd, 1.0f);
    t.vec(b + "nextn.hnorm.weight", embd, 1.0f);
  }
}

}  // namespace rf
