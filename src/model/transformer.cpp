// The forward pass: embed (x scale) -> layers (RMSNorm, QKV [+ biases]
// [-> per-head q/k RMSNorm], RoPE + KV store, paged attention [window,
// soft-cap], output projection [-> post norm], residual, RMSNorm, SwiGLU or
// GeGLU FFN — or router logits (f32) -> top-k routing -> the chosen
// experts' FFNs, weighted [+ a shared expert, times sigmoid of its gate
// where it has one] (leading dense layers: the dense FFN) —
// [-> post norm], residual) -> gather the rows that need logits -> final
// norm -> LM head [-> soft-cap]. Bracketed steps run where the model's
// configuration has them. A gated attention output multiplies the
// attention by sigmoid of its gate rows before the output projection; a
// Gated DeltaNet layer replaces attention by input projections -> causal
// conv with SiLU -> the gated delta rule over each sequence's state row ->
// gated RMSNorm -> ssm_out. Where only some of a step's rows need logits
// (prompts), the last layer gathers them after its token mixer: the other
// rows only store their K and V (or state) there. Models with blocks this
// fused path does not cover (ModelConfig::stepwise_layers: Gemma 4) run
// their layers step by step (model/transformer_blocks.cpp).
#include "model/transformer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rf {

Transformer::Transformer(const ModelConfig& config, const ModelWeights& weights, Backend& backend,
                         const BackendLimits& limits, Communicator* comm)
    : c_(config), w_(weights), backend_(backend), comm_(comm && comm->size() > 1 ? comm : nullptr), limits_(limits) {
  RF_CHECK(limits.max_tokens > 0 && limits.max_logits > 0 && limits.max_seqs > 0, "transformer: empty limits");
  vocab_ = comm_ ? shard_range(c_.n_vocab, ShardSpec{comm_->rank(), comm_->size()}) : IndexRange{0, c_.n_vocab};
  RF_CHECK(w_.tok_embd.rows() == vocab_.count && w_.output.rows() == vocab_.count, "transformer: embedding rows ",
           w_.tok_embd.rows(), " for a vocabulary range of ", vocab_.count);
  limits_.vocab = int32_t(vocab_.count);
  limits_.vocab_total = c_.n_vocab;
  // (0 for MLA models: their layers run attention_mla, not the paged
  // attention op, whose scratch these size.) Layers of other head sizes and
  // KV heads (Gemma 4): the largest of each, and the smallest head size
  // (the attention kernels' scratch and tiles).
  limits_.n_heads = c_.is_mla() ? 0 : c_.n_head;
  limits_.head_dim = c_.is_mla() ? 0 : c_.head_dim;
  limits_.n_kv_heads = c_.is_mla() ? 0 : c_.n_head_kv;
  limits_.min_head_dim = limits_.head_dim;
  for (int32_t il = 0; il < c_.n_layer && !c_.is_mla(); ++il) {
    limits_.head_dim = std::max(limits_.head_dim, c_.head_dim_of(il));
    limits_.min_head_dim = std::min(limits_.min_head_dim, c_.head_dim_of(il));
    limits_.n_kv_heads = std::max(limits_.n_kv_heads, c_.n_head_kv_of(il));
  }
  limits_.kv_groups = kv_group_layout(c_).n_groups();
  const bool dense = c_.has_dense_ffn();  // a dense FFN on some layer
  if (c_.has_experts()) {  // (the expert fields stay 0 for dense models, n_ff for MoE ones)
    moe_ = c_.moe();
    limits_.n_embd = c_.n_embd;
    limits_.n_expert = moe_.n_expert;
    limits_.n_expert_used = moe_.n_used;
    limits_.expert_ff = moe_.n_ff;
  }
  if (dense) limits_.n_ff = c_.n_ff;
  // The largest matrix an op reads whole: an expert's is one expert's slice.
  auto elems = [](const Tensor& t) { return t.cols() * t.rows(); };
  limits_.max_weight_elems = std::max({elems(w_.tok_embd), elems(w_.output), elems(w_.ple_model_proj)});
  for (const LayerWeights& l : w_.layers) {
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router, &l.w_attn_gate,
                            &l.shexp_gate, &l.shexp_up, &l.shexp_down, &l.ssm_in, &l.ssm_z, &l.ssm_out,
                            &l.ple_embd, &l.ple_gate, &l.ple_proj, &l.wq_b, &l.wkv_a, &l.w_kb, &l.w_vb})
      limits_.max_weight_elems = std::max(limits_.max_weight_elems, elems(*t));
    if (l.experts.n_expert > 0 && l.experts.gate.device != backend.device()) {
      limits_.host_experts = true;  // (their matmuls run on the host, or on the backend's copy of them)
      limits_.host_expert_bytes = std::max(limits_.host_expert_bytes, l.experts.copy_bytes());
    } else if (l.experts.n_expert > 0) {
      for (const Tensor& t : {l.experts.gate_of(0), l.experts.up_of(0), l.experts.down_of(0)})
        limits_.max_weight_elems = std::max(limits_.max_weight_elems, elems(t));
    }
  }
  const DType act = backend.activation_type(), res = backend.residual_type();
  const int64_t T = limits.max_tokens;
  x_ = alloc_act(c_.n_embd, T, res, "residual");
  xn_ = alloc_act(c_.n_embd, T, act, "normed");
  const int32_t qd = c_.max_q_dim(), kvd = c_.max_kv_dim();  // (a layer uses the front of these)
  q_ = alloc_act(qd, T, act, "q");
  k_ = alloc_act(kvd, T, act, "k");
  v_ = alloc_act(kvd, T, act, "v");
  attn_ = alloc_act(qd, T, act, "attention out");
  proj_ = alloc_act(c_.n_embd, T, act, "projection");
  if (c_.has_experts()) {
    router_logits_ = alloc_act(moe_.n_expert, T, DType::F32, "router logits");
    expert_ids_ = alloc_act(moe_.n_used, T, DType::I32, "expert ids");
    expert_weights_ = alloc_act(moe_.n_used, T, DType::F32, "expert weights");
  }
  if (dense) {
    gate_ = alloc_act(c_.n_ff, T, act, "ffn gate");
    up_ = alloc_act(c_.n_ff, T, act, "ffn up");
  }
  if (c_.qk_norm) {
    q_raw_ = alloc_act(qd, T, act, "q before norm");
    k_raw_ = alloc_act(kvd, T, act, "k before norm");
  }
  if (c_.is_mla()) {  // (q_ holds the absorbed queries, attn_ the values after attn_v_b)
    RF_CHECK(c_.mla_out_dim() <= qd, "transformer: MLA values of ", c_.mla_out_dim(), " beside queries of ", qd);
    q_raw_ = alloc_act(c_.mla_q_dim(), T, act, "mla q");
    mla_lat_ = alloc_act(int64_t(c_.n_head) * c_.mla_kv_lora, T, act, "mla weighted latents");
    if (c_.mla_q_lora > 0) {
      mla_qa_ = alloc_act(c_.mla_q_lora, T, act, "mla q lora");
      mla_qan_ = alloc_act(c_.mla_q_lora, T, act, "mla q lora normed");
    }
  }
  if (c_.post_ffn_norm) post_ = alloc_act(c_.n_embd, T, act, "post norm");  // the last layer's post-FFN norm
  if (c_.moe_with_dense) aux_ = alloc_act(c_.n_embd, T, act, "dense ffn beside experts");
  if (c_.n_embd_per_layer > 0) {
    ple_x0_ = alloc_act(c_.n_embd, T, act, "scaled embeddings");
    ple_in_ = alloc_act(c_.n_embd_per_layer, T, res, "per-layer input");
    ple_pp_ = alloc_act(c_.n_embd_per_layer, T, act, "per-layer projection");
    ple_gate_ = alloc_act(c_.n_embd_per_layer, T, act, "per-layer gate");
  }
  if (c_.attn_output_gate) attn_gate_ = alloc_act(c_.q_dim(), T, act, "attention gate");
  if (c_.has_recurrent()) {
    ssm_mixed_ = alloc_act(c_.ssm_conv_channels(), T, act, "deltanet q|k|v");
    ssm_conv_ = alloc_act(c_.ssm_conv_channels(), T, act, "deltanet conv out");
    ssm_z_ = alloc_act(c_.ssm_inner(), T, act, "deltanet z");
    // beta and alpha in f32 on every backend: the decay exp(softplus(alpha +
    // dt_bias) * a) is steep in alpha (|a| up to ~16), and f16's rounding
    // of alpha moves it by up to ~1% a token, which the state accumulates.
    ssm_beta_ = alloc_act(c_.ssm_v_heads, T, DType::F32, "deltanet beta");
    ssm_alpha_ = alloc_act(c_.ssm_v_heads, T, DType::F32, "deltanet alpha");
    // The delta rule's output in f32 on every backend: its scale is the
    // state's, which can sit far below f16's normal range, and the gated
    // RMSNorm after it divides that scale out again.
    ssm_core_ = alloc_act(c_.ssm_inner(), T, DType::F32, "deltanet out");
  }
  if (c_.n_ff_shexp > 0) {
    sh_gate_ = alloc_act(c_.n_ff_shexp, T, act, "shared expert gate");
    sh_up_ = alloc_act(c_.n_ff_shexp, T, act, "shared expert up");
    sh_out_ = alloc_act(c_.n_embd, T, act, "shared expert out");
    sh_scale_ = alloc_act(1, T, act, "shared expert scale");
  }
  for (const LayerWeights& l : w_.layers) mixer_inputs_.push_back(l.mixer_inputs());
  last_attn_ = alloc_act(std::max(qd, c_.has_recurrent() ? c_.ssm_inner() : 0), limits.max_logits, act,
                         "last mixer out");
  last_ = alloc_act(c_.n_embd, limits.max_logits, res, "last hidden");
  last_n_ = alloc_act(c_.n_embd, limits.max_logits, act, "last normed");
  logits_ = alloc_act(vocab_.count, limits.max_logits, DType::F32, "logits");
  backend_.reserve(limits_);
}

