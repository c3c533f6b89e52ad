// The pieces around an FP8 tensor-core matmul on FP8 weights (F8_E4M3_ROW,
// core/dtype.h): activation rows quantized to e4m3 with one scale per row
// (quantize_act_e4m3, core/fp8.h's encoding, as the CPU would), and the
// weights' row scales gathered from their row headers into one vector
// (gather_f8_row_scales). The GEMM itself is the BLAS wrapper's gemm_fp8.
#include "backend/cuda/matmul/matmul.cuh"
#include "core/fp8.h"

namespace rf::gpu {
namespace {

constexpr int kActThreads = 256;

// One block per row: the row's largest magnitude, then its codes.
__global__ void __launch_bounds__(kActThreads)
    quantize_act_e4m3_kernel(const __half* __restrict__ x, int k, uint8_t* __restrict__ xq, float* __restrict__ scale) {
  pdl_wait();
  pdl_trigger();
  const __half* row = x + size_t(blockIdx.x) * k;
  float amax = 0.0f;
  for (int i = threadIdx.x; i < k; i += kActThreads) {
    const float v = __half2float(row[i]);
    amax = v != v || amax != amax ? NAN : fmaxf(amax, fabsf(v));
  }
  // A NaN anywhere makes the row's maximum NaN (so the row reads back NaN).
  __shared__ float part[kActThreads];
  part[threadIdx.x] = amax;
  __syncthreads();
  for (int half = kActThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) {
      const float a = part[threadIdx.x], b = part[threadIdx.x + half];
      part[threadIdx.x] = a != a || b != b ? NAN : fmaxf(a, b);
    }
    __syncthreads();
  }
  amax = part[0];
  const float s = e4m3_row_scale(amax);
  if (threadIdx.x == 0) scale[blockIdx.x] = s;
  uint8_t* out = xq + size_t(blockIdx.x) * k;
  for (int i = threadIdx.x; i < k; i += kActThreads) out[i] = e4m3_from_float(__half2float(row[i]) / s);
}

__global__ void gather_f8_row_scales_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int m,
                                            float* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < m) out[r] = *reinterpret_cast<const float*>(w + size_t(r) * row_bytes);
}

}  // namespace

void quantize_act_e4m3(const void* x, int n, int k, void* xq, float* scale, const LaunchCtx& ctx) {
  if (n == 0) return;
  launch(quantize_act_e4m3_kernel, unsigned(n), unsigned(kActThreads), 0, ctx, static_cast<const __half*>(x), k,
         static_cast<uint8_t*>(xq), scale);
  RF_GPU_CHECK_LAUNCH();
}

void gather_f8_row_scales(const void* w, size_t row_bytes, int m, float* out, const LaunchCtx& ctx) {
  if (m == 0) return;
  launch(gather_f8_row_scales_kernel, unsigned((m + 255) / 256), 256u, 0, ctx, static_cast<const uint8_t*>(w),
         row_bytes, m, out);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
