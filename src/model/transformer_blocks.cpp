// The forward pass one step at a time, for models with blocks the fused
// layer path (transformer.cpp) does not cover (ModelConfig::stepwise_layers,
// Gemma 4): per-layer head sizes, KV heads and FFN widths; shared-KV layers
// (q alone, attending to an earlier layer's cache and block tables); V
// RMS-normed without a weight, or K as V; the dense FFN beside the experts;
// per-layer embeddings; the layer output scale. A layer:
//   xn = RMSNorm(x) -> q/k/v (project_qkv) -> attention -> attn_output ->
//   x += RMSNorm(.) (post_attention_norm) -> xn = RMSNorm(x) (ffn_norm) ->
//   FFN (or dense + experts) -> x += RMSNorm(.) (post_ffw_norm) ->
//   [x += per-layer embedding block] -> [x *= layer_output_scale].
// Every row runs the whole last layer; the rows that need logits are
// gathered after it.
#include <cmath>

#include "core/error.h"
#include "model/transformer.h"

namespace rf {

void Transformer::run_layers_stepwise(const StepMeta& m, KVCache& kv, bool hidden_states) {
  const int32_t n = m.n_tokens, nl = m.n_logits;
  Tensor x = x_.slice_rows(0, n), xn = xn_.slice_rows(0, n);
  backend_.embed(w_.tok_embd, m, x);
  if (c_.embd_scale != 1.0f) backend_.scale(x, c_.embd_scale);
  if (c_.n_embd_per_layer > 0) {  // the scaled embeddings as activations, for the per-layer projections
    Tensor x0 = ple_x0_.slice_rows(0, n);
    backend_.convert(x, x0);
  }
  for (int32_t il = 0; il < c_.n_layer; ++il) {
    const LayerWeights& l = w_.layers[size_t(il)];
    // A shared-KV layer reads its source layer's cache through that layer's group.
    const StepMeta lm = m.for_group(kv.groups().group_of(c_.kv_layer(il)));
    const KVLayer& cache = kv.layer(il);
    backend_.rms_norm(x, l.attn_norm, c_.rms_eps, xn);
    Handoff attn_h;
    const Tensor q = project_qkv(il, lm, cache, {});
    const Tensor attn = attend(il, lm, cache, q, attn_h);
    Tensor proj = proj_.slice_rows(0, n);
    backend_.matmul(attn, l.wo, proj, attn_h);
    backend_.add_post_norm_rms_norm(x, proj, l.post_attn_norm, l.ffn_norm, c_.rms_eps, xn);
    Tensor ffn_out = c_.moe_with_dense ? ffn_beside_experts(il, x, xn) : ffn_block(il, xn, {});
    add_last_residual(il, x, ffn_out);
    if (c_.n_embd_per_layer > 0) per_layer_embedding(il, m, x);
    if (l.out_scale != 1.0f) backend_.scale(x, l.out_scale);
  }
  if (hidden_states) backend_.rms_norm(x, w_.output_norm, c_.rms_eps, xn);
  if (nl == 0) return;
  Tensor last = last_.slice_rows(0, nl);
  backend_.gather_rows(x, m, last);
  logits_of(last, nl);
}

Tensor Transformer::ffn_beside_experts(int32_t il, const Tensor& x, const Tensor& xn) {
  const int32_t n = int32_t(x.rows());
  const LayerWeights& l = w_.layers[size_t(il)];
  Tensor dense = aux_.slice_rows(0, n), proj = proj_.slice_rows(0, n), post = post_.slice_rows(0, n);
  backend_.matmul(ffn_hidden(il, xn, {}), l.w_down, proj);
  backend_.rms_norm(proj, l.post_ffn_norm_1, c_.rms_eps, dense);
  // The router reads RMSNorm(x) / sqrt(n_embd) * ffn_gate_inp.scale (one
  // gain, router_norm); the experts RMSNorm(x) * pre_ffw_norm_2. (xn is
  // free once the dense branch has read it.)
  Tensor xr = xn;
  Tensor logits = router_logits_.slice_rows(0, n), ids = expert_ids_.slice_rows(0, n),
         weights = expert_weights_.slice_rows(0, n);
  backend_.rms_norm(x, l.router_norm, c_.rms_eps, xr);
  backend_.matmul(xr, l.router, logits);
  const Handoff ids_h = backend_.moe_route(logits, moe_, ids, weights);
  backend_.moe_scale_weights(ids, l.expert_scale, weights);
  backend_.rms_norm(x, l.pre_ffn_norm_2, c_.rms_eps, xr);
  backend_.moe_ffn(xr, ids, weights, l.experts, moe_, proj, {}, ids_h);
  backend_.rms_norm(proj, l.post_ffn_norm_2, c_.rms_eps, post);
  backend_.add(dense, post, dense);
  return dense;
}

void Transformer::per_layer_embedding(int32_t il, const StepMeta& m, Tensor& x) {
  const int32_t n = int32_t(x.rows()), npl = c_.n_embd_per_layer;
  const LayerWeights& l = w_.layers[size_t(il)];
  Tensor in = rows_of(ple_in_, npl, n), pp = rows_of(ple_pp_, npl, n), g = rows_of(ple_gate_, npl, n);
  // The layer's input: (its per_layer_token_embd columns * sqrt(npl) +
  // RMSNorm(its rows of per_layer_model_proj . x0 / sqrt(n_embd))) / sqrt(2),
  // summed in the residual type (as embeddings are looked up), then as
  // activations (pp's buffer) for the GLU.
  backend_.embed(l.ple_embd, m, in);
  backend_.scale(in, std::sqrt(float(npl)));
  backend_.matmul(ple_x0_.slice_rows(0, n), w_.ple_model_proj.slice_rows(int64_t(il) * npl, npl), pp);
  backend_.scale(pp, 1.0f / std::sqrt(float(c_.n_embd)));
  backend_.rms_norm(pp, w_.ple_proj_norm, c_.rms_eps, pp);
  backend_.add(in, pp, in);
  backend_.scale(in, 1.0f / std::sqrt(2.0f));
  backend_.convert(in, pp);
  // x += RMSNorm(proj . (gelu(x . inp_gate) * input)) (post_norm); x read
  // as activations (xn's buffer: free until the next layer's norm).
  Tensor xa = xn_.slice_rows(0, n);
  backend_.convert(x, xa);
  backend_.matmul(xa, l.ple_gate, g);
  backend_.geglu(g, pp, g);
  Tensor o = proj_.slice_rows(0, n), post = post_.slice_rows(0, n);
  backend_.matmul(g, l.ple_proj, o);
  backend_.rms_norm(o, l.ple_post_norm, c_.rms_eps, post);
  backend_.add(x, post, x);
}

}  // namespace rf
