// The supported architectures, each a combination of ModelConfig's building
// blocks plus the metadata keys it reads (llama.cpp's names and defaults).
#pragma once

#include <string>

#include "gguf/reader.h"
#include "model/config.h"

namespace rf {

// True when `arch` (general.architecture) is one this engine runs.
bool architecture_supported(const std::string& arch);
// "llama, mistral, qwen2, ..." for messages.
std::string supported_architectures();

// True when `arch`'s feed_forward_length key may be absent (every FFN is
// experts with their own width key).
bool family_ffn_optional(const std::string& arch);

// Sets c's building blocks for c.arch and reads the family's own keys; the
// common hyper-parameters (sizes, heads, RoPE base and scaling) are already
// in c. Throws rf::Error naming a missing or bad key.
void configure_family(const gguf::File& f, ModelConfig& c);

// The families' shared key readers and the families configured in their own
// files (arch_deepseek.cpp), for the family table in arch.cpp.
namespace arch_detail {
// A float key that must be finite (fallback where absent).
float optional_float(const gguf::File& f, const std::string& key, double fallback);
// nextn_predict_layers: n_layer becomes the main layers' count.
void read_nextn(const gguf::File& f, ModelConfig& c);
// GLM-4.5's and DeepSeek's MoE keys (leading dense layers, shared experts,
// gating, weight norm and scale).
void read_lead_shared_moe(const gguf::File& f, ModelConfig& c, int64_t gating_default);
void configure_deepseek2(const gguf::File& f, ModelConfig& c);
}  // namespace arch_detail

}  // namespace rf
