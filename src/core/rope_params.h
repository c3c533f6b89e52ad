// RopeParams: how rotary position embeddings are applied (llama.cpp
// semantics, YaRN included). Plain data read from model metadata by model/
// and handed to the backends' RoPE kernels.
#pragma once

#include <cstdint>

namespace rf {

struct RopeParams {
  int32_t n_rot = 0;          // rotated dims per head (<= head_dim)
  bool neox = false;          // NeoX layout: pairs (i, i + n_rot/2); else (2i, 2i+1)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;    // 1 / linear scaling factor
  float ext_factor = 0.0f;    // YaRN extrapolation mix (0: off)
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int32_t n_ctx_orig = 0;
  const float* freq_factors = nullptr;  // [n_rot / 2] on the backend's device, or null
};

}  // namespace rf
