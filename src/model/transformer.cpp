// The Llama forward pass: embed -> layers (RMSNorm, QKV, RoPE + KV store,
// paged attention, output projection, residual, RMSNorm, SwiGLU FFN,
// residual) -> gather the rows that need logits -> final norm -> LM head.
#include "model/transformer.h"

#include <cmath>

#include "core/error.h"

namespace rf {

Transformer::Transformer(const ModelConfig& config, const ModelWeights& weights, Backend& backend,
                         const BackendLimits& limits)
    : c_(config), w_(weights), backend_(backend), limits_(limits) {
  RF_CHECK(limits.max_tokens > 0 && limits.max_logits > 0 && limits.max_seqs > 0, "transformer: empty limits");
  limits_.vocab = c_.n_vocab;
  const DType act = backend.activation_type();
  const int64_t T = limits.max_tokens;
  x_ = alloc_act(c_.n_embd, T, act, "residual");
  xn_ = alloc_act(c_.n_embd, T, act, "normed");
  q_ = alloc_act(c_.q_dim(), T, act, "q");
  k_ = alloc_act(c_.kv_dim(), T, act, "k");
  v_ = alloc_act(c_.kv_dim(), T, act, "v");
  attn_ = alloc_act(c_.q_dim(), T, act, "attention out");
  proj_ = alloc_act(c_.n_embd, T, act, "projection");
  gate_ = alloc_act(c_.n_ff, T, act, "ffn gate");
  up_ = alloc_act(c_.n_ff, T, act, "ffn up");
  last_ = alloc_act(c_.n_embd, limits.max_logits, act, "last hidden");
  last_n_ = alloc_act(c_.n_embd, limits.max_logits, act, "last normed");
  logits_ = alloc_act(c_.n_vocab, limits.max_logits, DType::F32, "logits");
  backend_.reserve(limits_);
}

Transformer::~Transformer() {
  for (void* p : buffers_) backend_.free(p);
}

Tensor Transformer::alloc_act(int64_t cols, int64_t rows, DType type, const char* what) {
  void* p = backend_.alloc(row_bytes(type, uint64_t(cols)) * size_t(rows), what);
  buffers_.push_back(p);
  return make_tensor(p, type, cols, rows, backend_.device());
}

Tensor Transformer::forward(const Batch& batch, KVCache& kv) {
  const int32_t n = batch.n_tokens();
  RF_CHECK(n > 0 && n <= limits_.max_tokens, "forward: ", n, " tokens (limit ", limits_.max_tokens, ")");
  RF_CHECK(batch.n_seqs() <= limits_.max_seqs, "forward: ", batch.n_seqs(), " sequences (limit ", limits_.max_seqs, ")");
  RF_CHECK(batch.n_logits() <= limits_.max_logits, "forward: ", batch.n_logits(), " logit rows (limit ",
           limits_.max_logits, ")");
  RF_CHECK(batch.block_size == kv.block_size(), "forward: batch block size differs from the cache's");
  const StepMeta m = backend_.upload_step(batch);

  Tensor x = x_.slice_rows(0, n), xn = xn_.slice_rows(0, n);
  Tensor q = q_.slice_rows(0, n), k = k_.slice_rows(0, n), v = v_.slice_rows(0, n);
  Tensor attn = attn_.slice_rows(0, n), proj = proj_.slice_rows(0, n);
  Tensor gate = gate_.slice_rows(0, n), up = up_.slice_rows(0, n);

  AttentionParams ap;
  ap.n_heads = c_.n_head;
  ap.n_kv_heads = c_.n_head_kv;
  ap.head_dim = c_.head_dim;
  ap.scale = 1.0f / std::sqrt(float(c_.head_dim));

  backend_.embed(w_.tok_embd, m, x);
  for (int32_t il = 0; il < c_.n_layer; ++il) {
    const LayerWeights& l = w_.layers[size_t(il)];
    const KVLayer& cache = kv.layer(il);
    backend_.rms_norm(x, l.attn_norm, c_.rms_eps, xn);
    backend_.matmul(xn, l.wq, q);
    backend_.matmul(xn, l.wk, k);
    backend_.matmul(xn, l.wv, v);
    backend_.rope_store_kv(q, k, v, m, c_.rope, cache);
    backend_.attention(q, cache, m, ap, attn);
    backend_.matmul(attn, l.wo, proj);
    backend_.add(x, proj, x);
    backend_.rms_norm(x, l.ffn_norm, c_.rms_eps, xn);
    backend_.matmul(xn, l.w_gate, gate);
    backend_.matmul(xn, l.w_up, up);
    backend_.swiglu(gate, up, gate);
    backend_.matmul(gate, l.w_down, proj);
    backend_.add(x, proj, x);
  }
  const int32_t nl = batch.n_logits();
  Tensor logits = logits_.slice_rows(0, nl);
  if (nl == 0) return logits;
  Tensor last = last_.slice_rows(0, nl), last_n = last_n_.slice_rows(0, nl);
  backend_.gather_rows(x, m, last);
  backend_.rms_norm(last, w_.output_norm, c_.rms_eps, last_n);
  backend_.matmul(last_n, w_.output, logits);
  return logits;
}

}  // namespace rf
