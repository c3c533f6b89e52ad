// Half-precision conversions (IEEE f16 and bfloat16), bit-exact with ggml:
// f16 rounds to nearest-even with subnormals; bf16 rounds to nearest-even and
// keeps NaNs quiet.
#pragma once

#include <cstdint>
#include <cstring>

namespace rf {

inline float bits_to_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t f32_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    if (mant == 0) return bits_to_f32(sign);
    // subnormal: value = mant * 2^-24
    float f = float(mant) * (1.0f / 16777216.0f);
    return sign ? -f : f;
  }
  if (exp == 31) return bits_to_f32(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));  // NaNs come out quiet, as ggml (F16C) gives them
  return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00);  // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00); // overflow -> inf
  if (abs < 0x38800000u) {                                 // subnormal or zero
    // value in units of 2^-24, rounded to nearest even
    const float a = bits_to_f32(abs);
    const float scaled = a * 16777216.0f;
    uint32_t m = uint32_t(scaled);
    const float rem = scaled - float(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
    return uint16_t(sign | m);
  }
  uint32_t mant = abs & 0x7fffff;
  uint32_t exp = (abs >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

inline float bf16_to_f32(uint16_t h) { return bits_to_f32(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 64);  // quiet NaN
  return uint16_t((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

}  // namespace rf
