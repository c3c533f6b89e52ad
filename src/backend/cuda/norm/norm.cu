// RMSNorm (f32 or f16 in, f16/f32 out) and the residual add (of a row
// optionally post-normed first) fused with the next RMSNorm: one block per
// row, reductions with the target's warp size. The add + RMSNorm of one row
// may also write the row's 8-bit quants for the GEMV after it
// (Fusions::act_q8).
#include <type_traits>

#include "backend/cuda/norm/norm.cuh"

namespace rf::gpu {
namespace {

// One row: o = xr / rms(xr) * w (the block's threads together).
template <typename InT, typename OutT>
__device__ __forceinline__ void rms_norm_row(const InT* __restrict__ xr, const float* __restrict__ w,
                                             OutT* __restrict__ o, int cols, float eps, float* scratch) {
  float ss = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    const float v = to_float(xr[i]);
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float scale = rsqrtf(ss / float(cols) + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = from_float<OutT>(to_float(xr[i]) * scale * w[i]);
}

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

// Threads per row block: up to kNormMaxThreads, which every norm kernel
// declares as its launch bound (a 1024-thread block may use at most 64
// registers a thread; without the bound the add + RMSNorm with post norm
// and 8-bit outputs would take 68 and fail to launch for rows >= 1024
// wide).
constexpr int kNormMaxThreads = 1024;
int norm_threads(int cols) { return cols >= 1024 ? kNormMaxThreads : (cols >= 256 ? 256 : 64); }

// Two RMSNorms of rows of the same width in one launch (the per-head norms
// of q and k): blocks [0, rows_a) take a's rows, the rest b's.
__global__ void __launch_bounds__(kNormMaxThreads) rms_norm_pair_kernel(const __half* __restrict__ a, const float* __restrict__ wa,
                                     __half* __restrict__ a_out, int rows_a, const __half* __restrict__ b,
                                     const float* __restrict__ wb, __half* __restrict__ b_out, int cols, float eps) {
  pdl_wait();
  pdl_trigger();
  __shared__ float scratch[32];
  const bool first = int(blockIdx.x) < rows_a;
  const size_t row = first ? blockIdx.x : blockIdx.x - rows_a;
  if (first) rms_norm_row(a + row * cols, wa, a_out + row * cols, cols, eps, scratch);
  else rms_norm_row(b + row * cols, wb, b_out + row * cols, cols, eps, scratch);
}

template <typename InT, typename OutT>
__global__ void __launch_bounds__(kNormMaxThreads) rms_norm_kernel(const InT* __restrict__ x, const float* __restrict__ w, OutT* __restrict__ out,
                                int cols, float eps) {
  pdl_wait();
  pdl_trigger();
  __shared__ float scratch[32];
  rms_norm_row(x + size_t(blockIdx.x) * cols, w, out + size_t(blockIdx.x) * cols, cols, eps, scratch);
}

// Residual add and the next RMSNorm in one pass over the row; with kNormY
// the added row is first post-normed (y / rms(y) * wy, rounded to f16 as a
// separate rms_norm would store it). With kRegs (decode: few rows, each a
// whole block), rows of up to kNormPerThread elements per thread keep their
// values in registers and the norm weights (constant) are loaded before
// waiting on the previous kernel: one round trip to memory after the wait
// instead of three (the residual row loads beside the added one, not
// after the post norm's sum).
// Many rows (prefill): rows of up to 4 elements a thread keep them in
// registers too, bounded to 32 registers so that two 1024-thread blocks
// share an SM (the 8-element variant holds one); longer rows and the
// post-normed add keep the loop. Every variant sums a row in the same
// order (thread i: elements i, i + blockDim.x, ...), so a row's result does
// not depend on how many rows share the launch.
constexpr int kNormPerThread = 8;

// The residual add + RMSNorm kernel (above). With xq (one row, f16 out, cols a multiple of 32, kRegs): the row's 8-bit
// quants and scales too (act_q8's layout; Fusions::act_q8), for
// the quantized GEMV after it.
template <typename OutT, bool kRegs, bool kNormY, int kPer = kNormPerThread, int kMinBlocks = 1>
__global__ void __launch_bounds__(kNormMaxThreads, kMinBlocks) add_rms_norm_kernel(float* __restrict__ x, const __half* __restrict__ y, const float* __restrict__ wy,
                                    const float* __restrict__ w, OutT* __restrict__ out, int cols, float eps,
                                    int8_t* __restrict__ xq, float2* __restrict__ xds) {
  __shared__ float scratch[32];
  float* xr = x + size_t(blockIdx.x) * cols;
  const __half* yr = y + size_t(blockIdx.x) * cols;
  OutT* o = out + size_t(blockIdx.x) * cols;
  if (kRegs && cols <= kPer * int(blockDim.x)) {
    float wv[kPer], wyv[kPer], xv[kPer], v[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = threadIdx.x + j * blockDim.x;
      wv[j] = i < cols ? w[i] : 0.0f;
      if constexpr (kNormY) wyv[j] = i < cols ? wy[i] : 0.0f;
    }
    pdl_wait();
    pdl_trigger();
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = threadIdx.x + j * blockDim.x;
      v[j] = i < cols ? __half2float(yr[i]) : 0.0f;
      xv[j] = i < cols ? xr[i] : 0.0f;
    }
    if constexpr (kNormY) {
      float ssy = 0.0f;
#pragma unroll
      for (int j = 0; j < kPer; ++j) ssy += v[j] * v[j];
      ssy = block_sum(ssy, scratch);
      const float scale_y = rsqrtf(ssy / float(cols) + eps);
#pragma unroll
      for (int j = 0; j < kPer; ++j) v[j] = __half2float(__float2half_rn(v[j] * scale_y * wyv[j]));
    }
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = threadIdx.x + j * blockDim.x;
      v[j] = i < cols ? xv[j] + v[j] : 0.0f;
      ss += v[j] * v[j];
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = threadIdx.x + j * blockDim.x;
      if (i < cols) xr[i] = v[j];
    }
    ss = block_sum(ss, scratch);
    const float scale = rsqrtf(ss / float(cols) + eps);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = threadIdx.x + j * blockDim.x;
      if (i < cols) o[i] = from_float<OutT>(v[j] * scale * wv[j]);
    }
    if constexpr (std::is_same_v<OutT, __half>) {
      if (xq) {
        // Elements i of one 32-lane group are 32 consecutive ones (blockDim
        // and cols multiples of 32), all in range or all past it.
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int i = threadIdx.x + j * blockDim.x;
          if (i < cols) quantize32_q8(__half2float(__float2half_rn(v[j] * scale * wv[j])), i, xq, xds);
        }
      }
    }
    return;
  }
  pdl_wait();
  pdl_trigger();
  add_rms_norm_row<OutT, kNormY>(xr, yr, wy, w, o, cols, eps, scratch);
}

