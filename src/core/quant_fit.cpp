// Scale search for the quantizers: the best scale (and offset) for a small
// group of values on an integer grid, by least squares (qimpl::fit_symmetric,
// qimpl::fit_affine), and the re-rounding error kernels they and the format
// quantizers share (qimpl::requant_error, qimpl::requant); see
// core/quant_blocks.h.
//
// Method: try a grid of inverse scales that map the extreme value(s) to the
// ends of the integer range and slightly beyond; round every value for each
// candidate, fit the scale (and offset) by weighted least squares for those
// integers, and keep the candidate with the smallest error. Then alternate
// "round for this scale" / "refit the scale" while the error falls. Every
// step can only lower the error, so the result is never worse than plain
// max-abs rounding (which is one of the candidates).
//
// The per-candidate sums are the quantizers' hot loop and use AVX2 where
// compiled in (same roundings, different summation order than the scalar
// loop, so the chosen candidate can differ in near-ties).
#include <cmath>
#include <cstring>

#include "core/quant_blocks.h"

#ifdef RF_QUANT_AVX2
#include <immintrin.h>
#endif

namespace rf::qimpl {
namespace {

constexpr float kTiny = 1e-30f;
// Candidate targets: the extreme value lands on level |end| + k*kStep.
constexpr int kSteps = 10;
constexpr float kStep = 0.1f;
constexpr int kRefineIters = 6;

#ifdef RF_QUANT_AVX2
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// clamp(round((x - offset) * iscale), lo, hi) for 8 values; NaN gives lo.
inline __m256 round_clamp8(__m256 x, __m256 offset, __m256 iscale, __m256 lo, __m256 hi) {
  const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_sub_ps(x, offset), iscale),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm256_min_ps(_mm256_max_ps(r, lo), hi);  // max(NaN, lo) is lo
}
#endif

// Sums over L_i = round_clamp((x_i - offset) * iscale, lo, hi) with weights.
struct RoundSums {
  float sl = 0, sll = 0, sxl = 0;
};

RoundSums round_sums(const float* x, const float* w, int n, float iscale, float offset, int lo,
                     int hi) {
  RoundSums s;
  int i = 0;
#ifdef RF_QUANT_AVX2
  const __m256 vis = _mm256_set1_ps(iscale), voff = _mm256_set1_ps(offset);
  const __m256 vlo = _mm256_set1_ps(float(lo)), vhi = _mm256_set1_ps(float(hi));
  __m256 al = _mm256_setzero_ps(), all = _mm256_setzero_ps(), axl = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    const __m256 r = round_clamp8(xv, voff, vis, vlo, vhi);
    const __m256 wr = w ? _mm256_mul_ps(_mm256_loadu_ps(w + i), r) : r;
    al = _mm256_add_ps(al, wr);
    all = _mm256_fmadd_ps(wr, r, all);
    axl = _mm256_fmadd_ps(wr, xv, axl);
  }
  s.sl = hsum(al);
  s.sll = hsum(all);
  s.sxl = hsum(axl);
#endif
  for (; i < n; ++i) {
    const float l = float(round_clamp((x[i] - offset) * iscale, lo, hi));
    const float wl = (w ? w[i] : 1.0f) * l;
    s.sl += wl;
    s.sll += wl * l;
    s.sxl += wl * x[i];
  }
  return s;
}

// Error reduction of the symmetric least-squares fit against all zeros.
inline float sym_gain(const RoundSums& s) { return s.sll > 0 ? s.sxl * s.sxl / s.sll : 0.0f; }

struct Moments {  // weighted sums of 1, x, x^2
  float sw = 0, sx = 0, sxx = 0;
};

// Least-squares s, m for fixed L; returns the weighted squared error.
float affine_solve(const Moments& mo, const RoundSums& a, bool m_nonpositive, float* s_out,
                   float* m_out) {
  double s = 0, m = mo.sw > 0 ? double(mo.sx) / mo.sw : 0;
  const double det = double(mo.sw) * a.sll - double(a.sl) * a.sl;
  if (det > 0) {
    s = (double(mo.sw) * a.sxl - double(mo.sx) * a.sl) / det;
    m = (double(a.sll) * mo.sx - double(a.sl) * a.sxl) / det;
  }
  if (m_nonpositive && m > 0) {
    m = 0;
    s = a.sll > 0 ? double(a.sxl) / a.sll : 0;
  }
  if (s < 0) {  // the integers are nonnegative levels of a nonnegative step
    s = 0;
    m = mo.sw > 0 ? double(mo.sx) / mo.sw : 0;
    if (m_nonpositive && m > 0) m = 0;
  }
  *s_out = float(s);
  *m_out = float(m);
  const double err = mo.sxx - 2 * s * a.sxl - 2 * m * mo.sx + s * s * a.sll + 2 * s * m * a.sl +
                     m * m * mo.sw;
  return err > 0 ? float(err) : 0.0f;
}

}  // namespace

