// Row and element kernels: embedding lookup (any weight format -> f32),
// RMSNorm (f32 in, f16/f32 out), SwiGLU, residual add, row gather, and
// conversions. One block per row for the row ops; reductions use the
// target's warp size.
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"

namespace rf::gpu {
namespace {

template <DType T>
__global__ void embed_kernel(const uint8_t* __restrict__ table, size_t row_bytes, int cols, const int32_t* ids,
                             int vocab, float* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x;
  int id = ids[t];
  if (id < 0 || id >= vocab) id = 0;  // validated on the host; never read out of bounds
  const uint8_t* row = table + size_t(id) * row_bytes;
  float* o = out + size_t(t) * cols;
  if (cols % 32 == 0) {
    for (int sb = threadIdx.x; sb < cols / 32; sb += blockDim.x) {
      float v[32];
      WeightFormat<T>::load32(row, sb, v);
#pragma unroll
      for (int i = 0; i < 32; ++i) o[sb * 32 + i] = v[i];
    }
  } else if constexpr (T == DType::F32) {
    for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = reinterpret_cast<const float*>(row)[i];
  } else if constexpr (T == DType::F16) {
    for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = h2f(ld16(row + 2 * i));
  } else if constexpr (T == DType::BF16) {
    for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = __uint_as_float(uint32_t(ld16(row + 2 * i)) << 16);
  }
}

template <typename OutT>
__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, OutT* __restrict__ out,
                                int cols, float eps) {
  pdl_wait();
  pdl_trigger();
  __shared__ float scratch[32];
  const float* xr = x + size_t(blockIdx.x) * cols;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss, scratch);
  const float scale = rsqrtf(ss / float(cols) + eps);
  OutT* o = out + size_t(blockIdx.x) * cols;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = from_float<OutT>(xr[i] * scale * w[i]);
}

// Residual add and the next RMSNorm in one pass over the row. With kRegs
// (decode: few rows, each a whole block), rows of up to kNormPerThread
// elements per thread keep their values in registers and the norm weights
// (constant) are loaded before waiting on the previous kernel: one round
// trip to memory after the wait instead of three (batch-1 f16 decode
// 211.7 -> 218.7 tok/s on the H200). Many rows (prefill) keep the loop,
// whose fewer registers let two 1024-thread blocks share an SM.
constexpr int kNormPerThread = 8;

template <typename OutT, bool kRegs>
__global__ void add_rms_norm_kernel(float* __restrict__ x, const __half* __restrict__ y, const float* __restrict__ w,
                                    OutT* __restrict__ out, int cols, float eps) {
  __shared__ float scratch[32];
  float* xr = x + size_t(blockIdx.x) * cols;
  const __half* yr = y + size_t(blockIdx.x) * cols;
  OutT* o = out + size_t(blockIdx.x) * cols;
  if (kRegs && cols <= kNormPerThread * int(blockDim.x)) {
    float wv[kNormPerThread], v[kNormPerThread];
#pragma unroll
    for (int j = 0; j < kNormPerThread; ++j) {
      const int i = threadIdx.x + j * blockDim.x;
      wv[j] = i < cols ? w[i] : 0.0f;
    }
    pdl_wait();
    pdl_trigger();
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < kNormPerThread; ++j) {
      const int i = threadIdx.x + j * blockDim.x;
      v[j] = i < cols ? xr[i] + __half2float(yr[i]) : 0.0f;
      ss += v[j] * v[j];
    }
#pragma unroll
    for (int j = 0; j < kNormPerThread; ++j) {
      const int i = threadIdx.x + j * blockDim.x;
      if (i < cols) xr[i] = v[j];
    }
    ss = block_sum(ss, scratch);
    const float scale = rsqrtf(ss / float(cols) + eps);
#pragma unroll
    for (int j = 0; j < kNormPerThread; ++j) {
      const int i = threadIdx.x + j * blockDim.x;
      if (i < cols) o[i] = from_float<OutT>(v[j] * scale * wv[j]);
    }
    return;
  }
  pdl_wait();
  pdl_trigger();
  float ss = 0.0f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    const float v = xr[i] + __half2float(yr[i]);
    xr[i] = v;
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float scale = rsqrtf(ss / float(cols) + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = from_float<OutT>(xr[i] * scale * w[i]);
}

__global__ void swiglu_kernel(const __half* __restrict__ g, const __half* __restrict__ u, __half* __restrict__ o,
                              int64_t n) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float a = __half2float(g[i]);
    o[i] = __float2half_rn(a / (1.0f + __expf(-a)) * __half2float(u[i]));
  }
}

