// Looking up, validating and loading model tensors.
#include "model/weights.h"

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

  const gguf::TensorInfo& info(const std::string& name, std::vector<uint64_t> shape) const {
    const gguf::TensorInfo* t = f.find_tensor(name);
    RF_CHECK(t, "model is missing tensor '", name, "'");
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

  Tensor matrix(const std::string& name, int64_t cols, int64_t rows) {
    const gguf::TensorInfo& t = info(name, {uint64_t(cols), uint64_t(rows)});
    Tensor out = backend.load_weight(host_view(t), name);
    advance(t.n_bytes);
    return out;
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

}  // namespace

ModelWeights ModelWeights::load(const gguf::File& f, const ModelConfig& c, Backend& backend,
                                const std::function<void(uint64_t, uint64_t)>& progress) {
  Loader L{f, backend, 0, 0, progress};
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
  w.layers.resize(size_t(c.n_layer));
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[size_t(i)];
    l.attn_norm = L.vector_f32(p + "attn_norm.weight", c.n_embd);
    l.wq = L.matrix(p + "attn_q.weight", c.n_embd, c.q_dim());
    l.wk = L.matrix(p + "attn_k.weight", c.n_embd, c.kv_dim());
    l.wv = L.matrix(p + "attn_v.weight", c.n_embd, c.kv_dim());
    l.wo = L.matrix(p + "attn_output.weight", c.q_dim(), c.n_embd);
    l.ffn_norm = L.vector_f32(p + "ffn_norm.weight", c.n_embd);
    l.w_gate = L.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.w_up = L.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
    l.w_down = L.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
  }
  w.bytes = L.done;
  return w;
}

}  // namespace rf
