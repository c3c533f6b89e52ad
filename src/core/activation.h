// Activation: the gated FFN's activation, act(gate) * up — a data type shared
// by the model's configuration (which family uses which) and the backends'
// fused gate*up op — and the clamped SwiGLU's formula, shared by host and
// device code.
#pragma once

#include <cmath>

#include "core/host_device.h"

namespace rf {

enum class Activation {
  SiLU,      // SwiGLU: silu(gate) * up
  GeluTanh,  // GeGLU with the tanh approximation of GELU
  // gpt-oss's clamped SwiGLU: g = min(gate, 7), u = clamp(up, -7, 7),
  // out = g * sigmoid(1.702 g) * (u + 1).
  SiLUClampedOai,
};

constexpr float kOaiGluAlpha = 1.702f;
constexpr float kOaiGluLimit = 7.0f;

RF_HOST_DEVICE inline float glu_oai(float gate, float up) {
  const float g = fminf(gate, kOaiGluLimit);
  const float u = fminf(fmaxf(up, -kOaiGluLimit), kOaiGluLimit);
  return g / (1.0f + expf(-kOaiGluAlpha * g)) * (u + 1.0f);
}

}  // namespace rf
