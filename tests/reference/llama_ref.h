// A naive float64 Llama forward pass over dequantized weights: one sequence,
// a dense (unpaged) KV history, every op written out directly. It shares no
// code with the engine's model or backends (only the GGUF reader and the
// ggml-verified dequantizers), so it is an independent reference.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/reader.h"

namespace rf::ref {

class LlamaRef {
 public:
  explicit LlamaRef(const gguf::File& f);
  // Feeds tokens at the next positions; returns the logits after the last.
  std::vector<double> feed(const std::vector<int32_t>& tokens);
  int n_vocab() const { return n_vocab_; }

 private:
  using Mat = std::vector<double>;  // row-major [rows, cols]
  Mat load(const gguf::File& f, const std::string& name, int64_t* rows = nullptr);
  std::vector<double> step(int32_t token, int pos);

  int n_embd_, n_layer_, n_head_, n_kv_, hd_, n_ff_, n_vocab_, n_rot_;
  double eps_, base_, freq_scale_ = 1.0;
  Mat tok_, out_norm_, out_, rope_freqs_;
  struct Layer { Mat attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down; };
  std::vector<Layer> layers_;
  std::vector<std::vector<std::vector<double>>> kcache_, vcache_;  // [layer][pos][kv_dim]
  int pos_ = 0;
};

}  // namespace rf::ref
