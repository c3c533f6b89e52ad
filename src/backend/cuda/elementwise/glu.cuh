// The gated activations of the FFN as device functions, one home for the
// elementwise kernels (swiglu, geglu, swiglu_oai, the experts' bias + GLU)
// and the fused gate*up GEMV epilogue: act(gate) * up on f16-rounded
// inputs, as the unfused path stores them. gpt-oss's clamped SwiGLU is
// core/activation.h's glu_oai (the CPU's formula).
#pragma once

#include "backend/cuda/gpu.h"
#include "core/activation.h"

namespace rf::gpu {

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

// GELU (tanh approximation) as ggml evaluates it: on an f16 input, the
// result rounded to f16; saturated beyond +-10.
__device__ __forceinline__ float gelu_tanh_f16(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  const float kSqrt2OverPi = 0.79788456080286535588f;
  const float g = 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
  return __half2float(__float2half_rn(g));
}

// act(gate) * up with gate and up rounded to f16 first; gelu selects GeGLU
// over SwiGLU.
__device__ __forceinline__ float glu_f16_rounded(float gate, float up, bool gelu) {
  const float g = __half2float(__float2half_rn(gate)), u = __half2float(__float2half_rn(up));
  return (gelu ? gelu_tanh_f16(g) : silu(g)) * u;
}

// The gated activation act(gate, up) of any Activation on the values as
// they are (f16 inputs, or f32 sums of f16 products and biases).
__device__ __forceinline__ float glu_act(float gate, float up, Activation act) {
  switch (act) {
    case Activation::GeluTanh: return gelu_tanh_f16(gate) * up;
    case Activation::SiLUClampedOai: return glu_oai(gate, up);
    default: return silu(gate) * up;
  }
}

}  // namespace rf::gpu
