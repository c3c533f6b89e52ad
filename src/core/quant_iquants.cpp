// Decoding of the i-quant formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS) and MXFP4 into the shared unpacked form
// (int8 quants + per-group f32 scale, no bias; qimpl::Layout).
//
// Every value these formats store is scale * level, where level is a small
// signed integer from a lookup grid (core/iq_grids.h) and scale is computed
// by exactly the float operations of ggml's dequantizers, so scale * q
// reproduces ggml's values bit for bit. IQ1's values are scale * (v +- 1/8):
// they are unpacked as q = 8 v +- 1 with scale / 8 (a power-of-two step,
// exact), which gives the same products. Fields are read bytewise: rows need
// no alignment.
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "core/iq_grids.h"
#include "core/quant_blocks.h"

namespace rf::qimpl {
namespace {

inline uint16_t rd16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline uint32_t rd32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }

// The 8 magnitudes of a packed grid entry, each with the sign bit j of `signs`.
inline void signed_bytes8(uint64_t grid, uint8_t signs, int8_t* q) {
  for (int j = 0; j < 8; ++j) {
    const int m = int((grid >> (8 * j)) & 0xFF);
    q[j] = int8_t((signs >> j) & 1 ? -m : m);
  }
}
inline void signed_bytes4(uint32_t grid, uint8_t signs, int8_t* q) {
  for (int j = 0; j < 4; ++j) {
    const int m = int((grid >> (8 * j)) & 0xFF);
    q[j] = int8_t((signs >> j) & 1 ? -m : m);
  }
}

// scale d * (0.5 + s) * f, evaluated left to right as ggml does.
inline float half_step_scale(float d, uint32_t s, float f) { return d * (0.5f + float(s)) * f; }

void unpack_iq2_xxs(const uint8_t* src, size_t nb, int8_t* q, float* scale) {
  for (size_t i = 0; i < nb; ++i, src += sizeof(BlockIQ2_XXS)) {
    const float d = f16_to_f32(rd16(src));
    const uint8_t* qs = src + 2;
    for (int ib = 0; ib < 8; ++ib, q += 32) {
      const uint8_t* idx = qs + 8 * ib;
      const uint32_t aux = rd32(idx + 4);
      *scale++ = half_step_scale(d, aux >> 28, 0.25f);
      for (int l = 0; l < 4; ++l)
        signed_bytes8(iq::kIq2xxsGrid[idx[l]], iq::kSigns7[(aux >> (7 * l)) & 127], q + 8 * l);
    }
  }
}

void unpack_iq2_xs(const uint8_t* src, size_t nb, int8_t* q, float* scale) {
  for (size_t i = 0; i < nb; ++i, src += sizeof(BlockIQ2_XS)) {
    const float d = f16_to_f32(rd16(src));
    const uint8_t* qs = src + 2;
    const uint8_t* scales = src + 2 + 64;
    for (int ib = 0; ib < 8; ++ib) {
      *scale++ = half_step_scale(d, scales[ib] & 0xF, 0.25f);
      *scale++ = half_step_scale(d, scales[ib] >> 4, 0.25f);
      for (int l = 0; l < 4; ++l, q += 8) {
        const uint16_t v = rd16(qs + 2 * (4 * ib + l));
        signed_bytes8(iq::kIq2xsGrid[v & 511], iq::kSigns7[v >> 9], q);
      }
    }
  }
}

void unpack_iq2_s(const uint8_t* src, size_t nb, int8_t* q, float* scale) {
  for (size_t i = 0; i < nb; ++i, src += sizeof(BlockIQ2_S)) {
    const float d = f16_to_f32(rd16(src));
    const uint8_t* qs = src + 2;
    const uint8_t* signs = qs + 32;
    const uint8_t* qh = src + 2 + 64;
    const uint8_t* scales = qh + 8;
    for (int ib = 0; ib < 8; ++ib) {
      *scale++ = half_step_scale(d, scales[ib] & 0xF, 0.25f);
      *scale++ = half_step_scale(d, scales[ib] >> 4, 0.25f);
      for (int l = 0; l < 4; ++l, q += 8) {
        const int index = qs[4 * ib + l] | ((qh[ib] << (8 - 2 * l)) & 0x300);
        signed_bytes8(iq::kIq2sGrid[index], signs[4 * ib + l], q);
      }
    }
  }
}

void unpack_iq3_xxs(const uint8_t* src, size_t nb, int8_t* q, float* scale) {
  for (size_t i = 0; i < nb; ++i, src += sizeof(BlockIQ3_XXS)) {
    const float d = f16_to_f32(rd16(src));
    const uint8_t* qs = src + 2;
    const uint8_t* scales_and_signs = qs + 64;
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t aux = rd32(scales_and_signs + 4 * ib);
      *scale++ = half_step_scale(d, aux >> 28, 0.5f);
      for (int l = 0; l < 4; ++l, q += 8) {
        const uint8_t signs = iq::kSigns7[(aux >> (7 * l)) & 127];
        signed_bytes4(iq::kIq3xxsGrid[qs[8 * ib + 2 * l]], signs, q);
        signed_bytes4(iq::kIq3xxsGrid[qs[8 * ib + 2 * l + 1]], uint8_t(signs >> 4), q + 4);
      }
    }
  }
}

