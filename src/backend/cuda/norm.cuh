// Device helpers shared by the kernels that end in the residual add and the
// next RMSNorm (norm.cu's add_rms_norm, peer_all_reduce.cu's fused
// all-reduce): one row, the block's threads together.
#pragma once

#include "backend/cuda/gpu.h"

namespace rf::gpu {

// xr += y (first RMS-normed with wy when kNormY, rounded to f16 as a stored
// activation would be); o = xr / rms(xr) * w. `scratch` holds one float per
// warp.
template <typename OutT, bool kNormY>
__device__ __forceinline__ void add_rms_norm_row(float* __restrict__ xr, const __half* __restrict__ yr,
                                                 const float* __restrict__ wy, const float* __restrict__ w,
                                                 OutT* __restrict__ o, int cols, float eps, float* scratch) {
  float scale_y = 1.0f;
  if constexpr (kNormY) {
    float ssy = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
      const float u = __half2float(yr[i]);
      ssy += u * u;
    }
    ssy = block_sum(ssy, scratch);
    scale_y = rsqrtf(ssy / float(cols) + eps);
  }
  float ss = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    float u = __half2float(yr[i]);
    if constexpr (kNormY) u = __half2float(__float2half_rn(u * scale_y * wy[i]));
    const float v = xr[i] + u;
    xr[i] = v;
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float scale = rsqrtf(ss / float(cols) + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = from_float<OutT>(xr[i] * scale * w[i]);
}

}  // namespace rf::gpu