Transformer::~Transformer() {
  backend_.clear_graphs();  // they point into the buffers freed here
  for (void* p : buffers_) backend_.free(p);
}

Tensor rows_of(const Tensor& buf, int64_t cols, int64_t rows) {
  RF_CHECK(cols * rows <= buf.numel(), "workspace of ", buf.numel(), " elements for ", cols, " x ", rows);
  return make_tensor(buf.data, buf.type, cols, rows, buf.device);
}

Tensor Transformer::alloc_act(int64_t cols, int64_t rows, DType type, const char* what) {
  void* p = backend_.alloc(row_bytes(type, uint64_t(cols)) * size_t(rows), what);
  buffers_.push_back(p);
  return make_tensor(p, type, cols, rows, backend_.device());
}

bool Transformer::graph_eligible(const Batch& b) const {
  if (!backend_.supports_graphs() || b.n_tokens() != b.n_seqs() || b.n_logits() != b.n_seqs()) return false;
  return graph_bucket(b.n_seqs()) <= std::min(limits_.max_seqs, limits_.max_logits);
}

int32_t Transformer::graph_bucket(int32_t n) {
  if (n <= 8) {
    int32_t b = 1;
    while (b < n) b *= 2;
    return b;
  }
  return (n + 15) / 16 * 16;
}

