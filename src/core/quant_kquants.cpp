// Quantizers for the k-quant super-block formats: Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K and Q8_K (qimpl::quantize_kquant).
//
// A super-block of 256 values has sub-blocks of 16 or 32 that each get an
// integer scale (and, for the affine formats, an integer min) on top of one
// f16 super-scale d (and dmin). One generic routine fits all five formats
// (described by a KSpec):
//   1. least-squares scale (and min) per sub-block (quant_fit.cpp);
//   2. the sub-block scales/mins themselves quantized by the same search,
//      weighted by how much each one's error costs (sum of L^2 / count);
//   3. refinement: per sub-block, the best integer scale/min within +-1..2
//      of the rounded one (re-rounding the quants for each), then a joint
//      least-squares refit of d and dmin; repeated while the error falls.
// Errors are measured on the values exactly as dequantize_row produces them.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/quant_blocks.h"

namespace rf::qimpl {
namespace {

struct KSpec {
  int group;     // elements per sub-block
  int qlo, qhi;  // range of the quants
  bool affine;   // value = (d*ls)*q - dmin*lm, else (d*ls)*q
  int slo, shi;  // range of the integer sub-block scales
  int mmax;      // range [0, mmax] of the integer mins (affine only)
};
constexpr KSpec kSpecQ2K{16, 0, 3, true, 0, 15, 15};
constexpr KSpec kSpecQ3K{16, -4, 3, false, -32, 31, 0};
constexpr KSpec kSpecQ4K{32, 0, 15, true, 0, 63, 63};
constexpr KSpec kSpecQ5K{32, 0, 31, true, 0, 63, 63};
constexpr KSpec kSpecQ6K{16, -32, 31, false, -128, 127, 0};

constexpr int kRounds = 4;

struct KBlock {
  uint16_t d = 0, dmin = 0;
  int ls[16] = {}, lm[16] = {};
  int L[kQK_K] = {};
};

// For each sub-block, the integer scale/min near the current ones with the
// least error (L updated). Returns the super-block's error.
double choose_sub_scales(const float* x, const KSpec& sp, KBlock* b, const float* s,
                         const float* m) {
  const int nsub = kQK_K / sp.group;
  const float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
  const int rs = sp.affine ? 1 : 2, rm = sp.affine ? 1 : 0;
  double total = 0;
  for (int j = 0; j < nsub; ++j) {
    const float* xj = x + j * sp.group;
    // Start from the rounded ideal values (or the current ones when refining).
    const int ls0 = s ? (d != 0.0f ? round_clamp(s[j] / d, sp.slo, sp.shi) : 0) : b->ls[j];
    const int lm0 = !sp.affine ? 0 : m ? (dmin != 0.0f ? round_clamp(m[j] / dmin, 0, sp.mmax) : 0)
                                       : b->lm[j];
    float best = INFINITY;
    for (int ls = ls0 - rs; ls <= ls0 + rs; ++ls) {
      if (ls < sp.slo || ls > sp.shi) continue;
      for (int lm = lm0 - rm; lm <= lm0 + rm; ++lm) {
        if (lm < 0 || lm > (sp.affine ? sp.mmax : 0)) continue;
        // The values exactly as dequantized: (d*ls)*q - dmin*lm.
        const float err = requant_error(xj, sp.group, d * float(ls), dmin * float(lm), sp.qlo, sp.qhi);
        if (err < best) {
          best = err;
          b->ls[j] = ls;
          b->lm[j] = lm;
        }
      }
    }
    requant(xj, sp.group, d * float(b->ls[j]), dmin * float(b->lm[j]), sp.qlo, sp.qhi,
            b->L + j * sp.group);
    total += best;
  }
  return total;
}

// Least-squares d (and dmin) for the current integers, rounded to f16.
void refit_super(const float* x, const KSpec& sp, const KBlock& b, uint16_t* d16, uint16_t* dmin16) {
  double saa = 0, sab = 0, sbb = 0, sax = 0, sbx = 0;
  for (int i = 0; i < kQK_K; ++i) {
    const int j = i / sp.group;
    const double a = double(b.ls[j]) * b.L[i], c = sp.affine ? double(b.lm[j]) : 0.0;
    saa += a * a;
    sab += a * c;
    sbb += c * c;
    sax += a * x[i];
    sbx += c * x[i];
  }
  // minimize sum (d*a - dmin*c - x)^2
  double d = saa > 0 ? sax / saa : 0, dmin = 0;
  const double det = saa * sbb - sab * sab;
  if (sp.affine && det > 0) {
    d = (sax * sbb - sab * sbx) / det;
    dmin = (sab * sax - saa * sbx) / det;
    if (dmin < 0) {
      dmin = 0;
      d = saa > 0 ? sax / saa : 0;
    }
  }
  *d16 = f32_to_f16(float(d));
  *dmin16 = f32_to_f16(float(dmin));
}

void fit_superblock(const float* x, const KSpec& sp, KBlock* b) {
  const int nsub = kQK_K / sp.group;
  float s[16], m[16], ws[16], wm[16];
  int8_t Ls[16];
  for (int j = 0; j < nsub; ++j) {
    const float* xj = x + j * sp.group;
    double sll = 0;
    if (sp.affine) {
      uint8_t L[32];
      float off;
      fit_affine(xj, nullptr, sp.group, sp.qhi, true, L, &s[j], &off);
      m[j] = -off;
      for (int i = 0; i < sp.group; ++i) sll += double(L[i]) * L[i];
    } else {
      int8_t L[32];
      s[j] = fit_symmetric(xj, nullptr, sp.group, sp.qlo, sp.qhi, L);
      m[j] = 0;
      for (int i = 0; i < sp.group; ++i) sll += double(L[i]) * L[i];
    }
    ws[j] = float(sll) + 1.0f;
    wm[j] = 1.0f;
  }
  const float d = fit_symmetric(s, ws, nsub, sp.slo, sp.shi, Ls);
  const float dmin = sp.affine ? fit_symmetric(m, wm, nsub, 0, sp.mmax, Ls) : 0.0f;
  b->d = f32_to_f16(d);
  b->dmin = f32_to_f16(dmin);
  double err = choose_sub_scales(x, sp, b, s, m);

  for (int round = 0; round < kRounds; ++round) {
    KBlock t = *b;
    refit_super(x, sp, *b, &t.d, &t.dmin);
    if (t.d == b->d && t.dmin == b->dmin) break;
    const double terr = choose_sub_scales(x, sp, &t, nullptr, nullptr);
    if (!(terr < err)) break;
    *b = t;
    err = terr;
  }
}

void pack_k4_scales(const int* ls, const int* lm, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = uint8_t(ls[j]);
      s[j + 4] = uint8_t(lm[j]);
    } else {
      s[j + 4] = uint8_t((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      s[j - 4] |= uint8_t((ls[j] >> 4) << 6);
      s[j] |= uint8_t((lm[j] >> 4) << 6);
    }
  }
}

// 2-bit fields of 256 values: element e at qs[32*(e/128) + e%32], bit 2*((e%128)/32).
void pack_2bit(const int* u, uint8_t* qs) {
  std::memset(qs, 0, kQK_K / 4);
  for (int e = 0; e < kQK_K; ++e)
    qs[32 * (e / 128) + e % 32] |= uint8_t((u[e] & 3) << (2 * ((e % 128) / 32)));
}

void store_q2_k(const KBlock& b, BlockQ2_K* y) {
  y->d = b.d;
  y->dmin = b.dmin;
  for (int j = 0; j < 16; ++j) y->scales[j] = uint8_t(b.ls[j] | (b.lm[j] << 4));
  pack_2bit(b.L, y->qs);
}

void store_q3_k(const KBlock& b, BlockQ3_K* y) {
  y->d = b.d;
  std::memset(y->scales, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int l = b.ls[j] + 32;
    y->scales[j % 8] |= uint8_t((l & 0xF) << (j < 8 ? 0 : 4));
    y->scales[8 + j % 4] |= uint8_t((l >> 4) << (2 * (j / 4)));
  }
  int u[kQK_K];
  std::memset(y->hmask, 0, sizeof(y->hmask));
  for (int e = 0; e < kQK_K; ++e) {
    u[e] = b.L[e] + 4;
    if (u[e] > 3) y->hmask[e % 32] |= uint8_t(1 << (e / 32));
  }
  pack_2bit(u, y->qs);
}

template <bool kFifthBit, typename Block>
void store_q45_k(const KBlock& b, Block* y) {
  y->d = b.d;
  y->dmin = b.dmin;
  pack_k4_scales(b.ls, b.lm, y->scales);
  if constexpr (kFifthBit) std::memset(y->qh, 0, sizeof(y->qh));
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int lo = b.L[64 * c + l], hi = b.L[64 * c + 32 + l];
      y->qs[32 * c + l] = uint8_t((lo & 0xF) | ((hi & 0xF) << 4));
      if constexpr (kFifthBit)
        y->qh[l] |= uint8_t(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
    }
  }
}

void store_q6_k(const KBlock& b, BlockQ6_K* y) {
  y->d = b.d;
  for (int j = 0; j < 16; ++j) y->scales[j] = int8_t(b.ls[j]);
  for (int n = 0; n < 2; ++n) {
    const int* u = b.L + 128 * n;
    for (int l = 0; l < 32; ++l) {
      const int q1 = u[l] + 32, q2 = u[l + 32] + 32, q3 = u[l + 64] + 32, q4 = u[l + 96] + 32;
      y->ql[64 * n + l] = uint8_t((q1 & 0xF) | ((q3 & 0xF) << 4));
      y->ql[64 * n + 32 + l] = uint8_t((q2 & 0xF) | ((q4 & 0xF) << 4));
      y->qh[32 * n + l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
}

void quantize_q8_k(const float* x, BlockQ8_K* y) {
  int8_t L[kQK_K];
  y->d = fit_symmetric(x, nullptr, kQK_K, -127, 127, L);
  std::memcpy(y->qs, L, kQK_K);
  for (int j = 0; j < kQK_K / 16; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += L[16 * j + i];
    y->bsums[j] = int16_t(sum);
  }
}

}  // namespace

bool quantize_kquant(DType t, const float* x, void* dst, size_t n) {
  const size_t nb = n / kQK_K;
  KBlock b;
  for (size_t i = 0; i < nb; ++i, x += kQK_K) {
    switch (t) {
      case DType::Q2_K:
        fit_superblock(x, kSpecQ2K, &b);
        store_q2_k(b, static_cast<BlockQ2_K*>(dst) + i);
        break;
      case DType::Q3_K:
        fit_superblock(x, kSpecQ3K, &b);
        store_q3_k(b, static_cast<BlockQ3_K*>(dst) + i);
        break;
      case DType::Q4_K:
        fit_superblock(x, kSpecQ4K, &b);
        store_q45_k<false>(b, static_cast<BlockQ4_K*>(dst) + i);
        break;
      case DType::Q5_K:
        fit_superblock(x, kSpecQ5K, &b);
        store_q45_k<true>(b, static_cast<BlockQ5_K*>(dst) + i);
        break;
      case DType::Q6_K:
        fit_superblock(x, kSpecQ6K, &b);
        store_q6_k(b, static_cast<BlockQ6_K*>(dst) + i);
        break;
      case DType::Q8_K:
        quantize_q8_k(x, static_cast<BlockQ8_K*>(dst) + i);
        break;
      default:
        return false;
    }
  }
  return true;
}

}  // namespace rf::qimpl
