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

}  // namespace rf
