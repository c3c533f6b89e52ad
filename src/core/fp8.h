// FP8 E4M3 (the OCP "e4m3fn" format: sign, 4 exponent bits with bias 7, 3
// mantissa bits, subnormals, no infinities, largest finite 448, 0x7f / 0xff
// NaN) and the scaled rows the 8-bit KV cache stores: a row of values x
// (one token's K or V of one KV head) becomes e4m3(x / s) with one f32
// scale s = max|x| / 448, so every row uses the whole range. Host and
// device code share these definitions (RF_HOST_DEVICE), so the CPU and the
// GPUs encode a value to the same byte.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace rf {

inline constexpr float kE4M3Max = 448.0f;

RF_HOST_DEVICE inline uint32_t fp8_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

RF_HOST_DEVICE inline float fp8_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// Rounds to nearest, ties to even; magnitudes beyond 448 saturate to 448,
// NaN becomes 0x7f.
RF_HOST_DEVICE inline uint8_t e4m3_from_float(float x) {
  const uint32_t u = fp8_f32_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t abs_bits = u & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return uint8_t(sign | 0x7fu);
  const float a = fp8_bits_f32(abs_bits);
  if (a >= kE4M3Max) return uint8_t(sign | 0x7eu);
  if (a < 0.015625f) {  // below 2^-6: subnormal, in units of 2^-9 (8 rounds up to the first normal, 0x08)
    return uint8_t(sign | uint32_t(rintf(a * 512.0f)));
  }
  // Normal: keep 3 of f32's 23 mantissa bits, rounding the 20 dropped ones
  // to nearest even (a carry moves into the exponent, as it should).
  const uint32_t r = (abs_bits + 0x7ffffu + ((abs_bits >> 20) & 1u)) >> 20;
  return uint8_t(sign | (r - (120u << 3)));  // exponent bias 127 -> 7
}

RF_HOST_DEVICE inline float e4m3_to_float(uint8_t b) {
  if ((b & 0x7fu) == 0x7fu) return fp8_bits_f32(0x7fc00000u);  // NaN
  const uint32_t e = (b >> 3) & 0xfu, m = b & 7u;
  const float mag = e == 0 ? float(m) * (1.0f / 512.0f) : fp8_bits_f32(((e + 120u) << 23) | (m << 20));
  return (b & 0x80u) ? -mag : mag;
}

// The scale of a row whose largest magnitude is amax (1 for an all-zero
// row); NaN for a row holding a NaN (amax NaN), so that every element of it
// reads back as NaN (kernels decode e4m3 without looking for NaN codes).
RF_HOST_DEVICE inline float e4m3_row_scale(float amax) {
  return amax > 0.0f ? amax / kE4M3Max : amax == 0.0f ? 1.0f : amax;
}

}  // namespace rf