void unpack_iq3_s(const uint8_t* src, size_t nb, int8_t* q, float* scale) {
  for (size_t i = 0; i < nb; ++i, src += sizeof(BlockIQ3_S)) {
    const float d = f16_to_f32(rd16(src));
    const uint8_t* qs = src + 2;
    const uint8_t* qh = qs + 64;
    const uint8_t* signs = qh + 8;
    const uint8_t* scales = signs + 32;
    for (int ib = 0; ib < 8; ++ib) {
      const int s = (scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
      *scale++ = d * float(1 + 2 * s);
      const uint8_t* iq = qs + 8 * ib;
      for (int l = 0; l < 4; ++l, q += 8) {
        const int i1 = iq[2 * l] | ((qh[ib] << (8 - 2 * l)) & 256);
        const int i2 = iq[2 * l + 1] | ((qh[ib] << (7 - 2 * l)) & 256);
        const uint8_t sg = signs[4 * ib + l];
        signed_bytes4(iq::kIq3sGrid[i1], sg, q);
        signed_bytes4(iq::kIq3sGrid[i2], uint8_t(sg >> 4), q + 4);
      }
    }
  }
}

// IQ1 grid entry as q = 8 v + (negative delta ? -1 : 1).
inline void iq1_bytes8(uint64_t grid, bool negative_delta, int8_t* q) {
  const int delta = negative_delta ? -1 : 1;
  for (int j = 0; j < 8; ++j) q[j] = int8_t(8 * int(int8_t((grid >> (8 * j)) & 0xFF)) + delta);
}

void unpack_iq1_s(const uint8_t* src, size_t nb, int8_t* q, float* scale) {
  for (size_t i = 0; i < nb; ++i, src += sizeof(BlockIQ1_S)) {
    const float d = f16_to_f32(rd16(src));
    const uint8_t* qs = src + 2;
    const uint8_t* qh = qs + 32;
    for (int ib = 0; ib < 8; ++ib) {
      const uint16_t h = rd16(qh + 2 * ib);
      const float dl = d * float(2 * ((h >> 12) & 7) + 1);
      *scale++ = dl * 0.125f;
      for (int l = 0; l < 4; ++l, q += 8)
        iq1_bytes8(iq::kIq1sGrid[qs[4 * ib + l] | (((h >> (3 * l)) & 7) << 8)], (h & 0x8000) != 0, q);
    }
  }
}

void unpack_iq1_m(const uint8_t* src, size_t nb, int8_t* q, float* scale) {
  for (size_t i = 0; i < nb; ++i, src += sizeof(BlockIQ1_M)) {
    const uint8_t* qs = src;
    const uint8_t* qh = src + 32;
    const uint8_t* sc8 = src + 48;
    const uint16_t sc[4] = {rd16(sc8), rd16(sc8 + 2), rd16(sc8 + 4), rd16(sc8 + 6)};
    const uint16_t dbits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                                    (sc[3] & 0xF000));
    const float d = f16_to_f32(dbits);
    for (int ib = 0; ib < 8; ++ib) {
      const int shift = 6 * (ib % 2);
      const float dl1 = d * float(2 * ((sc[ib / 2] >> shift) & 7) + 1);
      const float dl2 = d * float(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1);
      *scale++ = dl1 * 0.125f;
      *scale++ = dl2 * 0.125f;
      const uint8_t* b = qs + 4 * ib;
      const uint8_t h0 = qh[2 * ib], h1 = qh[2 * ib + 1];
      const int idx[4] = {b[0] | ((h0 << 8) & 0x700), b[1] | ((h0 << 4) & 0x700), b[2] | ((h1 << 8) & 0x700),
                          b[3] | ((h1 << 4) & 0x700)};
      const bool neg[4] = {(h0 & 0x08) != 0, (h0 & 0x80) != 0, (h1 & 0x08) != 0, (h1 & 0x80) != 0};
      for (int l = 0; l < 4; ++l, q += 8) iq1_bytes8(iq::kIq1sGrid[idx[l]], neg[l], q);
    }
  }
}