uint64_t Transformer::graph_key(int32_t bucket, const StepMeta& m) {
  return uint64_t(uint32_t(bucket)) | uint64_t(m.graph_variant) << 32;
}

void Transformer::pad_for_graph(const Batch& b, int32_t bucket) {
  padded_ = b;
  padded_.pad_to(bucket);
}

void Transformer::warmup(KVCache& kv) {
  if (!backend_.supports_graphs()) return;
  Batch empty;
  empty.reset(kv.block_size(), limits_.max_blocks_per_seq, kv.groups().n_groups());
  for (int32_t bucket = 1; bucket <= std::min(limits_.max_seqs, limits_.max_logits);
       bucket = bucket < 8 ? bucket * 2 : bucket / 16 * 16 + 16) {
    pad_for_graph(empty, bucket);
    const StepMeta m = backend_.upload_step(padded_);
    backend_.run_graph(graph_key(bucket, m), [&] { run_layers(m, kv); });
  }
  backend_.synchronize();
}

Tensor Transformer::forward(const Batch& batch, KVCache& kv, bool hidden_states) {
  const int32_t n = batch.n_tokens();
  RF_CHECK(n > 0 && n <= limits_.max_tokens, "forward: ", n, " tokens (limit ", limits_.max_tokens, ")");
  RF_CHECK(batch.n_seqs() <= limits_.max_seqs, "forward: ", batch.n_seqs(), " sequences (limit ", limits_.max_seqs, ")");
  RF_CHECK(batch.n_logits() <= limits_.max_logits, "forward: ", batch.n_logits(), " logit rows (limit ",
           limits_.max_logits, ")");
  RF_CHECK(batch.block_size == kv.block_size(), "forward: batch block size differs from the cache's");
  RF_CHECK(batch.n_groups() == kv.groups().n_groups() && batch.n_groups() == limits_.kv_groups, "forward: batch of ",
           batch.n_groups(), " KV groups for a cache of ", kv.groups().n_groups());
  // The reference backend checks every batch (cheap beside its forward
  // pass); GPU steps skip it on the hot path.
  if (backend_.device() == DeviceKind::CPU)
    batch.validate(kv.num_blocks(), kv.groups().group_windows(), kv.state_rows());
  RF_CHECK(kv.state_rows() > 0 || (batch.state_loads.empty() && batch.state_saves.empty()),
           "forward: state copies for a model without recurrent state");
  const int32_t nl = batch.n_logits();
  // Prefix checkpoints into the sequences' state rows before the layers,
  // the rows saved as checkpoints after them (outside any graph).
  for (const Batch::StateCopy& c : batch.state_loads) kv.copy_state_row(c.src, c.dst);
  hidden_rows_ = 0;
  if (hidden_states) {  // embeddings: every row through the last layer, never a captured graph
    const StepMeta m = backend_.upload_step(batch);
    run_layers(m, kv, true);
    hidden_rows_ = n;
  } else if (graph_eligible(batch)) {
    const int32_t bucket = graph_bucket(n);
    pad_for_graph(batch, bucket);
    const StepMeta m = backend_.upload_step(padded_);
    backend_.run_graph(graph_key(bucket, m), [&] { run_layers(m, kv); });
  } else {
    const StepMeta m = backend_.upload_step(batch);
    run_layers(m, kv);
  }
  for (const Batch::StateCopy& c : batch.state_saves) kv.copy_state_row(c.src, c.dst);
  return logits_.slice_rows(0, nl);
}

