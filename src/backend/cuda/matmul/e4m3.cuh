// e4m3 codes (core/fp8.h) to f16 pairs on the device, for the FP8 KV cache
// (kv_fp8.cuh) and FP8 weights (dequant.cuh).
//
// NVIDIA (sm_89+): CUDA's conversion (one cvt.rn.f16x2.e4m3x2 per pair),
// exact. Portable builds (HIP): the e4m3 byte s.eeee.mmm shifted into an
// f16's sign, exponent and top mantissa bits (s.0eeee.mmm0000000) is the
// same value times 2^-8 for every finite code, subnormals included (f16's
// exponent bias is 8 more than e4m3's and its subnormals reach 2^-24).
// Either way a value is the f16 times kFp8HalfScale.
#pragma once

#include <cstdint>

#include "backend/cuda/gpu.h"
#if !defined(RF_PORTABLE)
#include <cuda_fp8.h>
#endif

namespace rf::gpu {

#if !defined(RF_PORTABLE)
inline constexpr float kFp8HalfScale = 1.0f;  // the f16 pair holds the values

// Two e4m3 codes (low byte first) as f16x2 bits.
__device__ __forceinline__ uint32_t e4m3x2_to_half2_bits(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two & 0xffffu), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}
#else
inline constexpr float kFp8HalfScale = 256.0f;  // f16 of a shifted e4m3 code = value / 256

// Two e4m3 codes (low byte first) as f16x2 bits of value / 256.
__device__ __forceinline__ uint32_t e4m3x2_to_half2_bits(uint32_t two) {
  const uint32_t x = __byte_perm(two, 0u, 0x1404u);  // bytes [0, c0, 0, c1]: each code in a half's high byte
  return (x & 0x80008000u) | ((x & 0x7f007f00u) >> 1);
}
#endif

__device__ __forceinline__ float2 half2_bits_to_float2(uint32_t h) {
  __half2 v;
  static_assert(sizeof(v) == 4, "half2");
  memcpy(&v, &h, 4);
  return __half22float2(v);
}

}  // namespace rf::gpu