float requant_error(const float* x, int n, float scale, float offset, int lo, int hi) {
  const float iscale = scale != 0.0f ? 1.0f / scale : 0.0f;
  int i = 0;
  float err = 0;
#ifdef RF_QUANT_AVX2
  const __m256 vs = _mm256_set1_ps(scale), vis = _mm256_set1_ps(iscale);
  const __m256 voff = _mm256_set1_ps(-offset), vneg = _mm256_set1_ps(offset);
  const __m256 vlo = _mm256_set1_ps(float(lo)), vhi = _mm256_set1_ps(float(hi));
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    const __m256 l = round_clamp8(xv, voff, vis, vlo, vhi);
    const __m256 e = _mm256_sub_ps(_mm256_sub_ps(_mm256_mul_ps(vs, l), vneg), xv);
    acc = _mm256_fmadd_ps(e, e, acc);
  }
  err = hsum(acc);
#endif
  for (; i < n; ++i) {
    const float l = float(round_clamp((x[i] + offset) * iscale, lo, hi));
    const float e = (scale * l - offset) - x[i];
    err += e * e;
  }
  return err;
}

void requant(const float* x, int n, float scale, float offset, int lo, int hi, int* L) {
  const float iscale = scale != 0.0f ? 1.0f / scale : 0.0f;
  for (int i = 0; i < n; ++i) L[i] = round_clamp((x[i] + offset) * iscale, lo, hi);
}

float fit_symmetric(const float* x, const float* w, int n, int lo, int hi, int8_t* L) {
  float amax = 0, xm = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      xm = x[i];
    }
  }
  if (!(amax > kTiny) || !std::isfinite(amax)) {
    std::memset(L, 0, size_t(n));
    return 0.0f;
  }
  float best = -1, best_iscale = 0;
  for (const int end : {lo, hi}) {
    if (end == 0) continue;
    const float mag = float(end < 0 ? -end : end);
    for (int k = -kSteps; k <= kSteps; ++k) {
      const float t = mag + kStep * float(k);
      if (t <= 0.5f) continue;
      const float iscale = (end < 0 ? -t : t) / xm;
      const float g = sym_gain(round_sums(x, w, n, iscale, 0.0f, lo, hi));
      if (g > best) {
        best = g;
        best_iscale = iscale;
      }
    }
  }
  RoundSums s = round_sums(x, w, n, best_iscale, 0.0f, lo, hi);
  if (!(s.sll > 0)) {
    std::memset(L, 0, size_t(n));
    return 0.0f;
  }
  float iscale = best_iscale, scale = s.sxl / s.sll;
  for (int it = 0; it < kRefineIters && scale != 0.0f; ++it) {
    const RoundSums t = round_sums(x, w, n, 1.0f / scale, 0.0f, lo, hi);
    if (!(sym_gain(t) > sym_gain(s))) break;
    s = t;
    iscale = 1.0f / scale;
    scale = s.sxl / s.sll;
  }
  for (int i = 0; i < n; ++i) L[i] = int8_t(round_clamp(x[i] * iscale, lo, hi));
  return scale;
}

void fit_affine(const float* x, const float* w, int n, int nmax, bool m_nonpositive, uint8_t* L,
                float* s_out, float* m_out) {
  float mn = x[0], mx = x[0];
  Moments mo;
  for (int i = 0; i < n; ++i) {
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
    const float wi = w ? w[i] : 1.0f;
    mo.sw += wi;
    mo.sx += wi * x[i];
    mo.sxx += wi * x[i] * x[i];
  }
  if (m_nonpositive && mn > 0) mn = 0;
  if (!(mx - mn > kTiny) || !std::isfinite(mx - mn)) {
    std::memset(L, 0, size_t(n));
    *s_out = 0;
    *m_out = std::isfinite(mn) ? mn : 0.0f;
    return;
  }
  float best = INFINITY, best_s = 0, best_m = mn;
  float best_iscale = 0, best_offset = mn;  // the rounding that produced best_s/best_m
  for (int k = -kSteps; k <= kSteps; ++k) {
    const float t = float(nmax) + kStep * float(k);
    if (t <= 0.5f) continue;
    const float iscale = t / (mx - mn);
    float s, m;
    const float err = affine_solve(mo, round_sums(x, w, n, iscale, mn, 0, nmax), m_nonpositive, &s, &m);
    if (err < best) {
      best = err;
      best_s = s;
      best_m = m;
      best_iscale = iscale;
      best_offset = mn;
    }
  }
  for (int it = 0; it < kRefineIters && best_s > 0; ++it) {
    const float iscale = 1.0f / best_s, offset = best_m;
    float s, m;
    const float err =
        affine_solve(mo, round_sums(x, w, n, iscale, offset, 0, nmax), m_nonpositive, &s, &m);
    if (!(err < best)) break;
    best = err;
    best_s = s;
    best_m = m;
    best_iscale = iscale;
    best_offset = offset;
  }
  for (int i = 0; i < n; ++i) L[i] = uint8_t(round_clamp((x[i] - best_offset) * best_iscale, 0, nmax));
  *s_out = best_s;
  *m_out = best_m;
}

}  // namespace rf::qimpl