Tensor Transformer::project_qkv(int32_t il, const StepMeta& m, const KVLayer& cache, const Handoff& xn_h) {
  const int32_t n = m.n_tokens;
  const LayerWeights& l = w_.layers[size_t(il)];
  const int32_t qd = c_.q_dim_of(il), kvd = c_.kv_dim_of(il), hd = c_.head_dim_of(il);
  Tensor xn = xn_.slice_rows(0, n), q = rows_of(q_, qd, n), k = rows_of(k_, kvd, n), v = rows_of(v_, kvd, n);
  // Projections, into the pre-norm buffers when q and k get a per-head norm.
  Tensor qp = c_.qk_norm ? rows_of(q_raw_, qd, n) : q, kp = c_.qk_norm ? rows_of(k_raw_, kvd, n) : k;
  if (c_.shares_kv(il)) {  // q alone: the layer attends to an earlier layer's KV
    backend_.matmul(xn, l.wq, qp, xn_h);
    if (c_.qk_norm) {
      Tensor qo = q.view2d(hd, q.numel() / hd);
      backend_.rms_norm(qp.view2d(hd, qp.numel() / hd), l.q_norm, c_.rms_eps, qo);
    }
    backend_.rope_q(q, hd, m, c_.rope_for(il));
    return q;
  }
  const Tensor qkv_b[4] = {l.bq, l.bk, l.bv, Tensor{}};
  Tensor qkv[4] = {qp, kp, v, c_.attn_output_gate ? attn_gate_.slice_rows(0, n) : Tensor{}};
  const std::vector<Tensor>& ws = mixer_inputs_[size_t(il)];  // q, k, v [, gate] (q, k where K is V)
  backend_.matmul_multi(xn, ws, std::span<Tensor>(qkv, ws.size()),
                        l.bq.data ? std::span<const Tensor>(qkv_b, ws.size()) : std::span<const Tensor>(), xn_h);
  if (c_.v_norm) {  // V RMS-normed per head without a weight: V's projection, or K's before its norm
    const Tensor& vin = l.wv.data ? v : kp;
    Tensor vo = v.view2d(hd, v.numel() / hd);
    backend_.rms_norm(vin.view2d(hd, vin.numel() / hd), l.v_norm, c_.rms_eps, vo);
  }
  if (c_.qk_norm) {
    backend_.qk_norm_rope_store_kv(qp, l.q_norm, kp, l.k_norm, c_.rms_eps, q, k, v, m, c_.rope_for(il), cache);
  } else {
    backend_.rope_store_kv(q, k, v, m, c_.rope_for(il), cache);
  }
  return q;
}