__global__ void add_kernel(float* __restrict__ x, const __half* __restrict__ y, int64_t n) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] += __half2float(y[i]);
}

__global__ void gather_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows, int cols,
                              float* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const float* src = x + size_t(rows[blockIdx.x]) * cols;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) out[size_t(blockIdx.x) * cols + i] = src[i];
}

__global__ void f32_to_f16_kernel(const float* __restrict__ x, __half* __restrict__ o, int64_t n) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    o[i] = __float2half_rn(x[i]);
}

unsigned grid_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return unsigned(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

}  // namespace

void embed_rows(DType type, const void* table, size_t row_bytes, int cols, const int32_t* ids, int n, int vocab,
                float* out, const LaunchCtx& ctx) {
  if (n == 0) return;
  switch (type) {
#define RF_CASE(T)                                                                                              \
  case DType::T:                                                                                                \
    launch(embed_kernel<DType::T>, n, 128, 0, ctx, static_cast<const uint8_t*>(table), row_bytes, cols, ids, vocab, out); \
    break;
    RF_FOR_EACH_WEIGHT_FORMAT(RF_CASE)
#undef RF_CASE
    default: fail("cuda embed: type ", dtype_name(type), " is not supported");
  }
  RF_GPU_CHECK_LAUNCH();
}

void rms_norm(const float* x, const float* w, void* out, DType out_type, int rows, int cols, float eps,
              const LaunchCtx& ctx) {
  if (rows == 0) return;
  const int threads = cols >= 1024 ? 1024 : (cols >= 256 ? 256 : 64);
  if (out_type == DType::F32)
    launch(rms_norm_kernel<float>, rows, threads, 0, ctx, x, w, static_cast<float*>(out), cols, eps);
  else
    launch(rms_norm_kernel<__half>, rows, threads, 0, ctx, x, w, static_cast<__half*>(out), cols, eps);
  RF_GPU_CHECK_LAUNCH();
}

void add_rms_norm(float* x, const void* y, const float* w, void* out, DType out_type, int rows, int cols, float eps,
                  const LaunchCtx& ctx) {
  if (rows == 0) return;
  const int threads = cols >= 1024 ? 1024 : (cols >= 256 ? 256 : 64);
  const auto* yh = static_cast<const __half*>(y);
  const bool regs = rows <= 64;
  if (out_type == DType::F32) {
    auto* o = static_cast<float*>(out);
    if (regs) launch(add_rms_norm_kernel<float, true>, rows, threads, 0, ctx, x, yh, w, o, cols, eps);
    else launch(add_rms_norm_kernel<float, false>, rows, threads, 0, ctx, x, yh, w, o, cols, eps);
  } else {
    auto* o = static_cast<__half*>(out);
    if (regs) launch(add_rms_norm_kernel<__half, true>, rows, threads, 0, ctx, x, yh, w, o, cols, eps);
    else launch(add_rms_norm_kernel<__half, false>, rows, threads, 0, ctx, x, yh, w, o, cols, eps);
  }
  RF_GPU_CHECK_LAUNCH();
}

void swiglu(const void* gate, const void* up, void* out, int64_t n, const LaunchCtx& ctx) {
  if (n == 0) return;
  launch(swiglu_kernel, grid_for(n, 256), 256, 0, ctx, static_cast<const __half*>(gate), static_cast<const __half*>(up),
                                                 static_cast<__half*>(out), n);
  RF_GPU_CHECK_LAUNCH();
}

void add_f16_to_f32(float* x, const void* y, int64_t n, const LaunchCtx& ctx) {
  if (n == 0) return;
  launch(add_kernel, grid_for(n, 256), 256, 0, ctx, x, static_cast<const __half*>(y), n);
  RF_GPU_CHECK_LAUNCH();
}

void gather_rows_f32(const float* x, const int32_t* rows, int n_rows, int cols, float* out, const LaunchCtx& ctx) {
  if (n_rows == 0) return;
  launch(gather_kernel, n_rows, 256, 0, ctx, x, rows, cols, out);
  RF_GPU_CHECK_LAUNCH();
}

void f32_to_f16(const float* x, void* out, int64_t n, const LaunchCtx& ctx) {
  if (n == 0) return;
  launch(f32_to_f16_kernel, grid_for(n, 256), 256, 0, ctx, x, static_cast<__half*>(out), n);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
