// The gates of hybrid models: the gated RMSNorm of Gated DeltaNet outputs
// (a warp per head segment of the f32 delta-rule output: the RMS over the
// segment, then times the norm weight and silu(z), into f16) and sigmoid
// gating (the gated attention output, the shared expert's scalar gate),
// elementwise; sigmoid gating may write over x: each element is read by
// the thread that writes it, before it writes it.
#include <algorithm>

#include "backend/cuda/deltanet/deltanet.cuh"

namespace rf::gpu {
namespace {

constexpr int kNormWarps = 4;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void __launch_bounds__(kNormWarps * RF_WARP_SIZE)
    gated_rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, const __half* __restrict__ z,
                          __half* __restrict__ out,
                          int64_t n_segs, int seg, float eps) {
  constexpr int W = RF_WARP_SIZE;
  pdl_wait();
  pdl_trigger();
  const int lane = int(threadIdx.x) % W;
  const int64_t sg = int64_t(blockIdx.x) * kNormWarps + int64_t(threadIdx.x) / W;
  if (sg >= n_segs) return;
  const float* xs = x + sg * seg;
  const __half* zs = z + sg * seg;
  __half* o = out + sg * seg;
  float ss = 0.0f;
  for (int i = lane; i < seg; i += W) {
    const float v = xs[i];
    ss = fmaf(v, v, ss);
  }
  const float scale = rsqrtf(warp_sum(ss) / float(seg) + eps);
  for (int i = lane; i < seg; i += W) {
    const float zi = __half2float(zs[i]);
    o[i] = __float2half_rn(xs[i] * scale * w[i] * (zi * sigmoid(zi)));
  }
}

__global__ void sigmoid_mul_kernel(const __half* x, const __half* __restrict__ gate, bool per_row, __half* out,
                                   int64_t n, int cols) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = __half2float(gate[per_row ? i / cols : i]);
    out[i] = __float2half_rn(__half2float(x[i]) * sigmoid(g));
  }
}

}  // namespace

void gated_rms_norm(const void* x, const float* w, const void* z, void* out, int64_t rows, int cols, int seg,
                    float eps, const LaunchCtx& ctx) {
  const int64_t n_segs = rows * (cols / seg);
  if (n_segs == 0) return;
  launch(gated_rms_norm_kernel, unsigned((n_segs + kNormWarps - 1) / kNormWarps), unsigned(kNormWarps * ctx.warp_size),
         0, ctx, static_cast<const float*>(x), w, static_cast<const __half*>(z), static_cast<__half*>(out), n_segs,
         seg, eps);
}

void sigmoid_mul(const void* x, const void* gate, bool per_row, void* out, int64_t rows, int cols,
                 const LaunchCtx& ctx) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(65535) * 16);
  launch(sigmoid_mul_kernel, unsigned(blocks), kThreads, 0, ctx, static_cast<const __half*>(x),
         static_cast<const __half*>(gate), per_row, static_cast<__half*>(out), n, cols);
}

}  // namespace rf::gpu