Tensor Transformer::attend(int32_t il, const StepMeta& m, const KVLayer& cache, const Tensor& q, Handoff& attn_h) {
  Tensor attn = rows_of(attn_, c_.q_dim_of(il), m.n_tokens);
  AttentionParams ap;
  ap.n_heads = c_.n_head;
  ap.n_kv_heads = c_.n_head_kv_of(il);
  ap.head_dim = c_.head_dim_of(il);
  ap.scale = c_.attn_scale;
  ap.window = c_.is_swa(il) ? c_.sliding_window : 0;
  ap.softcap = c_.attn_softcap;
  ap.sinks = w_.layers[size_t(il)].sinks.data ? w_.layers[size_t(il)].sinks.ptr<float>() : nullptr;
  if (ap.window > 0 || ap.softcap > 0.0f || ap.sinks) {
    attn_h = backend_.attention_ext(q, cache, m, ap, attn);
  } else {
    attn_h = backend_.attention(q, cache, m, ap, attn);
  }
  if (c_.attn_output_gate) {  // (what attention handed over is of the rows before the gate)
    backend_.sigmoid_mul(attn, attn_gate_.slice_rows(0, m.n_tokens), attn);
    attn_h = {};
  }
  return attn;
}

Tensor Transformer::delta_net(int32_t il, const StepMeta& m, const RecurrentLayer& st, const Handoff& xn_h) {
  const int32_t n = m.n_tokens;
  const LayerWeights& l = w_.layers[size_t(il)];
  Tensor mixed = ssm_mixed_.slice_rows(0, n), z = ssm_z_.slice_rows(0, n), beta = ssm_beta_.slice_rows(0, n),
         alpha = ssm_alpha_.slice_rows(0, n);
  // q|k|v and z (activations), then beta and alpha (f32), each pair in one
  // matmul_multi; the second reads what the first handed over.
  const std::span<const Tensor> ws(mixer_inputs_[size_t(il)]);
  Tensor act_outs[2] = {mixed, z}, gate_outs[2] = {beta, alpha};
  const Tensor xn = xn_.slice_rows(0, n);
  const Handoff after = backend_.matmul_multi(xn, ws.subspan(0, 2), act_outs, {}, xn_h);
  backend_.matmul_multi(xn, ws.subspan(2, 2), gate_outs, {}, after);
  Tensor conv = ssm_conv_.slice_rows(0, n), core = ssm_core_.slice_rows(0, n);
  backend_.conv1d_silu_state(mixed, l.ssm_conv, m, st, conv);
  backend_.gated_delta_net(conv, alpha, beta, l.ssm_dt_bias, l.ssm_a, m, st, c_.rms_eps, core);
  // The gated norm's output (activations) into the conv's rows, free once
  // the delta rule has read them (conv_channels >= ssm_inner).
  Tensor gated = rows_of(ssm_conv_, c_.ssm_inner(), n);
  backend_.gated_rms_norm(core, l.ssm_norm, z, c_.rms_eps, gated);
  return gated;
}

Tensor Transformer::mixer(int32_t il, const StepMeta& m, KVCache& kv, const Handoff& xn_h, Handoff& out_h) {
  out_h = {};
  if (c_.is_recurrent(il)) return delta_net(il, m, kv.state_layer(il), xn_h);
  const KVLayer& cache = kv.layer(il);
  if (c_.is_mla()) return mla_attention(il, m, cache, xn_h);
  const Tensor q = project_qkv(il, m, cache, xn_h);
  return attend(il, m, cache, q, out_h);
}

const Tensor& Transformer::mixer_out(int32_t il) const {
  const LayerWeights& l = w_.layers[size_t(il)];
  return c_.is_recurrent(il) ? l.ssm_out : l.wo;
}

