// Device-side decoding of the i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS) and MXFP4, 32 elements at a time
// (WeightFormat<T>::load32, the interface of dequant.cuh, which includes
// this file). The values are those of core/quant_iquants.cpp: grid levels
// from core/iq_grids.h (device copies in a CUDA/HIP translation unit) times
// the group's scale, computed with the same float operations. Blocks are
// read bytewise or in 16-bit words: these formats' blocks are only 2-byte
// (IQ1_M, MXFP4: 1-byte) aligned within a row.
#pragma once

#include "core/iq_grids.h"
#include "core/quant_blocks.h"

namespace rf::gpu {

__device__ __forceinline__ uint32_t ld32_2(const uint8_t* p) {  // 2-byte aligned
  return uint32_t(ld16(p)) | (uint32_t(ld16(p + 2)) << 16);
}
// v[j] = scale * (sign bit j ? -m_j : m_j) for the 8 (or 4) magnitudes of a grid entry.
__device__ __forceinline__ void grid8(uint64_t g, uint32_t signs, float scale, float* v) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float m = float(uint32_t(g >> (8 * j)) & 0xFFu);
    v[j] = scale * ((signs >> j) & 1u ? -m : m);
  }
}
__device__ __forceinline__ void grid4(uint32_t g, uint32_t signs, float scale, float* v) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float m = float((g >> (8 * j)) & 0xFFu);
    v[j] = scale * ((signs >> j) & 1u ? -m : m);
  }
}
__device__ __forceinline__ float half_step_scale_dev(float d, uint32_t s, float f) { return d * (0.5f + float(s)) * f; }

template <> struct WeightFormat<DType::IQ2_XXS> {
  static constexpr int kBlockElems = 256, kBlockBytes = 66;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub / 8) * kBlockBytes;
    const uint8_t* q = b + 2 + 8 * (sub % 8);
    const uint32_t aux = ld32_2(q + 4);
    const float db = half_step_scale_dev(h2f(ld16(b)), aux >> 28, 0.25f);
#pragma unroll
    for (int l = 0; l < 4; ++l) grid8(iq::kIq2xxsGrid[q[l]], iq::kSigns7[(aux >> (7 * l)) & 127], db, v + 8 * l);
  }
};

template <> struct WeightFormat<DType::IQ2_XS> {
  static constexpr int kBlockElems = 256, kBlockBytes = 74;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub / 8) * kBlockBytes;
    const int ib = sub % 8;
    const float d = h2f(ld16(b));
    const uint8_t sc = b[66 + ib];
    const float db[2] = {half_step_scale_dev(d, sc & 0xF, 0.25f), half_step_scale_dev(d, sc >> 4, 0.25f)};
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t w = ld16(b + 2 + 2 * (4 * ib + l));
      grid8(iq::kIq2xsGrid[w & 511], iq::kSigns7[w >> 9], db[l / 2], v + 8 * l);
    }
  }
};

template <> struct WeightFormat<DType::IQ2_S> {
  static constexpr int kBlockElems = 256, kBlockBytes = 82;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub / 8) * kBlockBytes;
    const int ib = sub % 8;
    const float d = h2f(ld16(b));
    const uint8_t* qs = b + 2;
    const uint32_t qh = b[66 + ib];
    const uint8_t sc = b[74 + ib];
    const float db[2] = {half_step_scale_dev(d, sc & 0xF, 0.25f), half_step_scale_dev(d, sc >> 4, 0.25f)};
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t index = qs[4 * ib + l] | ((qh << (8 - 2 * l)) & 0x300u);
      grid8(iq::kIq2sGrid[index], qs[32 + 4 * ib + l], db[l / 2], v + 8 * l);
    }
  }
};

template <> struct WeightFormat<DType::IQ3_XXS> {
  static constexpr int kBlockElems = 256, kBlockBytes = 98;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub / 8) * kBlockBytes;
    const int ib = sub % 8;
    const uint8_t* qs = b + 2 + 8 * ib;
    const uint32_t aux = ld32_2(b + 66 + 4 * ib);
    const float db = half_step_scale_dev(h2f(ld16(b)), aux >> 28, 0.5f);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t signs = iq::kSigns7[(aux >> (7 * l)) & 127];
      grid4(iq::kIq3xxsGrid[qs[2 * l]], signs, db, v + 8 * l);
      grid4(iq::kIq3xxsGrid[qs[2 * l + 1]], signs >> 4, db, v + 8 * l + 4);
    }
  }
};

template <> struct WeightFormat<DType::IQ3_S> {
  static constexpr int kBlockElems = 256, kBlockBytes = 110;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub / 8) * kBlockBytes;
    const int ib = sub % 8;
    const uint8_t* qs = b + 2 + 8 * ib;
    const uint32_t qh = b[66 + ib];
    const uint8_t* signs = b + 74 + 4 * ib;
    const uint32_t s = (b[106 + ib / 2] >> (4 * (ib % 2))) & 0xFu;
    const float db = h2f(ld16(b)) * float(1 + 2 * int(s));
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t i1 = qs[2 * l] | ((qh << (8 - 2 * l)) & 256u);
      const uint32_t i2 = qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256u);
      grid4(iq::kIq3sGrid[i1], signs[l], db, v + 8 * l);
      grid4(iq::kIq3sGrid[i2], uint32_t(signs[l]) >> 4, db, v + 8 * l + 4);
    }
  }
};