template <typename OutT, bool kNormY>
void launch_add_rms_norm(float* x, const __half* y, const float* wy, const float* w, OutT* o, int rows, int cols,
                         float eps, const LaunchCtx& ctx) {
  const int threads = norm_threads(cols);
  // One f16 row whose GEMV reads 8-bit quants: the norm writes them.
  const bool q8 = std::is_same_v<OutT, __half> && act_q8_fusable(ctx, rows, cols) && threads % 32 == 0 &&
                  cols <= kNormPerThread * threads;
  int8_t* xq = q8 ? act_q8_quants(ctx.act_q8) : nullptr;
  float2* xds = q8 ? act_q8_scales(ctx.act_q8) : nullptr;
  if (rows <= 64)
    launch(add_rms_norm_kernel<OutT, true, kNormY>, rows, threads, 0, ctx, x, y, wy, w, o, cols, eps, xq, xds);
  else if (!kNormY && cols <= 4 * threads)
    launch(add_rms_norm_kernel<OutT, true, kNormY, 4, 2>, rows, threads, 0, ctx, x, y, wy, w, o, cols, eps, xq, xds);
  else
    launch(add_rms_norm_kernel<OutT, false, kNormY>, rows, threads, 0, ctx, x, y, wy, w, o, cols, eps, xq, xds);
  if (q8) act_q8_record(ctx, o, cols);
}

}  // namespace

void rms_norm(const void* x, DType in_type, const float* w, void* out, DType out_type, int rows, int cols, float eps,
              const LaunchCtx& ctx) {
  if (rows == 0) return;
  const int threads = norm_threads(cols);
  if (in_type == DType::F32) {
    const auto* xf = static_cast<const float*>(x);
    if (out_type == DType::F32)
      launch(rms_norm_kernel<float, float>, rows, threads, 0, ctx, xf, w, static_cast<float*>(out), cols, eps);
    else
      launch(rms_norm_kernel<float, __half>, rows, threads, 0, ctx, xf, w, static_cast<__half*>(out), cols, eps);
  } else {
    const auto* xh = static_cast<const __half*>(x);
    if (out_type == DType::F32)
      launch(rms_norm_kernel<__half, float>, rows, threads, 0, ctx, xh, w, static_cast<float*>(out), cols, eps);
    else
      launch(rms_norm_kernel<__half, __half>, rows, threads, 0, ctx, xh, w, static_cast<__half*>(out), cols, eps);
  }
  RF_GPU_CHECK_LAUNCH();
}

void rms_norm_pair_f16(const void* a, const float* wa, void* a_out, int rows_a, const void* b, const float* wb,
                       void* b_out, int rows_b, int cols, float eps, const LaunchCtx& ctx) {
  if (rows_a + rows_b == 0) return;
  launch(rms_norm_pair_kernel, rows_a + rows_b, norm_threads(cols), 0, ctx, static_cast<const __half*>(a), wa,
         static_cast<__half*>(a_out), rows_a, static_cast<const __half*>(b), wb, static_cast<__half*>(b_out), cols,
         eps);
  RF_GPU_CHECK_LAUNCH();
}

void add_rms_norm(float* x, const void* y, const float* wy, const float* w, void* out, DType out_type, int rows,
                  int cols, float eps, const LaunchCtx& ctx) {
  if (rows == 0) return;
  const auto* yh = static_cast<const __half*>(y);
  if (out_type == DType::F32) {
    auto* o = static_cast<float*>(out);
    if (wy) launch_add_rms_norm<float, true>(x, yh, wy, w, o, rows, cols, eps, ctx);
    else launch_add_rms_norm<float, false>(x, yh, wy, w, o, rows, cols, eps, ctx);
  } else {
    auto* o = static_cast<__half*>(out);
    if (wy) launch_add_rms_norm<__half, true>(x, yh, wy, w, o, rows, cols, eps, ctx);
    else launch_add_rms_norm<__half, false>(x, yh, wy, w, o, rows, cols, eps, ctx);
  }
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