Tensor Transformer::ffn_block(int32_t il, const Tensor& xn, const Handoff& xn_h) {
  const int32_t n = int32_t(xn.rows());
  const LayerWeights& l = w_.layers[size_t(il)];
  Tensor proj = proj_.slice_rows(0, n);
  if (c_.is_moe_layer(il)) {
    Tensor logits = router_logits_.slice_rows(0, n), ids = expert_ids_.slice_rows(0, n);
    Tensor weights = expert_weights_.slice_rows(0, n);
    MoeParams route = moe_;
    route.choice_bias = l.choice_bias;  // (the layer's own, where it has one)
    route.router_bias = l.router_bias;
    const Handoff ids_h = backend_.moe_router_route(xn, l.router, route, logits, ids, weights);
    // Every reader of xn (and of the quants its norm handed over) runs
    // before the first op that quantizes another tensor: the shared
    // expert's gate*up and gate first, then the routed experts, then the
    // shared expert's down projection.
    const bool shared = l.shexp_gate.data != nullptr;
    Tensor sg, su, so, ss;
    if (shared) {
      sg = sh_gate_.slice_rows(0, n), su = sh_up_.slice_rows(0, n), so = sh_out_.slice_rows(0, n);
      if (l.shexp_gate_inp.data) ss = sh_scale_.slice_rows(0, n);
      backend_.matmul_gate_up_glu(xn, l.shexp_gate, l.shexp_up, sg, su, sg, Activation::SiLU, xn_h);
      if (l.shexp_gate_inp.data) backend_.matmul(xn, l.shexp_gate_inp, ss, xn_h);
    }
    backend_.moe_ffn(xn, ids, weights, l.experts, moe_, proj, xn_h, ids_h);
    if (shared) {  // + the shared expert [times sigmoid(x . ffn_gate_inp_shexp)]
      backend_.matmul(sg, l.shexp_down, so);
      if (l.shexp_gate_inp.data) backend_.sigmoid_mul(so, ss, so);
      backend_.add(proj, so, proj);
    }
    return proj;
  }
  backend_.matmul(ffn_hidden(il, xn, xn_h), l.w_down, proj);
  return proj;
}

Tensor Transformer::ffn_hidden(int32_t il, const Tensor& xn, const Handoff& xn_h) {
  const int32_t n = int32_t(xn.rows());
  const LayerWeights& l = w_.layers[size_t(il)];
  Tensor gate = rows_of(gate_, c_.n_ff_of(il), n), up = rows_of(up_, c_.n_ff_of(il), n);
  backend_.matmul_gate_up_glu(xn, l.w_gate, l.w_up, gate, up, gate, c_.activation, xn_h);
  return gate;
}

Handoff Transformer::project_into_residual(const Tensor& in, const Handoff& in_h, const Tensor& w, const Tensor& bias,
                                           Tensor& x, const Tensor& post_norm, const Tensor& next_norm,
                                           std::span<const Tensor> consumers, Tensor& xn) {
  Tensor proj = proj_.slice_rows(0, in.rows());
  if (!comm_ && !post_norm.data && !bias.data)
    return backend_.matmul_add_rms_norm(in, w, proj, x, next_norm, c_.rms_eps, xn, consumers, in_h);
  if (bias.data) {  // (one launch with the bias where the backend fuses it)
    Tensor outs[1] = {proj};
    backend_.matmul_multi(in, std::span<const Tensor>(&w, 1), outs, std::span<const Tensor>(&bias, 1), in_h);
  } else {
    backend_.matmul(in, w, proj, in_h);
  }
  return residual_and_norm(x, proj, post_norm, next_norm, xn);
}

void Transformer::reduce(Tensor& x) {
  if (comm_) comm_->all_reduce_sum(x);
}

Handoff Transformer::residual_and_norm(Tensor& x, Tensor& block_out, const Tensor& post_norm, const Tensor& next_norm,
                                       Tensor& xn) {
  if (comm_ &&
      comm_->all_reduce_add_rms_norm(block_out, x, post_norm.data ? &post_norm : nullptr, next_norm, c_.rms_eps, xn))
    return {};
  reduce(block_out);
  if (post_norm.data) return backend_.add_post_norm_rms_norm(x, block_out, post_norm, next_norm, c_.rms_eps, xn);
  return backend_.add_rms_norm(x, block_out, next_norm, c_.rms_eps, xn);
}

void Transformer::add_last_residual(int32_t il, Tensor& x, Tensor& ffn_out) {
  const LayerWeights& l = w_.layers[size_t(il)];
  reduce(ffn_out);
  if (l.post_ffn_norm.data) {
    Tensor post = post_.slice_rows(0, x.rows());
    backend_.rms_norm(ffn_out, l.post_ffn_norm, c_.rms_eps, post);
    backend_.add(x, post, x);
  } else {
    backend_.add(x, ffn_out, x);
  }
}

