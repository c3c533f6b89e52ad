// Multi-head latent attention in the forward pass (ModelConfig::is_mla,
// DeepSeek V2/V3): the normed input's query projection (attn_q, or the q
// LoRA attn_q_a -> RMSNorm -> attn_q_b) and attn_kv_a_mqa's latent c and
// RoPE key in one matmul_multi; RoPE, the norm of c and the store of the
// compressed row (mla_rope_store_kv); attention in the latent space with
// attn_k_b absorbed into the queries and attn_v_b applied to the weighted
// latents (attention_mla). The output rows are what attn_output multiplies.
#include "core/error.h"
#include "model/transformer.h"

namespace rf {

MlaParams Transformer::mla_params(int32_t il) const {
  const LayerWeights& l = w_.layers[size_t(il)];
  MlaParams p;
  p.n_heads = c_.n_head;
  p.nope = c_.mla_k_nope;
  p.rope = c_.rope.n_rot;
  p.lora = c_.mla_kv_lora;
  p.v = c_.mla_v;
  p.scale = c_.attn_scale;
  p.w_kb = l.w_kb;
  p.w_vb = l.w_vb;
  return p;
}

Tensor Transformer::mla_attention(int32_t il, const StepMeta& m, const KVLayer& cache, const Handoff& xn_h) {
  const int32_t n = m.n_tokens;
  const LayerWeights& l = w_.layers[size_t(il)];
  const bool lora = c_.mla_q_lora > 0;
  Tensor q = rows_of(q_raw_, c_.mla_q_dim(), n), kv = rows_of(k_, c_.kv_dim(), n);
  Tensor qa = lora ? rows_of(mla_qa_, c_.mla_q_lora, n) : q;
  Tensor outs[2] = {qa, kv};
  backend_.matmul_multi(xn_.slice_rows(0, n), mixer_inputs_[size_t(il)], outs, {}, xn_h);
  if (lora) {
    Tensor qan = rows_of(mla_qan_, c_.mla_q_lora, n);
    backend_.rms_norm(qa, l.q_a_norm, c_.rms_eps, qan);
    backend_.matmul(qan, l.wq_b, q);
  }
  const MlaParams p = mla_params(il);
  backend_.mla_rope_store_kv(q, kv, l.kv_a_norm, c_.rms_eps, m, c_.rope, p, cache);
  Tensor q_lat = rows_of(q_, int64_t(p.n_heads) * p.kv_row(), n);
  Tensor o_lat = rows_of(mla_lat_, int64_t(p.n_heads) * p.lora, n);
  Tensor out = rows_of(attn_, c_.mla_out_dim(), n);
  backend_.attention_mla(q, cache, m, p, q_lat, o_lat, out);
  return out;
}

}  // namespace rf
