// Tiled f16 GEMM (f32 accumulation): out[n, m] = x[n, k] . w[m, k]^T with
// output row stride ldo. The BLAS where no vendor BLAS exists (Debian's HIP:
// blas_tiled.cpp); on CDNA targets on the matrix cores (mfma_tile.h).
#include "backend/cuda/matmul/matmul.cuh"
#include "backend/cuda/matmul/mfma_tile.h"

namespace rf::gpu {
namespace {

// A 64x64 output tile per block of 256 threads: on CDNA targets through
// the matrix cores (mfma_tile.h), elsewhere 4x4 per thread.
constexpr int kTile = 64;
[[maybe_unused]] constexpr int kTileK = 16;  // the plain variant's k step
static_assert(kTile == mfma::kTile, "both variants launch the same grid");
template <typename OutT>
__global__ void __launch_bounds__(256) gemm_tiled_kernel(const __half* __restrict__ x, const __half* __restrict__ w,
                                                          OutT* __restrict__ out, int n, int m, int k, int ldo) {
  pdl_wait();
  pdl_trigger();
#if defined(RF_MFMA)
  __shared__ float xs_m[mfma::kTile * mfma::kStepK], ws_m[mfma::kTile * mfma::kStepK];
  HwLanes lanes;
  mfma::gemm_tile(
      xs_m, ws_m, int(blockIdx.y) * kTile, int(blockIdx.x) * kTile, n, m, k,
      [&](int r, int c) { return __half2float(x[size_t(r) * k + c]); },
      [&](int r, int c) { return __half2float(w[size_t(r) * k + c]); },
      [&](int r, int c, float v) { out[size_t(r) * ldo + c] = from_float<OutT>(v); }, lanes);
#else
  __shared__ float xs[kTileK][kTile + 1];
  __shared__ float ws[kTileK][kTile + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int n0 = blockIdx.y * kTile, m0 = blockIdx.x * kTile;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < k; k0 += kTileK) {
    for (int i = threadIdx.x; i < kTile * kTileK; i += 256) {
      const int r = i / kTileK, c = i % kTileK;
      xs[c][r] = (n0 + r < n && k0 + c < k) ? __half2float(x[size_t(n0 + r) * k + k0 + c]) : 0.0f;
      ws[c][r] = (m0 + r < m && k0 + c < k) ? __half2float(w[size_t(m0 + r) * k + k0 + c]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kTileK; ++c) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = xs[c][ty * 4 + i];
        b[i] = ws[c][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = n0 + ty * 4 + i, c = m0 + tx * 4 + j;
      if (r < n && c < m) out[size_t(r) * ldo + c] = from_float<OutT>(acc[i][j]);
    }
#endif
}

}  // namespace

void gemm_f16_tiled(const void* x, const void* w, void* out, DType out_type, int n, int m, int k, int ldo,
                    const LaunchCtx& ctx) {
  const dim3 grid((m + kTile - 1) / kTile, (n + kTile - 1) / kTile);
  if (out_type == DType::F32)
    launch(gemm_tiled_kernel<float>, grid, 256, 0, ctx, static_cast<const __half*>(x), static_cast<const __half*>(w),
           static_cast<float*>(out), n, m, k, ldo);
  else
    launch(gemm_tiled_kernel<__half>, grid, 256, 0, ctx, static_cast<const __half*>(x), static_cast<const __half*>(w),
           static_cast<__half*>(out), n, m, k, ldo);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
