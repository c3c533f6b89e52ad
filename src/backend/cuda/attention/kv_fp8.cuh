// Reading the 8-bit (e4m3) KV cache in kernels: staged K/V elements as f16
// pairs or floats, and the element type a kernel is instantiated for (the
// conversion itself: e4m3.cuh). Encoding (the KV store) uses core/fp8.h,
// which the CPU shares. Kernels multiply by the row scale times
// kFp8HalfScale once, after the dot product or into the probability.
#pragma once

#include <cstdint>
#include <type_traits>

#include "backend/cuda/matmul/e4m3.cuh"
#include "core/fp8.h"

namespace rf::gpu {

// The KV cache's element types in kernels: __half, or Fp8 (e4m3 bytes).
struct Fp8 {
  uint8_t bits;
};
template <typename KV>
inline constexpr bool kIsFp8 = std::is_same_v<KV, Fp8>;

// Elements p[0], p[1] of a staged K/V row as f16x2 bits (Fp8: value /
// kFp8HalfScale).
template <typename KV>
__device__ __forceinline__ uint32_t kv_pair_bits(const KV* p) {
  if constexpr (kIsFp8<KV>)
    return e4m3x2_to_half2_bits(*reinterpret_cast<const uint16_t*>(p));
  else
    return *reinterpret_cast<const uint32_t*>(p);
}

// Elements p[0..8) as floats (Fp8: value / kFp8HalfScale); p 16-byte (__half) or
// 8-byte (Fp8) aligned.
template <typename KV>
__device__ __forceinline__ void kv_unpack8(const KV* p, float* f) {
  if constexpr (kIsFp8<KV>) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const uint32_t w[2] = {u.x, u.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float2 lo = half2_bits_to_float2(e4m3x2_to_half2_bits(w[i]));
      const float2 hi = half2_bits_to_float2(e4m3x2_to_half2_bits(w[i] >> 16));
      f[4 * i] = lo.x;
      f[4 * i + 1] = lo.y;
      f[4 * i + 2] = hi.x;
      f[4 * i + 3] = hi.y;
    }
  } else {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 x = half2_bits_to_float2(w[i]);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
}

// 8 e4m3 codes of one row (scale: the row's) to f16 at dst (16-byte aligned).
__device__ __forceinline__ void e4m3x8_to_half(const uint2& codes, float scale, void* dst) {
  const float mul = scale * kFp8HalfScale;
  const uint32_t w[2] = {codes.x, codes.y};
  uint32_t out[4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const float2 f = half2_bits_to_float2(e4m3x2_to_half2_bits(w[i] >> (16 * hi)));
      const __half2 h = __floats2half2_rn(f.x * mul, f.y * mul);
      memcpy(&out[2 * i + hi], &h, 4);
    }
  *reinterpret_cast<uint4*>(dst) = make_uint4(out[0], out[1], out[2], out[3]);
}

// 16 e4m3 codes of one row (scale: the row's) to f16 at dst (16-byte aligned).
__device__ __forceinline__ void e4m3x16_to_half(const uint4& codes, float scale, __half* dst) {
  e4m3x8_to_half(make_uint2(codes.x, codes.y), scale, dst);
  e4m3x8_to_half(make_uint2(codes.z, codes.w), scale, dst + 8);
}

}  // namespace rf::gpu
