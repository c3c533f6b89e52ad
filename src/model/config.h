// ModelConfig: hyper-parameters of a Llama-family model read from GGUF
// metadata ({arch}.embedding_length, ...), validated for consistency.
#pragma once

#include <cstdint>
#include <string>

#include "core/rope_params.h"
#include "gguf/reader.h"

namespace rf {

struct ModelConfig {
  std::string arch;        // "llama"
  std::string name;        // general.name
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t n_ff = 0;
  int32_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  RopeParams rope;         // freq_factors stays null here; the model sets it
  std::string rope_scaling = "none";  // none | linear | yarn

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }

  // Reads and validates; throws rf::Error naming the key on bad metadata.
  static ModelConfig from_gguf(const gguf::File& f);
  std::string summary() const;
};

}  // namespace rf