// IQ1: v = dl * (grid byte + delta), grid bytes in {-1, 0, 1}.
__device__ __forceinline__ void iq1_grid8(uint64_t g, float dl, float delta, float* v) {
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = dl * (float(int8_t(uint32_t(g >> (8 * j)) & 0xFFu)) + delta);
}

template <> struct WeightFormat<DType::IQ1_S> {
  static constexpr int kBlockElems = 256, kBlockBytes = 50;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub / 8) * kBlockBytes;
    const int ib = sub % 8;
    const uint32_t h = ld16(b + 34 + 2 * ib);
    const float dl = h2f(ld16(b)) * float(2 * int((h >> 12) & 7) + 1);
    const float delta = h & 0x8000u ? -0.125f : 0.125f;
    const uint8_t* qs = b + 2 + 4 * ib;
#pragma unroll
    for (int l = 0; l < 4; ++l) iq1_grid8(iq::kIq1sGrid[qs[l] | (((h >> (3 * l)) & 7u) << 8)], dl, delta, v + 8 * l);
  }
};

template <> struct WeightFormat<DType::IQ1_M> {
  static constexpr int kBlockElems = 256, kBlockBytes = 56;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub / 8) * kBlockBytes;
    const int ib = sub % 8;
    const uint8_t* s8 = b + 48;
    const uint32_t sc0 = uint32_t(s8[0] | (s8[1] << 8)), sc1 = uint32_t(s8[2] | (s8[3] << 8));
    const uint32_t sc2 = uint32_t(s8[4] | (s8[5] << 8)), sc3 = uint32_t(s8[6] | (s8[7] << 8));
    const float d = h2f(uint16_t((sc0 >> 12) | ((sc1 >> 8) & 0x00F0u) | ((sc2 >> 4) & 0x0F00u) | (sc3 & 0xF000u)));
    const uint32_t sc = ib / 2 == 0 ? sc0 : ib / 2 == 1 ? sc1 : ib / 2 == 2 ? sc2 : sc3;
    const int shift = 6 * (ib % 2);
    const float dl1 = d * float(2 * int((sc >> shift) & 7) + 1);
    const float dl2 = d * float(2 * int((sc >> (shift + 3)) & 7) + 1);
    const uint8_t* qs = b + 4 * ib;
    const uint32_t h0 = b[32 + 2 * ib], h1 = b[32 + 2 * ib + 1];
    const uint32_t idx[4] = {qs[0] | ((h0 << 8) & 0x700u), qs[1] | ((h0 << 4) & 0x700u), qs[2] | ((h1 << 8) & 0x700u),
                             qs[3] | ((h1 << 4) & 0x700u)};
    const float delta[4] = {h0 & 0x08u ? -0.125f : 0.125f, h0 & 0x80u ? -0.125f : 0.125f,
                            h1 & 0x08u ? -0.125f : 0.125f, h1 & 0x80u ? -0.125f : 0.125f};
#pragma unroll
    for (int l = 0; l < 4; ++l) iq1_grid8(iq::kIq1sGrid[idx[l]], l < 2 ? dl1 : dl2, delta[l], v + 8 * l);
  }
};

// 16 bytes of nibbles through a 16-level table: low nibbles are elements
// 0..15, high nibbles 16..31.
__device__ __forceinline__ void nibble_levels16(const uint8_t* qs, const int8_t* levels, float scale, float* v) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const uint32_t q = qs[j];
    v[j] = scale * float(levels[q & 0xFu]);
    v[j + 16] = scale * float(levels[q >> 4]);
  }
}

template <> struct WeightFormat<DType::IQ4_NL> {
  static constexpr int kBlockElems = 32, kBlockBytes = 18;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub) * kBlockBytes;
    nibble_levels16(b + 2, iq::kIq4nlLevels, h2f(ld16(b)), v);
  }
};

template <> struct WeightFormat<DType::IQ4_XS> {
  static constexpr int kBlockElems = 256, kBlockBytes = 136;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub / 8) * kBlockBytes;
    const int ib = sub % 8;
    const uint32_t scales_h = ld16(b + 2);
    const int ls = int((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xFu) | int(((scales_h >> (2 * ib)) & 3u) << 4);
    nibble_levels16(b + 8 + 16 * ib, iq::kIq4nlLevels, h2f(ld16(b)) * float(ls - 32), v);
  }
};

template <> struct WeightFormat<DType::MXFP4> {
  static constexpr int kBlockElems = 32, kBlockBytes = 17;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub) * kBlockBytes;
    nibble_levels16(b + 1, iq::kMxfp4Levels, __uint_as_float(e8m0_half_bits(b[0])), v);
  }
};

}  // namespace rf::gpu
