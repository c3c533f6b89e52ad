// Looking up, validating and loading model tensors.
#include "model/weights.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "core/quant.h"

namespace rf {
namespace {

struct Loader {
  const gguf::File& f;
  Backend& backend;
  uint64_t done = 0, total = 0;
  const std::function<void(uint64_t, uint64_t)>& progress;

  std::unordered_set<std::string> used;

  const gguf::TensorInfo& info(const std::string& name, std::vector<uint64_t> shape) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    RF_CHECK(t, "model is missing tensor '", name, "'");
    used.insert(name);
    bool ok = true;
    for (size_t i = 0; i < 4; ++i) ok = ok && t->ne(i) == (i < shape.size() ? shape[i] : 1);
    if (!ok) {
      gguf::TensorInfo expect;
      expect.dims = shape;
      fail("tensor '", name, "' has shape ", t->shape_string(), ", expected ", expect.shape_string());
    }
    return *t;
  }

  Tensor host_view(const gguf::TensorInfo& t) const {
    return make_tensor(const_cast<uint8_t*>(f.tensor_data(t)), t.type, int64_t(t.ne(0)), int64_t(t.rows()));
  }

  void advance(uint64_t n) {
    done += n;
    if (progress) progress(done, total);
  }

  // A weight of `shape` (ne[0] first) as a matrix of its rows: a 3-D
  // tensor's matrices stacked along rows (each whole, as blocks run along
  // ne[0] in every format).
  Tensor weight(const std::string& name, std::vector<uint64_t> shape) {
    const gguf::TensorInfo& t = info(name, std::move(shape));
    Tensor out = backend.load_weight(host_view(t), name);
    advance(t.n_bytes);
    return out;
  }

  Tensor matrix(const std::string& name, int64_t cols, int64_t rows) {
    return weight(name, {uint64_t(cols), uint64_t(rows)});
  }

  // One layer's experts: ffn_{gate,up}_exps [n_embd, n_ff_expert, n_expert]
  // and ffn_down_exps [n_ff_expert, n_embd, n_expert].
  ExpertWeights experts(const std::string& prefix, const ModelConfig& c) {
    const auto n_embd = uint64_t(c.n_embd), n_ff = uint64_t(c.n_ff_expert), n = uint64_t(c.n_expert);
    ExpertWeights e;
    e.n_expert = c.n_expert;
    e.gate = weight(prefix + "ffn_gate_exps.weight", {n_embd, n_ff, n});
    e.up = weight(prefix + "ffn_up_exps.weight", {n_embd, n_ff, n});
    e.down = weight(prefix + "ffn_down_exps.weight", {n_ff, n_embd, n});
    return e;
  }

  // Norm weights and rope factors: always f32 on the backend.
  Tensor vector_f32(const std::string& name, int64_t n) {
    const gguf::TensorInfo& t = info(name, {uint64_t(n)});
    std::vector<float> v(static_cast<size_t>(n));
    dequantize_row(t.type, f.tensor_data(t), v.data(), size_t(n));
    advance(t.n_bytes);
    return backend.load_f32(v.data(), n, 1, name);
  }
};

// Elements [first, first + n) of an f32 vector, as a vector of their own.
Tensor f32_cols(const Tensor& v, int64_t first, int64_t n) {
  return make_tensor(static_cast<float*>(v.data) + first, DType::F32, n, 1, v.device);
}

}  // namespace

