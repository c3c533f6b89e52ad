// The hybrid Qwen3.5 / Qwen3.6 part of synthetic models (model/synthetic.h):
// the presets in their published shapes, the metadata keys llama.cpp's
// converter writes for them and each block's tensors (Gated DeltaNet
// layers, gated full attention, the shared expert, MTP blocks). Used by
// model/synthetic.cpp through TensorSink, which adds one tensor to the file
// being described.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "model/synthetic.h"

namespace rf {

struct TensorSink {
  // A weight matrix [cols, rows] (or `stack` of them, 3-D) of the plan's type.
  std::function<void(const std::string& name, int64_t cols, int64_t rows, int64_t stack)> matrix;
  // An f32 vector near `offset` (norms near 1, biases near 0).
  std::function<void(const std::string& name, int64_t n, float offset)> vec;
  // A small f32 matrix [cols, rows] (conv kernels), unit-scale outputs.
  std::function<void(const std::string& name, int64_t cols, int64_t rows)> f32_matrix;
  // An f32 vector of exactly these values (rope_freqs).
  std::function<void(const std::string& name, std::vector<float> values)> f32_values;
};

// The presets (appended to the others).
void add_hybrid_presets(std::vector<SyntheticPreset>& v);
// The family's own metadata keys.
void describe_hybrid_metadata(gguf::Writer& w, const SyntheticPreset& p);
// Block `il` (a main layer, or an MTP block at il >= n_layer).
void describe_hybrid_block(const TensorSink& t, const SyntheticPreset& p, int32_t il);
// Tensors per block, as describe_hybrid_block writes them.
int32_t hybrid_block_tensors(const SyntheticPreset& p, int32_t il);

}  // namespace rf
