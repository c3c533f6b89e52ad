// The DeepSeek V2/V3 part of synthetic models (model/synthetic.h): the
// presets in their published shapes, the metadata keys llama.cpp's
// converter writes for them and their tensors (multi-head latent attention
// in the split attn_k_b / attn_v_b form, leading dense layers, experts with
// a shared expert). Used by model/synthetic.cpp through TensorSink
// (model/synthetic_hybrid.h).
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/writer.h"
#include "model/synthetic.h"
#include "model/synthetic_hybrid.h"

namespace rf {

// The presets (appended to the others).
void add_deepseek_presets(std::vector<SyntheticPreset>& v);
// The family's own metadata keys (after the common ones, which they may replace).
void describe_deepseek_metadata(gguf::Writer& w, const SyntheticPreset& p);
// Every layer's tensors.
void describe_deepseek_tensors(const TensorSink& t, const SyntheticPreset& p);
// Tensors describe_deepseek_tensors writes.
int32_t deepseek_tensors(const SyntheticPreset& p);

}  // namespace rf