// 16 bytes of nibbles through a 16-level table: low nibbles first, then high.
inline void nibble_levels(const uint8_t* qs, const int8_t* levels, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = levels[qs[j] & 0xF];
    q[j + 16] = levels[qs[j] >> 4];
  }
}

void unpack_iq4_nl(const uint8_t* src, size_t nb, int8_t* q, float* scale) {
  for (size_t i = 0; i < nb; ++i, src += sizeof(BlockIQ4_NL), q += 32) {
    *scale++ = f16_to_f32(rd16(src));
    nibble_levels(src + 2, iq::kIq4nlLevels, q);
  }
}

void unpack_iq4_xs(const uint8_t* src, size_t nb, int8_t* q, float* scale) {
  for (size_t i = 0; i < nb; ++i, src += sizeof(BlockIQ4_XS)) {
    const float d = f16_to_f32(rd16(src));
    const uint16_t scales_h = rd16(src + 2);
    const uint8_t* scales_l = src + 4;
    const uint8_t* qs = src + 8;
    for (int ib = 0; ib < 8; ++ib, q += 32) {
      const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
      *scale++ = d * float(ls - 32);
      nibble_levels(qs + 16 * ib, iq::kIq4nlLevels, q);
    }
  }
}

void unpack_mxfp4(const uint8_t* src, size_t nb, int8_t* q, float* scale) {
  for (size_t i = 0; i < nb; ++i, src += sizeof(BlockMXFP4), q += 32) {
    *scale++ = e8m0_half_to_f32(src[0]);
    nibble_levels(src + 1, iq::kMxfp4Levels, q);
  }
}

}  // namespace

bool unpack_iquant(DType t, const void* src_v, size_t nb, int8_t* q, float* scale, float* bias) {
  const auto* src = static_cast<const uint8_t*>(src_v);
  const Layout l = layout(t);
  switch (t) {
    case DType::IQ2_XXS: unpack_iq2_xxs(src, nb, q, scale); break;
    case DType::IQ2_XS: unpack_iq2_xs(src, nb, q, scale); break;
    case DType::IQ2_S: unpack_iq2_s(src, nb, q, scale); break;
    case DType::IQ3_XXS: unpack_iq3_xxs(src, nb, q, scale); break;
    case DType::IQ3_S: unpack_iq3_s(src, nb, q, scale); break;
    case DType::IQ1_S: unpack_iq1_s(src, nb, q, scale); break;
    case DType::IQ1_M: unpack_iq1_m(src, nb, q, scale); break;
    case DType::IQ4_NL: unpack_iq4_nl(src, nb, q, scale); break;
    case DType::IQ4_XS: unpack_iq4_xs(src, nb, q, scale); break;
    case DType::MXFP4: unpack_mxfp4(src, nb, q, scale); break;
    default: return false;
  }
  const size_t groups = nb * size_t(l.block_size / l.group_size);
  std::memset(bias, 0, groups * sizeof(float));
  return true;
}

}  // namespace rf::qimpl
