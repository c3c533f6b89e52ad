// The Gemma 4 part of synthetic models (model/synthetic.h): the presets in
// their published shapes, the metadata keys llama.cpp's converter writes for
// them and their tensors (per-layer head sizes and KV heads, K as V on full
// layers, rope_freqs, shared-KV layers without k/v, per-layer embeddings,
// the experts beside the dense FFN). Used by model/synthetic.cpp through
// TensorSink (model/synthetic_hybrid.h).
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/writer.h"
#include "model/synthetic.h"
#include "model/synthetic_hybrid.h"

namespace rf {

// The presets (appended to the others).
void add_gemma4_presets(std::vector<SyntheticPreset>& v);
// The family's own metadata keys (after the common ones, which they may replace).
void describe_gemma4_metadata(gguf::Writer& w, const SyntheticPreset& p);
// The model-wide tensors beyond token_embd / output_norm / output, then every layer's.
void describe_gemma4_tensors(const TensorSink& t, const SyntheticPreset& p);
// Tensors describe_gemma4_tensors writes.
int32_t gemma4_tensors(const SyntheticPreset& p);

}  // namespace rf
