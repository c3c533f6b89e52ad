// Quantizers for the legacy 32-element block formats: Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0 and Q8_1 (qimpl::quantize_legacy).
//
// Each block: a least-squares scale search (quant_fit.cpp), then a polish
// step in the stored precision: the scale (and offset) are rounded to f16,
// the integers re-rounded for the rounded values and the f16 values refitted
// while the block's error (measured exactly as dequantize_row computes the
// values) keeps falling.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/quant_blocks.h"

namespace rf::qimpl {
namespace {

// Error of x ~= d*L (+ m) with d, m the f16 values, re-rounding L for them.
float block_error(const float* x, uint16_t d16, uint16_t m16, bool affine, int lo, int hi, int* L) {
  const float d = f16_to_f32(d16), m = affine ? f16_to_f32(m16) : 0.0f;
  requant(x, kQK, d, -m, lo, hi, L);
  return requant_error(x, kQK, d, -m, lo, hi);
}

// Least-squares d (and m) for fixed integers.
void refit(const float* x, const int* L, bool affine, float* d, float* m) {
  double sl = 0, sll = 0, sx = 0, sxl = 0;
  for (int i = 0; i < kQK; ++i) {
    sl += L[i];
    sll += double(L[i]) * L[i];
    sx += x[i];
    sxl += double(x[i]) * L[i];
  }
  if (!affine) {
    *d = sll > 0 ? float(sxl / sll) : 0.0f;
    return;
  }
  const double det = kQK * sll - sl * sl;
  if (det > 0) {
    *d = float((kQK * sxl - sx * sl) / det);
    *m = float((sll * sx - sl * sxl) / det);
  }
}

// Finds f16 d (and m) and the integers L for one block, starting from the
// float fit d (and m); L is recomputed for the f16 values.
void polish(const float* x, float d, float m, bool affine, int lo, int hi, uint16_t* d16_out,
            uint16_t* m16_out, int* L) {
  uint16_t d16 = f32_to_f16(d), m16 = affine ? f32_to_f16(m) : 0;
  float best = block_error(x, d16, m16, affine, lo, hi, L);
  int cand[kQK];
  for (int it = 0; it < 4; ++it) {
    float nd = f16_to_f32(d16), nm = f16_to_f32(m16);
    refit(x, L, affine, &nd, &nm);
    const uint16_t cd = f32_to_f16(nd), cm = affine ? f32_to_f16(nm) : 0;
    if (cd == d16 && cm == m16) break;
    const float err = block_error(x, cd, cm, affine, lo, hi, cand);
    if (!(err < best)) break;
    best = err;
    d16 = cd;
    m16 = cm;
    std::memcpy(L, cand, sizeof(cand));
  }
  *d16_out = d16;
  *m16_out = m16;
}

// Packs 32 integers in [0, 31] as nibbles (element j low, j+16 high) plus
// their fifth bits into qh (bit j of a little-endian u32), when qh != nullptr.
void pack_nibbles(const int* u, uint8_t* qs, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = uint8_t((u[j] & 0xF) | ((u[j + kQK / 2] & 0xF) << 4));
    h |= uint32_t((u[j] >> 4) & 1) << j;
    h |= uint32_t((u[j + kQK / 2] >> 4) & 1) << (j + kQK / 2);
  }
  if (qh) std::memcpy(qh, &h, 4);
}

// Symmetric formats: x ~= d * L, L in [lo, hi]; stores L - lo via `store`.
template <typename Store>
void quantize_symmetric(const float* x, size_t nb, int lo, int hi, Store store) {
  int8_t L8[kQK];
  int L[kQK];
  for (size_t i = 0; i < nb; ++i, x += kQK) {
    const float s = fit_symmetric(x, nullptr, kQK, lo, hi, L8);
    uint16_t d16, unused;
    polish(x, s, 0.0f, false, lo, hi, &d16, &unused, L);
    store(i, d16, L);
  }
}

template <typename Store>
void quantize_affine(const float* x, size_t nb, int nmax, Store store) {
  uint8_t L8[kQK];
  int L[kQK];
  for (size_t i = 0; i < nb; ++i, x += kQK) {
    float s, m;
    fit_affine(x, nullptr, kQK, nmax, false, L8, &s, &m);
    uint16_t d16, m16;
    polish(x, s, m, true, 0, nmax, &d16, &m16, L);
    store(i, d16, m16, L);
  }
}

}  // namespace

bool quantize_legacy(DType t, const float* x, void* dst, size_t n) {
  const size_t nb = n / kQK;
  switch (t) {
    case DType::Q4_0: {
      auto* y = static_cast<BlockQ4_0*>(dst);
      quantize_symmetric(x, nb, -8, 7, [&](size_t i, uint16_t d, const int* L) {
        int u[kQK];
        for (int j = 0; j < kQK; ++j) u[j] = L[j] + 8;
        y[i].d = d;
        pack_nibbles(u, y[i].qs, nullptr);
      });
      return true;
    }
    case DType::Q5_0: {
      auto* y = static_cast<BlockQ5_0*>(dst);
      quantize_symmetric(x, nb, -16, 15, [&](size_t i, uint16_t d, const int* L) {
        int u[kQK];
        for (int j = 0; j < kQK; ++j) u[j] = L[j] + 16;
        y[i].d = d;
        pack_nibbles(u, y[i].qs, y[i].qh);
      });
      return true;
    }
    case DType::Q8_0: {
      auto* y = static_cast<BlockQ8_0*>(dst);
      quantize_symmetric(x, nb, -127, 127, [&](size_t i, uint16_t d, const int* L) {
        y[i].d = d;
        for (int j = 0; j < kQK; ++j) y[i].qs[j] = int8_t(L[j]);
      });
      return true;
    }
    case DType::Q8_1: {
      auto* y = static_cast<BlockQ8_1*>(dst);
      quantize_symmetric(x, nb, -127, 127, [&](size_t i, uint16_t d, const int* L) {
        int sum = 0;
        for (int j = 0; j < kQK; ++j) {
          y[i].qs[j] = int8_t(L[j]);
          sum += L[j];
        }
        y[i].d = d;
        y[i].s = f32_to_f16(float(sum) * f16_to_f32(d));
      });
      return true;
    }
    case DType::Q4_1: {
      auto* y = static_cast<BlockQ4_1*>(dst);
      quantize_affine(x, nb, 15, [&](size_t i, uint16_t d, uint16_t m, const int* L) {
        y[i].d = d;
        y[i].m = m;
        pack_nibbles(L, y[i].qs, nullptr);
      });
      return true;
    }
    case DType::Q5_1: {
      auto* y = static_cast<BlockQ5_1*>(dst);
      quantize_affine(x, nb, 31, [&](size_t i, uint16_t d, uint16_t m, const int* L) {
        y[i].d = d;
        y[i].m = m;
        pack_nibbles(L, y[i].qs, y[i].qh);
      });
      return true;
    }
    default:
      return false;
  }
}

}  // namespace rf::qimpl
