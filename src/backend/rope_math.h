// RoPE angle math shared by every backend (host and device code): rotation
// frequencies with per-dimension factors, linear scaling and YaRN, following
// llama.cpp's definitions so GGUF models behave as they do there.
#pragma once

#include <cmath>

#include "backend/backend.h"
#include "core/host_device.h"

namespace rf {

struct YarnCorrDims {
  float low = 0.0f, high = 0.0f;
};

// The dimension at which a wavelength spans n_ctx_orig / (2*pi*n_rot) turns.
RF_HOST_DEVICE inline float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return float(n_dims) * logf(float(n_ctx_orig) / (n_rot * 2.0f * 3.14159265358979323846f)) / (2.0f * logf(base));
}

RF_HOST_DEVICE inline YarnCorrDims yarn_corr_dims(int n_dims, int n_ctx_orig, float base, float beta_fast,
                                                  float beta_slow) {
  YarnCorrDims d;
  const float start = floorf(yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, base));
  const float end = ceilf(yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, base));
  d.low = start > 0.0f ? start : 0.0f;
  d.high = end < float(n_dims - 1) ? end : float(n_dims - 1);
  return d;
}

// YaRN's mix of extrapolated and interpolated angle for pair i0: 1 below
// dimension `low`, 0 past `high`, linear between. T is the precision the
// caller's angles are in (double wherever angles reach 1e5 rad).
template <typename T>
RF_HOST_DEVICE inline T yarn_ramp(float low, float high, int i0) {
  const T span = T(high) - T(low);
  const T y = (T(i0 / 2) - T(low)) / (span > T(0.001) ? span : T(0.001));
  return T(1) - (y < T(0) ? T(0) : y > T(1) ? T(1) : y);
}

// cos/sin (already scaled by the attention magnitude factor) for pair index
// i0 (even, 0 <= i0 < n_rot), given theta_extrap = pos * base^(-i0/n_rot) /
// freq_factor. T is float on GPUs and double in the CPU reference.
template <typename T>
RF_HOST_DEVICE inline void rope_cos_sin(T theta_extrap, int i0, const RopeParams& p, YarnCorrDims corr, T* c,
                                        T* s) {
  const T theta_interp = T(p.freq_scale) * theta_extrap;
  T theta = theta_interp;
  T mscale = T(p.attn_factor);
  if (p.ext_factor != 0.0f) {
    const T mix = yarn_ramp<T>(corr.low, corr.high, i0) * T(p.ext_factor);
    theta = theta_interp * (T(1) - mix) + theta_extrap * mix;
    mscale *= T(1) + T(0.1) * log(T(1) / T(p.freq_scale));
  }
  *c = cos(theta) * mscale;
  *s = sin(theta) * mscale;
}

// The same rotation as GPU kernels work it out: pair i0's angle rate
// (base^(-i0/n_rot) / its factor, times linear scaling and YaRN's mix) in
// double once a pair, then at each position the angle pos * rate reduced
// to [-pi, pi] in double and its cos/sin in float. (Past 100K positions the
// angle is ~1e5 rad: a float angle or rate would be off by ~1e-2 rad.)
RF_HOST_DEVICE inline double rope_rate(int i0, const RopeParams& p, YarnCorrDims corr) {
  double rate = pow(double(p.freq_base), -double(i0) / double(p.n_rot));
  if (p.freq_factors) rate /= double(p.freq_factors[i0 / 2]);
  double mul = double(p.freq_scale);
  if (p.ext_factor != 0.0f) {
    const double mix = yarn_ramp<double>(corr.low, corr.high, i0) * double(p.ext_factor);
    mul = mul * (1.0 - mix) + mix;
  }
  return rate * mul;
}

RF_HOST_DEVICE inline float rope_mscale(const RopeParams& p) {
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * logf(1.0f / p.freq_scale);
  return mscale;
}

RF_HOST_DEVICE inline void rope_cos_sin_at(int pos, double rate, float mscale, float* c, float* s) {
  constexpr double kTwoPi = 6.283185307179586476925;
  double theta = double(pos) * rate;
  theta -= kTwoPi * rint(theta * (1.0 / kTwoPi));
  const float t = float(theta);
  *c = cosf(t) * mscale;
  *s = sinf(t) * mscale;
}

}  // namespace rf
