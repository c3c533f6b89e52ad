// Scale search for the quantizers: the best scale (and offset) for a small
// group of values on an integer grid, by least squares (qimpl::fit_symmetric,
// qimpl::fit_affine; see core/quant_blocks.h).
//
// Method: try a grid of inverse scales that map the extreme value(s) to the
// ends of the integer range and slightly beyond; round every value for each
// candidate, fit the scale (and offset) by weighted least squares for those
// integers, and keep the candidate with the smallest error. Then alternate
// "round for this scale" / "refit the scale" while the error falls. Every
// step can only lower the error, so the result is never worse than plain
// max-abs rounding (which is one of the candidates).
#include <cmath>
#include <cstring>

#include "core/quant_blocks.h"

namespace rf::qimpl {
namespace {

constexpr float kTiny = 1e-30f;
// Candidate targets: the extreme value lands on level |end| + k*kStep.
constexpr int kSteps = 10;
constexpr float kStep = 0.1f;
constexpr int kRefineIters = 6;

inline float weight(const float* w, int i) { return w ? w[i] : 1.0f; }

struct SymSums {
  double sxl = 0, sll = 0;
  // Error reduction against the all-zero fit: sxl^2 / sll.
  double gain() const { return sll > 0 ? sxl * sxl / sll : 0.0; }
};

SymSums sym_round(const float* x, const float* w, int n, float iscale, int lo, int hi, int8_t* L) {
  SymSums s;
  for (int i = 0; i < n; ++i) {
    const int l = round_clamp(iscale * x[i], lo, hi);
    L[i] = int8_t(l);
    const double wl = double(weight(w, i)) * l;
    s.sxl += wl * x[i];
    s.sll += wl * l;
  }
  return s;
}

struct AffSums {
  double sw = 0, sx = 0, sxx = 0, sl = 0, sll = 0, sxl = 0;
};

// Least-squares s, m for fixed L; returns the weighted squared error.
double affine_solve(const AffSums& a, bool m_nonpositive, float* s_out, float* m_out) {
  double s = 0, m = a.sw > 0 ? a.sx / a.sw : 0;
  const double det = a.sw * a.sll - a.sl * a.sl;
  if (det > 0) {
    s = (a.sw * a.sxl - a.sx * a.sl) / det;
    m = (a.sll * a.sx - a.sl * a.sxl) / det;
  }
  if (m_nonpositive && m > 0) {
    m = 0;
    s = a.sll > 0 ? a.sxl / a.sll : 0;
  }
  if (s < 0) {  // the integers are nonnegative levels of a nonnegative step
    s = 0;
    m = a.sw > 0 ? a.sx / a.sw : 0;
    if (m_nonpositive && m > 0) m = 0;
  }
  *s_out = float(s);
  *m_out = float(m);
  const double err = a.sxx - 2 * s * a.sxl - 2 * m * a.sx + s * s * a.sll + 2 * s * m * a.sl +
                     m * m * a.sw;
  return err > 0 ? err : 0;
}

AffSums affine_round(const float* x, const float* w, int n, float iscale, float offset, int nmax,
                     uint8_t* L) {
  AffSums a;
  for (int i = 0; i < n; ++i) {
    const int l = round_clamp(iscale * (x[i] - offset), 0, nmax);
    L[i] = uint8_t(l);
    const double wi = weight(w, i);
    a.sw += wi;
    a.sx += wi * x[i];
    a.sxx += wi * x[i] * x[i];
    a.sl += wi * l;
    a.sll += wi * l * l;
    a.sxl += wi * l * x[i];
  }
  return a;
}

}  // namespace

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
  int8_t cand[256];
  double best = -1;
  float best_iscale = 0;
  for (const int end : {lo, hi}) {
    if (end == 0) continue;
    const float mag = float(end < 0 ? -end : end);
    for (int k = -kSteps; k <= kSteps; ++k) {
      const float t = mag + kStep * float(k);
      if (t <= 0.5f) continue;
      const float iscale = (end < 0 ? -t : t) / xm;
      const SymSums s = sym_round(x, w, n, iscale, lo, hi, cand);
      if (s.gain() > best) {
        best = s.gain();
        best_iscale = iscale;
      }
    }
  }
  SymSums s = sym_round(x, w, n, best_iscale, lo, hi, L);
  if (!(s.sll > 0)) return 0.0f;
  float scale = float(s.sxl / s.sll);
  for (int it = 0; it < kRefineIters && scale != 0.0f; ++it) {
    const SymSums t = sym_round(x, w, n, 1.0f / scale, lo, hi, cand);
    if (!(t.gain() > s.gain())) break;
    s = t;
    std::memcpy(L, cand, size_t(n));
    scale = float(s.sxl / s.sll);
  }
  return scale;
}

void fit_affine(const float* x, const float* w, int n, int nmax, bool m_nonpositive, uint8_t* L,
                float* s_out, float* m_out) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < n; ++i) {
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
  }
  if (m_nonpositive && mn > 0) mn = 0;
  if (!(mx - mn > kTiny) || !std::isfinite(mx - mn)) {
    std::memset(L, 0, size_t(n));
    *s_out = 0;
    *m_out = std::isfinite(mn) ? mn : 0.0f;
    return;
  }
  uint8_t cand[256];
  double best = INFINITY;
  float best_s = 0, best_m = mn;
  for (int k = -kSteps; k <= kSteps; ++k) {
    const float t = float(nmax) + kStep * float(k);
    if (t <= 0.5f) continue;
    const AffSums a = affine_round(x, w, n, t / (mx - mn), mn, nmax, cand);
    float s, m;
    const double err = affine_solve(a, m_nonpositive, &s, &m);
    if (err < best) {
      best = err;
      best_s = s;
      best_m = m;
      std::memcpy(L, cand, size_t(n));
    }
  }
  for (int it = 0; it < kRefineIters && best_s > 0; ++it) {
    const AffSums a = affine_round(x, w, n, 1.0f / best_s, best_m, nmax, cand);
    float s, m;
    const double err = affine_solve(a, m_nonpositive, &s, &m);
    if (!(err < best)) break;
    best = err;
    best_s = s;
    best_m = m;
    std::memcpy(L, cand, size_t(n));
  }
  *s_out = best_s;
  *m_out = best_m;
}

}  // namespace rf::qimpl
