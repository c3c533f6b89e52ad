// The family blocks' tensors (model/weight_loader.h): Gated DeltaNet
// layers, gated attention, multi-head latent attention, the shared expert, Gemma 4's shaped attention and
// extras, MTP blocks.
#include <cmath>

#include "core/error.h"
#include "model/weight_loader.h"

namespace rf::weights_detail {

// A Gated DeltaNet layer's weights (blk.N. prefix p).
void load_recurrent_mixer(Loader& L, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const int64_t ch = c.ssm_conv_channels(), inner = c.ssm_inner(), vh = c.ssm_v_heads;
  l.ssm_in = L.matrix(p + "attn_qkv.weight", c.n_embd, ch);
  l.ssm_z = L.matrix(p + "attn_gate.weight", c.n_embd, inner);
  l.ssm_beta = L.matrix(p + "ssm_beta.weight", c.n_embd, vh);
  l.ssm_alpha = L.matrix(p + "ssm_alpha.weight", c.n_embd, vh);
  l.ssm_conv = L.matrix_f32(p + "ssm_conv1d.weight", c.ssm_conv_kernel, ch);
  l.ssm_dt_bias = L.vector_f32(p + "ssm_dt.bias", vh);
  l.ssm_a = L.vector_f32(p + "ssm_a", vh);
  l.ssm_norm = L.vector_f32(p + "ssm_norm.weight", c.ssm_head_dim);
  l.ssm_out = L.matrix(p + "ssm_out.weight", inner, c.n_embd);
}

// Full attention with an output gate: attn_q (or the q part of a fused
// attn_qkv) holds per head head_dim query rows, then head_dim gate rows;
// the query rows become wq, the gate rows w_attn_gate (copied apart at load
// time, so that both are plain matrices).
void load_gated_attention(Loader& L, const ModelConfig& c, const std::string& p, LayerWeights& l, bool pack) {
  const int64_t hd = c.head_dim, q2 = 2 * int64_t(c.q_dim()), kv = c.kv_dim();
  std::vector<IndexRange> q_rows, gate_rows;
  for (int64_t h = 0; h < c.n_head; ++h) {
    q_rows.push_back({2 * h * hd, hd});
    gate_rows.push_back({2 * h * hd + hd, hd});
  }
  if (L.f.find_tensor(p + "attn_qkv.weight")) {  // q and gate, then k, then v
    const std::string n = p + "attn_qkv.weight";
    l.wq = L.matrix(n, c.n_embd, q2 + 2 * kv, q_rows);
    l.w_attn_gate = L.matrix(n, c.n_embd, q2 + 2 * kv, gate_rows);
    l.wk = L.matrix(n, c.n_embd, q2 + 2 * kv, {IndexRange{q2, kv}});
    l.wv = L.matrix(n, c.n_embd, q2 + 2 * kv, {IndexRange{q2 + kv, kv}});
    l.fused_qkv = true;
    return;
  }
  if (pack) {  // q, k, v and the gate rows adjacent (Backend::packs_qkv)
    const Tensor all = L.packed({{p + "attn_q.weight", q2, q_rows},
                                 {p + "attn_k.weight", kv, {}},
                                 {p + "attn_v.weight", kv, {}},
                                 {p + "attn_q.weight", q2, gate_rows}},
                                c.n_embd, p + "attn_qkv_gate (packed)");
    if (all.data) {
      l.wq = all.slice_rows(0, c.q_dim());
      l.wk = all.slice_rows(c.q_dim(), kv);
      l.wv = all.slice_rows(c.q_dim() + kv, kv);
      l.w_attn_gate = all.slice_rows(c.q_dim() + 2 * kv, c.q_dim());
      return;
    }
  }
  l.wq = L.matrix(p + "attn_q.weight", c.n_embd, q2, q_rows);
  l.w_attn_gate = L.matrix(p + "attn_q.weight", c.n_embd, q2, gate_rows);
  l.wk = L.matrix(p + "attn_k.weight", c.n_embd, kv);
  l.wv = L.matrix(p + "attn_v.weight", c.n_embd, kv);
}

// Multi-head latent attention (ModelConfig::is_mla): the query LoRA (or
// attn_q), attn_kv_a_mqa and its norm, the per-head attn_k_b and attn_v_b
// (3-D: [k_nope, kv_lora, n_head] and [kv_lora, v, n_head], seen as
// matrices with the heads stacked along rows), attn_output.
void load_mla_attention(Loader& L, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const int64_t lora = c.mla_kv_lora, qd = c.mla_q_dim(), h = c.n_head;
  if (c.mla_q_lora > 0) {
    l.wq = L.matrix(p + "attn_q_a.weight", c.n_embd, c.mla_q_lora);
    l.q_a_norm = L.vector_f32(p + "attn_q_a_norm.weight", c.mla_q_lora);
    l.wq_b = L.matrix(p + "attn_q_b.weight", c.mla_q_lora, qd);
  } else {
    l.wq = L.matrix(p + "attn_q.weight", c.n_embd, qd);
  }
  l.wkv_a = L.matrix(p + "attn_kv_a_mqa.weight", c.n_embd, lora + c.rope.n_rot);
  l.kv_a_norm = L.vector_f32(p + "attn_kv_a_norm.weight", lora);
  l.w_kb = L.rows(p + "attn_k_b.weight", {uint64_t(c.mla_k_nope), uint64_t(lora), uint64_t(h)});
  l.w_vb = L.rows(p + "attn_v_b.weight", {uint64_t(lora), uint64_t(c.mla_v), uint64_t(h)});
  l.wo = L.matrix(p + "attn_output.weight", c.mla_out_dim(), c.n_embd);
}

// The shared expert and its scale's weight vector.
void load_shared_expert(Loader& L, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const int64_t ff = c.n_ff_shexp;
  l.shexp_gate = L.matrix(p + "ffn_gate_shexp.weight", c.n_embd, ff);
  l.shexp_up = L.matrix(p + "ffn_up_shexp.weight", c.n_embd, ff);
  l.shexp_down = L.matrix(p + "ffn_down_shexp.weight", ff, c.n_embd);
  if (c.shexp_gated) l.shexp_gate_inp = L.matrix(p + "ffn_gate_inp_shexp.weight", c.n_embd, 1);
}

// Attention of a layer with its own shapes (ModelConfig::stepwise_layers):
// no k/v for a shared-KV layer; where V is normed without a weight (v_norm)
// attn_v may be absent (K is then V).
void load_shaped_attention(Loader& L, const ModelConfig& c, int32_t i, const std::string& p, LayerWeights& l) {
  const int64_t hd = c.head_dim_of(i), q = c.q_dim_of(i), kv = c.kv_dim_of(i);
  l.wq = L.matrix(p + "attn_q.weight", c.n_embd, q);
  if (c.qk_norm) l.q_norm = L.vector_f32(p + "attn_q_norm.weight", hd);
  if (!c.shares_kv(i)) {
    l.wk = L.matrix(p + "attn_k.weight", c.n_embd, kv);
    if (!c.v_norm || L.f.find_tensor(p + "attn_v.weight")) l.wv = L.matrix(p + "attn_v.weight", c.n_embd, kv);
    if (c.qk_norm) l.k_norm = L.vector_f32(p + "attn_k_norm.weight", hd);
    if (c.v_norm) l.v_norm = L.f32_on_backend(std::vector<float>(size_t(hd), 1.0f), p + "v_norm (ones)");
  }
  l.wo = L.matrix(p + "attn_output.weight", q, c.n_embd);
}

// Gemma 4's extras of layer i: the MoE branch's norms, router gain and
// expert scales; per-layer embedding weights; the output scale.
void load_gemma4_extras(Loader& L, const ModelConfig& c, int32_t i, const std::string& p, LayerWeights& l) {
  if (c.moe_with_dense) {
    std::vector<float> g = L.host_f32(p + "ffn_gate_inp.scale", c.n_embd);
    for (float& x : g) x /= std::sqrt(float(c.n_embd));
    l.router_norm = L.f32_on_backend(g, p + "ffn_gate_inp.scale");
    l.expert_scale = L.vector_f32(p + "ffn_down_exps.scale", c.n_expert);
    l.pre_ffn_norm_2 = L.vector_f32(p + "pre_ffw_norm_2.weight", c.n_embd);
    l.post_ffn_norm_1 = L.vector_f32(p + "post_ffw_norm_1.weight", c.n_embd);
    l.post_ffn_norm_2 = L.vector_f32(p + "post_ffw_norm_2.weight", c.n_embd);
  }
  if (c.n_embd_per_layer > 0) {
    const int64_t npl = c.n_embd_per_layer;
    l.ple_gate = L.matrix(p + "inp_gate.weight", c.n_embd, npl);
    l.ple_proj = L.matrix(p + "proj.weight", npl, c.n_embd);
    l.ple_post_norm = L.vector_f32(p + "post_norm.weight", c.n_embd);
    l.ple_embd = L.column_part("per_layer_token_embd.weight", {uint64_t(npl * c.n_layer), uint64_t(c.n_vocab)},
                               i * npl, npl);
  }
  if (c.layer_out_scale && L.f.find_tensor(p + "layer_output_scale.weight")) {
    l.out_scale = L.host_f32(p + "layer_output_scale.weight", 1)[0];
    RF_CHECK(std::isfinite(l.out_scale), "tensor '", p, "layer_output_scale.weight' is not finite");
  }
}

// An MTP block's own tensors (llama.cpp's names: blk.N.nextn.*).
void load_mtp_extras(Loader& L, const ModelConfig& c, const std::string& p, MtpWeights& m) {
  m.eh_proj = L.matrix(p + "nextn.eh_proj.weight", 2 * int64_t(c.n_embd), c.n_embd);
  m.enorm = L.vector_f32(p + "nextn.enorm.weight", c.n_embd);
  m.hnorm = L.vector_f32(p + "nextn.hnorm.weight", c.n_embd);
  if (L.f.find_tensor(p + "nextn.embed_tokens.weight"))
    m.embed_tokens = L.matrix(p + "nextn.embed_tokens.weight", c.n_embd, c.n_vocab);
  if (L.f.find_tensor(p + "nextn.shared_head_head.weight"))
    m.shared_head_head = L.matrix(p + "nextn.shared_head_head.weight", c.n_embd, c.n_vocab);
  if (L.f.find_tensor(p + "nextn.shared_head_norm.weight"))
    m.shared_head_norm = L.vector_f32(p + "nextn.shared_head_norm.weight", c.n_embd);
}

}  // namespace rf::weights_detail
