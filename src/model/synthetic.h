// Synthetic Llama-family GGUF models: real models' shapes with random
// weights (never all zero, seeded, reproducible) and a valid SentencePiece-
// style vocabulary of the right size (special tokens, 256 byte tokens, then
// "▁t<i>" pieces), loadable by this engine and by llama.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/thread_pool.h"
#include "model/quant_plan.h"

namespace rf {

struct SyntheticPreset {
  std::string name;
  int32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
  float rope_base;
  bool tied_embeddings;
};

std::optional<SyntheticPreset> synthetic_preset(const std::string& name);
std::string synthetic_preset_names();

// Writes the model; progress(done_bytes, total_bytes) after each tensor.
void write_synthetic_model(const SyntheticPreset& p, const QuantPlan& plan, const std::string& path, uint64_t seed,
                           ThreadPool& pool, const std::function<void(uint64_t, uint64_t)>& progress);

// Fills `n` values in [-scale, scale] from (seed, first index): the same
// numbers however the work is split.
void synthetic_values(uint64_t seed, uint64_t first, float scale, float* out, size_t n);

}  // namespace rf