void Transformer::last_layer_for_logits(int32_t il, const StepMeta& m, const Tensor& mix, const Tensor& x) {
  const int32_t nl = m.n_logits;
  if (nl == 0) return;  // a prompt's chunk before its last: its K and V were all it needed
  const LayerWeights& l = w_.layers[size_t(il)];
  Tensor mix_l = make_tensor(last_attn_.data, mix.type, mix.cols(), nl, mix.device);
  Tensor last = last_.slice_rows(0, nl), xn = last_n_.slice_rows(0, nl);
  Tensor proj = proj_.slice_rows(0, nl);
  backend_.gather_rows(mix, m, mix_l);
  backend_.gather_rows(x, m, last);
  backend_.matmul(mix_l, mixer_out(il), proj);
  if (l.bo.data) backend_.add_bias(proj, l.bo);
  const Handoff xn_h = residual_and_norm(last, proj, l.post_attn_norm, l.ffn_norm, xn);
  Tensor ffn_out = ffn_block(il, xn, xn_h);
  add_last_residual(il, last, ffn_out);
  logits_of(last, nl);
}

void Transformer::logits_of(const Tensor& last, int32_t nl) {
  Tensor last_n = last_n_.slice_rows(0, nl), logits = logits_.slice_rows(0, nl);
  backend_.rms_norm(last, w_.output_norm, c_.rms_eps, last_n);
  backend_.matmul(last_n, w_.output, logits);
  if (c_.final_softcap > 0.0f) backend_.softcap(logits, c_.final_softcap);
}

void Transformer::run_layers(const StepMeta& m, KVCache& kv, bool hidden_states) {
  if (c_.stepwise_layers()) return run_layers_stepwise(m, kv, hidden_states);
  const int32_t n = m.n_tokens, nl = m.n_logits;
  Tensor x = x_.slice_rows(0, n), xn = xn_.slice_rows(0, n);
  if (comm_) {
    backend_.embed_range(w_.tok_embd, vocab_.first, m, x);
    comm_->all_reduce_sum(x);
  } else {
    backend_.embed(w_.tok_embd, m, x);
  }
  if (c_.embd_scale != 1.0f) backend_.scale(x, c_.embd_scale);
  backend_.rms_norm(x, w_.layers[0].attn_norm, c_.rms_eps, xn);
  // What xn's norm handed over, for the matmuls that read xn next
  // (Backend::Handoff).
  Handoff xn_h;
  for (int32_t il = 0; il < c_.n_layer; ++il) {
    const LayerWeights& l = w_.layers[size_t(il)];
    const bool last_layer = il + 1 == c_.n_layer;
    // The layer's slots and block tables are its KV group's (recurrent
    // layers: no KV, the state rows instead).
    const int32_t group = kv.groups().group_of(il);
    const StepMeta lm = group >= 0 ? m.for_group(group) : m;
    Handoff mix_h;
    const Tensor mix = mixer(il, lm, kv, xn_h, mix_h);
    if (last_layer && nl < n && !hidden_states) {
      last_layer_for_logits(il, lm, mix, x);
      return;
    }
    // Each norm's matmuls come right after it (the backend may fuse them).
    const Tensor ffn_in[2] = {l.w_gate, l.w_up};
    xn_h = project_into_residual(mix, mix_h, mixer_out(il), l.bo, x, l.post_attn_norm, l.ffn_norm,
                                 c_.is_moe_layer(il) ? std::span<const Tensor>() : std::span<const Tensor>(ffn_in),
                                 xn);
    if (!last_layer && !c_.is_moe_layer(il)) {
      const LayerWeights& next = w_.layers[size_t(il) + 1];
      xn_h = project_into_residual(ffn_hidden(il, xn, xn_h), {}, l.w_down, Tensor{}, x, l.post_ffn_norm,
                                   next.attn_norm, mixer_inputs_[size_t(il) + 1], xn);
      continue;
    }
    Tensor ffn_out = ffn_block(il, xn, xn_h);
    if (!last_layer) {
      xn_h = residual_and_norm(x, ffn_out, l.post_ffn_norm, w_.layers[size_t(il) + 1].attn_norm, xn);
      continue;
    }
    add_last_residual(il, x, ffn_out);
  }
  // Embeddings: the final norm of every row (xn is free after the last FFN).
  if (hidden_states) backend_.rms_norm(x, w_.output_norm, c_.rms_eps, xn);
  if (nl == 0) return;  // (only embedding rows)
  // Every row needs logits (decode steps), possibly in another order.
  Tensor last = last_.slice_rows(0, nl);
  backend_.gather_rows(x, m, last);
  logits_of(last, nl);
}

}  // namespace rf
