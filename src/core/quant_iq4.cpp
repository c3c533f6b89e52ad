// Quantizers of the 4-bit formats with non-uniform levels: IQ4_NL and
// IQ4_XS (the 16 levels of core/iq_grids.h times a scale per 32 values) and
// MXFP4 (E2M1 levels times a power-of-two scale per 32).
//
// Each minimizes the (optionally importance-weighted) squared error of the
// values it will decode to: a scale is searched over candidates that map the
// largest magnitude onto either end level and slightly beyond, every value
// is assigned its nearest level, the scale is refitted by least squares and
// the assignment repeated while the error falls. Final assignments are made
// against the scale exactly as stored (f16, or the 6-bit sub-scales of
// IQ4_XS), so what is chosen is what decodes.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/iq_grids.h"
#include "core/quant_blocks.h"

#ifdef RF_QUANT_AVX2
#include <immintrin.h>
#endif

namespace rf::qimpl {
namespace {

constexpr int kCandidates = 10;  // scales tried per end level
constexpr float kCandidateStep = 0.03f;
constexpr int kRefineIters = 4;

// A level table sorted, for nearest-level search by bisection of midpoints.
struct Levels {
  int count = 0;
  float value[16];   // ascending, distinct
  float mid[15];     // mid[i] between value[i] and value[i + 1]
  uint8_t code[16];  // the stored 4-bit code of value[i]
  float lo = 0, hi = 0;