ModelWeights ModelWeights::load(const gguf::File& f, const ModelConfig& c, Backend& backend,
                                const std::function<void(uint64_t, uint64_t)>& progress) {
  Loader L{f, backend, 0, 0, progress, {}};
  for (const auto& t : f.tensors()) L.total += t.n_bytes;
  ModelWeights w;
  w.tok_embd = L.matrix("token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = L.vector_f32("output_norm.weight", c.n_embd);
  if (f.find_tensor("output.weight")) {
    w.output = L.matrix("output.weight", c.n_embd, c.n_vocab);
  } else {
    w.output = w.tok_embd;
    w.tied_output = true;
  }
  if (f.find_tensor("rope_freqs.weight")) w.rope_freqs = L.vector_f32("rope_freqs.weight", c.rope.n_rot / 2);
  for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight", "blk.0.rope_factors_long.weight"})
    RF_CHECK(!f.find_tensor(name), "model has '", name, "': LongRoPE scaling (", c.arch,
             " long-context variants) is not supported yet");
  w.layers.resize(size_t(c.n_layer));
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[size_t(i)];
    l.attn_norm = L.vector_f32(p + "attn_norm.weight", c.n_embd);
    if (f.find_tensor(p + "attn_qkv.weight")) {
      // One matrix of q, k and v rows, in that order.
      const Tensor qkv = L.matrix(p + "attn_qkv.weight", c.n_embd, c.q_dim() + 2 * c.kv_dim());
      l.wq = qkv.slice_rows(0, c.q_dim());
      l.wk = qkv.slice_rows(c.q_dim(), c.kv_dim());
      l.wv = qkv.slice_rows(c.q_dim() + c.kv_dim(), c.kv_dim());
      l.fused_qkv = true;
      if (c.qkv_bias == BiasUse::Required ||
          (c.qkv_bias == BiasUse::Optional && f.find_tensor(p + "attn_qkv.bias"))) {
        const Tensor b = L.vector_f32(p + "attn_qkv.bias", c.q_dim() + 2 * c.kv_dim());
        l.bq = f32_cols(b, 0, c.q_dim());
        l.bk = f32_cols(b, c.q_dim(), c.kv_dim());
        l.bv = f32_cols(b, c.q_dim() + c.kv_dim(), c.kv_dim());
      }
    } else {
      l.wq = L.matrix(p + "attn_q.weight", c.n_embd, c.q_dim());
      l.wk = L.matrix(p + "attn_k.weight", c.n_embd, c.kv_dim());
      l.wv = L.matrix(p + "attn_v.weight", c.n_embd, c.kv_dim());
    }
    const bool bias = !l.fused_qkv && (c.qkv_bias == BiasUse::Required ||
                                       (c.qkv_bias == BiasUse::Optional && f.find_tensor(p + "attn_q.bias")));
    if (bias) {
      l.bq = L.vector_f32(p + "attn_q.bias", c.q_dim());
      l.bk = L.vector_f32(p + "attn_k.bias", c.kv_dim());
      l.bv = L.vector_f32(p + "attn_v.bias", c.kv_dim());
    }
    if (c.qk_norm) {
      l.q_norm = L.vector_f32(p + "attn_q_norm.weight", c.head_dim);
      l.k_norm = L.vector_f32(p + "attn_k_norm.weight", c.head_dim);
    }
    l.wo = L.matrix(p + "attn_output.weight", c.q_dim(), c.n_embd);
    if (c.post_attn_norm) l.post_attn_norm = L.vector_f32(p + "post_attention_norm.weight", c.n_embd);
    l.ffn_norm = L.vector_f32(p + "ffn_norm.weight", c.n_embd);
    if (c.has_experts()) {
      l.router = L.matrix(p + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
      l.experts = L.experts(p, c);
    } else {
      if (c.fused_gate_up) {
        // ffn_up holds the gate rows, then the up rows.
        const Tensor gate_up = L.matrix(p + "ffn_up.weight", c.n_embd, 2 * int64_t(c.n_ff));
        l.w_gate = gate_up.slice_rows(0, c.n_ff);
        l.w_up = gate_up.slice_rows(c.n_ff, c.n_ff);
      } else {
        l.w_gate = L.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);
        l.w_up = L.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
      }
      l.w_down = L.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
    }
    if (c.post_ffn_norm) l.post_ffn_norm = L.vector_f32(p + "post_ffw_norm.weight", c.n_embd);
  }
  // As llama.cpp: a tensor the architecture does not use means the file is
  // not what its metadata says (computing without it would be wrong).
  for (const auto& t : f.tensors())
    RF_CHECK(L.used.count(t.name), "model has tensor '", t.name, "' that architecture '", c.arch,
             "' does not use");
  w.bytes = L.done;
  for (const LayerWeights& l : w.layers)
    if (l.experts.n_expert > 0) w.expert_bytes += l.experts.gate.bytes() + l.experts.up.bytes() + l.experts.down.bytes();
  return w;
}

double ModelWeights::bytes_read_per_step(int32_t seqs, int32_t n_used, int32_t n_expert) const {
  if (expert_bytes == 0 || n_expert <= 0) return double(bytes);
  const double chosen = 1.0 - std::pow(1.0 - double(n_used) / n_expert, std::max(seqs, 1));
  return double(bytes - expert_bytes) + chosen * double(expert_bytes);
}

}  // namespace rf