  explicit Levels(const int8_t* table) {
    for (int c = 0; c < 16; ++c) {
      bool seen = false;
      for (int i = 0; i < count; ++i) seen = seen || value[i] == float(table[c]);
      if (seen) continue;
      int at = count++;
      while (at > 0 && value[at - 1] > float(table[c])) value[at] = value[at - 1], code[at] = code[at - 1], --at;
      value[at] = float(table[c]);
      code[at] = uint8_t(c);
    }
    for (int i = 0; i + 1 < count; ++i) mid[i] = 0.5f * (value[i] + value[i + 1]);
    lo = value[0], hi = value[count - 1];
  }
  // Position (into value/code) of the level nearest to v.
  int nearest(float v) const {
    int a = 0, b = count - 1;  // the answer lies in [a, b]
    while (a < b) {
      const int m = (a + b) / 2;
      if (v > mid[m]) a = m + 1; else b = m;
    }
    return a;
  }
};

const Levels& iq4_levels() {
  static const Levels l(iq::kIq4nlLevels);
  return l;
}
const Levels& mxfp4_levels() {
  static const Levels l(iq::kMxfp4Levels);
  return l;
}

inline float weight_of(const float* w, int i) { return w ? w[i] : 1.0f; }

struct Fit {
  double sxl = 0, sll = 0;  // weighted sums of x * level and level^2
};

// Assigns every value its nearest level for scale s (positions into lv in pos).
Fit assign(const float* x, const float* w, int n, const Levels& lv, float s, uint8_t* pos) {
  Fit f;
  const float inv = s != 0.0f ? 1.0f / s : 0.0f;
  for (int i = 0; i < n; ++i) {
    pos[i] = uint8_t(lv.nearest(x[i] * inv));
    const double l = lv.value[pos[i]], wi = weight_of(w, i);
    f.sxl += wi * x[i] * l;
    f.sll += wi * l * l;
  }
  return f;
}

// assign()'s sums alone, for the candidate search (AVX2 where compiled in;
// the same levels, summed in another order).
Fit assign_sums(const float* x, const float* w, int n, const Levels& lv, float s) {
#ifdef RF_QUANT_AVX2
  if (n % 8 == 0) {
    const __m256 inv = _mm256_set1_ps(s != 0.0f ? 1.0f / s : 0.0f);
    __m256 sxl = _mm256_setzero_ps(), sll = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
      const __m256 xv = _mm256_loadu_ps(x + i);
      const __m256 v = _mm256_mul_ps(xv, inv);
      __m256i p = _mm256_setzero_si256();
      for (int m = 0; m + 1 < lv.count; ++m)  // count of midpoints below v (-1 per true lane)
        p = _mm256_sub_epi32(p, _mm256_castps_si256(_mm256_cmp_ps(v, _mm256_set1_ps(lv.mid[m]), _CMP_GT_OQ)));
      const __m256 l = _mm256_i32gather_ps(lv.value, p, 4);
      const __m256 wv = w ? _mm256_loadu_ps(w + i) : _mm256_set1_ps(1.0f);
      const __m256 wl = _mm256_mul_ps(wv, l);
      sxl = _mm256_fmadd_ps(wl, xv, sxl);
      sll = _mm256_fmadd_ps(wl, l, sll);
    }
    alignas(32) float a[8], b[8];
    _mm256_store_ps(a, sxl);
    _mm256_store_ps(b, sll);
    Fit f;
    for (int j = 0; j < 8; ++j) f.sxl += a[j], f.sll += b[j];
    return f;
  }
#endif
  uint8_t pos[kQK_K];
  return assign(x, w, n, lv, s, pos);
}

// The weighted squared error of decoding the assignment pos with scale s.
double error_of(const float* x, const float* w, int n, const Levels& lv, float s, const uint8_t* pos) {
  double err = 0;
  for (int i = 0; i < n; ++i) {
    const double e = double(x[i]) - double(s) * lv.value[pos[i]];
    err += weight_of(w, i) * e * e;
  }
  return err;
}

// The best scale for x ~= s * level_i (the IQ4 levels); the assignment in pos.
float fit_levels(const float* x, const float* w, int n, const Levels& lv, uint8_t* pos) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  if (!(amax > 0.0f) || !std::isfinite(amax)) {
    assign(x, w, n, lv, 0.0f, pos);
    return 0.0f;
  }
  // A candidate's quality is sxl^2 / sll: the error it removes with its
  // assignment and the least-squares scale for it.
  float best_s = max / lv.lo;
  double best_q = -1;
  for (const float end : {lv.lo, lv.hi}) {
    for (int c = -kCandidates / 2; c <= kCandidates; ++c) {
      const Fit f = assign_sums(x, w, n, lv, max / (end * (1.0f + kCandidateStep * float(c))));
      if (f.sll > 0 && f.sxl * f.sxl > best_q * f.sll) best_q = f.sxl * f.sxl / f.sll, best_s = float(f.sxl / f.sll);
    }
  }
  for (int it = 0; it < kRefineIters; ++it) {
    const Fit f = assign_sums(x, w, n, lv, best_s);
    if (!(f.sll > 0 && f.sxl * f.sxl > best_q * f.sll * (1 + 1e-7))) break;
    best_q = f.sxl * f.sxl / f.sll, best_s = float(f.sxl / f.sll);
  }
  assign(x, w, n, lv, best_s, pos);
  return best_s;
}

void pack_nibbles(const Levels& lv, const uint8_t* pos, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(lv.code[pos[j]] | (lv.code[pos[j + 16]] << 4));
}

void quantize_iq4_nl_block(const float* x, const float* w, uint8_t* dst) {
  const Levels& lv = iq4_levels();
  uint8_t pos[kQK];
  const uint16_t d16 = f32_to_f16(fit_levels(x, w, kQK, lv, pos));
  assign(x, w, kQK, lv, f16_to_f32(d16), pos);
  std::memcpy(dst, &d16, 2);
  pack_nibbles(lv, pos, dst + 2);
}

void quantize_iq4_xs_block(const float* x, const float* w, uint8_t* dst) {
  const Levels& lv = iq4_levels();
  float s[8], ws[8];
  uint8_t pos[kQK_K], tmp[32];
  for (int j = 0; j < 8; ++j) {
    const float* wj = w ? w + 32 * j : nullptr;
    s[j] = fit_levels(x + 32 * j, wj, 32, lv, pos + 32 * j);
    // How much an error of the sub-scale costs: the weighted sum of level^2.
    ws[j] = float(assign_sums(x + 32 * j, wj, 32, lv, s[j]).sll) + 1e-30f;
  }
  int8_t L[8];
  const uint16_t d16 = f32_to_f16(fit_symmetric(s, ws, 8, -32, 31, L));
  const float d = f16_to_f32(d16);
  uint16_t scales_h = 0;
  uint8_t scales_l[4] = {0, 0, 0, 0};
  for (int j = 0; j < 8; ++j) {
    const float* xj = x + 32 * j;
    const float* wj = w ? w + 32 * j : nullptr;
    int best_l = L[j];
    double best_e = INFINITY;
    for (int l = L[j] - 1; l <= L[j] + 1; ++l) {
      if (l < -32 || l > 31) continue;
      assign(xj, wj, 32, lv, d * float(l), tmp);
      const double e = error_of(xj, wj, 32, lv, d * float(l), tmp);
      if (e < best_e) best_e = e, best_l = l;
    }
    assign(xj, wj, 32, lv, d * float(best_l), pos + 32 * j);
    const int ls = best_l + 32;
    scales_l[j / 2] = uint8_t(scales_l[j / 2] | ((ls & 0xF) << (4 * (j % 2))));
    scales_h = uint16_t(scales_h | ((ls >> 4) << (2 * j)));
  }
  std::memcpy(dst, &d16, 2);
  std::memcpy(dst + 2, &scales_h, 2);
  std::memcpy(dst + 4, scales_l, 4);
  for (int j = 0; j < 8; ++j) pack_nibbles(lv, pos + 32 * j, dst + 8 + 16 * j);
}

void quantize_mxfp4_block(const float* x, const float* w, uint8_t* dst) {
  const Levels& lv = mxfp4_levels();
  float amax = 0;
  for (int i = 0; i < kQK; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  uint8_t pos[kQK], best_pos[kQK];
  int best_e = 0;
  // Without a finite non-zero value every code decodes to 0 (or the NaNs stay lost).
  assign(x, w, kQK, lv, 0.0f, best_pos);
  if (amax > 0.0f && std::isfinite(amax)) {
    const int e0 = int(std::floor(std::log2(amax))) - 2 + 127;
    double best_err = INFINITY;
    for (int e = e0 - 1; e <= e0 + 2; ++e) {
      if (e < 0 || e > 254) continue;
      const float d = e8m0_half_to_f32(uint8_t(e));
      assign(x, w, kQK, lv, d, pos);
      const double err = error_of(x, w, kQK, lv, d, pos);
      if (err < best_err) best_err = err, best_e = e, std::memcpy(best_pos, pos, kQK);
    }
  }
  dst[0] = uint8_t(best_e);
  pack_nibbles(lv, best_pos, dst + 1);
}

}  // namespace

bool quantize_iq4(DType t, const float* src, void* dst_v, size_t n, const float* importance) {
  auto* dst = static_cast<uint8_t*>(dst_v);
  switch (t) {
    case DType::IQ4_NL:
      for (size_t i = 0; i < n; i += kQK, dst += sizeof(BlockIQ4_NL))
        quantize_iq4_nl_block(src + i, importance ? importance + i : nullptr, dst);
      return true;
    case DType::IQ4_XS:
      for (size_t i = 0; i < n; i += kQK_K, dst += sizeof(BlockIQ4_XS))
        quantize_iq4_xs_block(src + i, importance ? importance + i : nullptr, dst);
      return true;
    case DType::MXFP4:
      for (size_t i = 0; i < n; i += kQK, dst += sizeof(BlockMXFP4))
        quantize_mxfp4_block(src + i, importance ? importance + i : nullptr, dst);
      return true;
    default:
      return false;
  }
}

}  // namespace rf::qimpl
