// Row and element kernels: embedding lookup (any weight format -> f32),
// SwiGLU, GeGLU and gpt-oss's clamped SwiGLU, bias add (f16 and f32 rows), column split (packed q/k/v outputs), scale,
// columns scaled by a norm's gain (folded into f16 weights at load),
// soft-capping, residual add, row gather and the f32 -> f16 conversion. One block
// per row for the row ops, grid-stride loops for the element ops. (The
// norms are in norm.cu.)
#include <algorithm>
#include <cstdint>

#include "backend/cuda/elementwise/elementwise.cuh"
#include "backend/cuda/elementwise/glu.cuh"
#include "backend/cuda/matmul/dequant.cuh"

namespace rf::gpu {
namespace {

template <DType T>
__global__ void embed_kernel(const uint8_t* __restrict__ table, size_t row_bytes, int cols, const int32_t* ids,
                             int first, int vocab, bool zero_outside, float* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x;
  int id = ids[t] - first;
  float* o = out + size_t(t) * cols;
  if (id < 0 || id >= vocab) {
    if (zero_outside) {  // another rank's row (tensor parallel): this rank adds zeros
      for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = 0.0f;
      return;
    }
    id = 0;  // validated on the host; never read out of bounds
  }
  const uint8_t* row = table + size_t(id) * row_bytes;
  if (cols % 32 == 0) {
    for (int sb = threadIdx.x; sb < cols / 32; sb += blockDim.x) {
      float v[32];
      WeightFormat<T>::load32(row, sb, v);
      // 16-byte stores (rows a multiple of 32 floats wide stay 128-byte
      // aligned): a warp's store then fills half of each 32-byte sector it
      // touches, not an eighth.
      float4* o4 = reinterpret_cast<float4*>(o + sb * 32);
#pragma unroll
      for (int i = 0; i < 8; ++i) o4[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
    }
  } else if constexpr (kPlain<T>) {
    for (int i = threadIdx.x; i < cols; i += blockDim.x) o[i] = load1<T>(row, i);
  }
}

// act(gate) * up for `rows` rows of `cols` values: row r's gate values at
// gate + r * in_stride, its up values at up + r * in_stride, its outputs at
// out + r * cols (SwiGLU, GeGLU or gpt-oss's clamped SwiGLU: glu_act). kVec
// values a thread: 8 (16-byte loads and stores) where the widths and
// addresses allow, else 1.
template <int kVec>
__global__ void glu_kernel(const __half* __restrict__ gate, const __half* __restrict__ up, int64_t in_stride,
                           int64_t cols, __half* __restrict__ out, int64_t rows, Activation act) {
  pdl_wait();
  pdl_trigger();
  const int64_t c0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  if (c0 >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t in = r * in_stride + c0;
    __half g[kVec], u[kVec], o[kVec];
    if constexpr (kVec == 8) {
      *reinterpret_cast<uint4*>(g) = *reinterpret_cast<const uint4*>(gate + in);
      *reinterpret_cast<uint4*>(u) = *reinterpret_cast<const uint4*>(up + in);
    } else {
      g[0] = gate[in];
      u[0] = up[in];
    }
#pragma unroll
    for (int i = 0; i < kVec; ++i) o[i] = __float2half_rn(glu_act(__half2float(g[i]), __half2float(u[i]), act));
    if constexpr (kVec == 8) *reinterpret_cast<uint4*>(out + r * cols + c0) = *reinterpret_cast<const uint4*>(o);
    else out[r * cols + c0] = o[0];
  }
}

// Packed GLU input (gate_up: each row holds its ff gate values, then its ff
// up values; 9..256 rows, Fusions::packed_gate_up): grid-stride over
// the output in pieces of kVec values (8: 16-byte loads and stores where ff
// and the addresses allow), 32-bit index arithmetic. (glu_kernel<8>'s grid
// of a block per 2048 columns per row is the faster kernel alone but
// slower inside the batched decode graph on the tensor-core matmuls.)
template <int kVec>
__global__ void glu_packed_kernel(const __half* __restrict__ gu, uint32_t rows, uint32_t ff, __half* __restrict__ o,
                                  bool gelu) {
  pdl_wait();
  pdl_trigger();
  const uint32_t pieces = ff / kVec, n = rows * pieces;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const uint32_t t = i / pieces, c = (i - t * pieces) * kVec;
    const __half* g_row = gu + size_t(t) * 2 * ff + c;
    __half g[kVec], u[kVec], out[kVec];
    if constexpr (kVec == 8) {
      *reinterpret_cast<uint4*>(g) = *reinterpret_cast<const uint4*>(g_row);
      *reinterpret_cast<uint4*>(u) = *reinterpret_cast<const uint4*>(g_row + ff);
    } else {
      g[0] = g_row[0];
      u[0] = g_row[ff];
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float a = __half2float(g[j]);
      out[j] = __float2half_rn((gelu ? gelu_tanh_f16(a) : silu(a)) * __half2float(u[j]));
    }
    if constexpr (kVec == 8) *reinterpret_cast<uint4*>(o + size_t(t) * ff + c) = *reinterpret_cast<const uint4*>(out);
    else o[size_t(t) * ff + c] = out[0];
  }
}

__global__ void add_bias_kernel(__half* __restrict__ x, const float* __restrict__ bias, int64_t n, int cols) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = __float2half_rn(__half2float(x[i]) + bias[i % cols]);
}

__global__ void add_bias_f32_kernel(float* __restrict__ x, const float* __restrict__ bias, int64_t n, int cols) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] += bias[i % cols];
}

// Row t = blockIdx.y's columns of `src` (width `width`) in groups of eight
// halves (a group a thread, blockIdx.x: which 256 groups), each group to
// the segment holding it, plus its bias.
__global__ void split_columns_kernel(const __half* __restrict__ src, int width, ColumnSegments segs) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.y, c = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (c >= width) return;
  const __half* row = src + size_t(t) * width;
  int s = 0, first = 0;
  while (s + 1 < segs.count && c >= first + segs.cols[s]) first += segs.cols[s++];
  const int col = c - first;
  uint4 v = *reinterpret_cast<const uint4*>(row + c);
  if (const float* b = segs.bias[s]) {
    __half* h = reinterpret_cast<__half*>(&v);
#pragma unroll
    for (int i = 0; i < 8; ++i) h[i] = __float2half_rn(__half2float(h[i]) + b[col + i]);
  }
  *reinterpret_cast<uint4*>(static_cast<__half*>(segs.dst[s]) + size_t(t) * segs.cols[s] + col) = v;
}

__global__ void scale_kernel(float* __restrict__ x, float s, int64_t n) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= s;
}

__global__ void scale_f16_kernel(__half* __restrict__ x, float s, int64_t n) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = __float2half_rn(__half2float(x[i]) * s);
}

// Columns scaled by a norm's gain (f16 rows, in place), or only checked.
template <bool kWrite>
__global__ void scale_columns_f16_kernel(__half* __restrict__ w, int64_t n, int64_t cols,
                                         const float* __restrict__ gain, int* overflow) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = __half2float(w[i]) * gain[i % cols];
    if constexpr (kWrite) w[i] = __float2half(v);
    else if (!(fabsf(v) <= 65504.0f)) *overflow = 1;
  }
}

__global__ void softcap_kernel(float* __restrict__ x, float cap, int64_t n) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = cap * tanhf(x[i] / cap);
}

__global__ void add_kernel(float* __restrict__ x, const __half* __restrict__ y, int64_t n) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] += __half2float(y[i]);
}

__global__ void add_f16_kernel(const __half* a, const __half* b, __half* out, int64_t n) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2half_rn(__half2float(a[i]) + __half2float(b[i]));
}

__global__ void gather_kernel(const uint32_t* __restrict__ x, const int32_t* __restrict__ rows, int words,
                              uint32_t* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const uint32_t* src = x + size_t(rows[blockIdx.x]) * words;
  for (int i = threadIdx.x; i < words; i += blockDim.x) out[size_t(blockIdx.x) * words + i] = src[i];
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
  embed_rows_range(type, table, row_bytes, cols, ids, n, 0, vocab, false, out, ctx);
}

void embed_rows_range(DType type, const void* table, size_t row_bytes, int cols, const int32_t* ids, int n, int first,
                      int vocab, bool zero_outside, float* out, const LaunchCtx& ctx) {
  if (n == 0) return;
  RF_CHECK(cols % 32 != 0 || reinterpret_cast<uintptr_t>(out) % 16 == 0, "embed: output rows not 16-byte aligned");
  switch (type) {
#define RF_CASE(T)                                                                                              \
  case DType::T:                                                                                                \
    launch(embed_kernel<DType::T>, n, 128, 0, ctx, static_cast<const uint8_t*>(table), row_bytes, cols, ids, first, \
           vocab, zero_outside, out);                                                                           \
    break;
    RF_FOR_EACH_WEIGHT_FORMAT(RF_CASE)
#undef RF_CASE
    default: fail("cuda embed: type ", dtype_name(type), " is not supported");
  }
  RF_GPU_CHECK_LAUNCH();
}

namespace {
void launch_glu(const void* gate, const void* up, int64_t in_stride, int64_t cols, void* out, int64_t rows,
                Activation act, const LaunchCtx& ctx) {
  if (rows == 0 || cols == 0) return;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool vec = cols % 8 == 0 && in_stride % 8 == 0 && aligned(gate) && aligned(up) && aligned(out);
  const int vec_len = vec ? 8 : 1;
  const dim3 grid(unsigned((cols / vec_len + 255) / 256), unsigned(std::min<int64_t>(rows, 65535)));
  const auto* g = static_cast<const __half*>(gate);
  const auto* u = static_cast<const __half*>(up);
  auto* o = static_cast<__half*>(out);
  if (vec) launch(glu_kernel<8>, grid, 256, 0, ctx, g, u, in_stride, cols, o, rows, act);
  else launch(glu_kernel<1>, grid, 256, 0, ctx, g, u, in_stride, cols, o, rows, act);
  RF_GPU_CHECK_LAUNCH();
}
}  // namespace

void swiglu(const void* gate, const void* up, void* out, int64_t n, const LaunchCtx& ctx) {
  launch_glu(gate, up, n, n, out, 1, Activation::SiLU, ctx);
}

void geglu(const void* gate, const void* up, void* out, int64_t n, const LaunchCtx& ctx) {
  launch_glu(gate, up, n, n, out, 1, Activation::GeluTanh, ctx);
}

void glu(const void* gate, const void* up, void* out, int64_t n, Activation act, const LaunchCtx& ctx) {
  launch_glu(gate, up, n, n, out, 1, act, ctx);
}

void glu_packed(const void* gate_up, int64_t rows, int ff, void* out, bool gelu, const LaunchCtx& ctx) {
  if (rows == 0 || ff == 0) return;
  RF_CHECK(rows * ff < (int64_t(1) << 31), "glu_packed: ", rows, " rows of ", ff, " are too many");
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const auto* gu = static_cast<const __half*>(gate_up);
  auto* o = static_cast<__half*>(out);
  if (ff % 8 == 0 && aligned(gate_up) && aligned(out))
    launch(glu_packed_kernel<8>, grid_for(rows * ff / 8, 256), 256, 0, ctx, gu, uint32_t(rows), uint32_t(ff), o, gelu);
  else
    launch(glu_packed_kernel<1>, grid_for(rows * ff, 256), 256, 0, ctx, gu, uint32_t(rows), uint32_t(ff), o, gelu);
  RF_GPU_CHECK_LAUNCH();
}

void add_bias_f32(float* x, const float* bias, int64_t rows, int cols, const LaunchCtx& ctx) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  launch(add_bias_f32_kernel, grid_for(n, 256), 256, 0, ctx, x, bias, n, cols);
  RF_GPU_CHECK_LAUNCH();
}

void add_bias_f16(void* x, const float* bias, int64_t rows, int cols, const LaunchCtx& ctx) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  launch(add_bias_kernel, grid_for(n, 256), 256, 0, ctx, static_cast<__half*>(x), bias, n, cols);
  RF_GPU_CHECK_LAUNCH();
}

void split_columns_f16(const void* src, int rows, int width, const ColumnSegments& segs, const LaunchCtx& ctx) {
  int total = 0;
  for (int s = 0; s < segs.count; ++s) {
    RF_CHECK(segs.cols[s] % 8 == 0, "split_columns_f16: segment widths must be multiples of 8");
    total += segs.cols[s];
  }
  RF_CHECK(segs.count >= 1 && segs.count <= ColumnSegments::kMax && total == width,
           "split_columns_f16: segments must cover the row");
  if (rows == 0) return;
  RF_CHECK(rows <= 65535, "split_columns_f16: ", rows, " rows are too many");
  launch(split_columns_kernel, dim3(unsigned((width / 8 + 255) / 256), unsigned(rows)), 256, 0, ctx,
         static_cast<const __half*>(src), width, segs);
  RF_GPU_CHECK_LAUNCH();
}

void scale_f32(float* x, float s, int64_t n, const LaunchCtx& ctx) {
  if (n == 0) return;
  launch(scale_kernel, grid_for(n, 256), 256, 0, ctx, x, s, n);
  RF_GPU_CHECK_LAUNCH();
}

void scale_f16(void* x, float s, int64_t n, const LaunchCtx& ctx) {
  if (n == 0) return;
  launch(scale_f16_kernel, grid_for(n, 256), 256, 0, ctx, static_cast<__half*>(x), s, n);
  RF_GPU_CHECK_LAUNCH();
}

void check_columns_scale_f16(const void* w, int64_t rows, int64_t cols, const float* gain, int* overflow,
                             const LaunchCtx& ctx) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  launch(scale_columns_f16_kernel<false>, grid_for(n, 256), 256, 0, ctx, const_cast<__half*>(static_cast<const __half*>(w)),
         n, cols, gain, overflow);
  RF_GPU_CHECK_LAUNCH();
}

void scale_columns_f16(void* w, int64_t rows, int64_t cols, const float* gain, const LaunchCtx& ctx) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  launch(scale_columns_f16_kernel<true>, grid_for(n, 256), 256, 0, ctx, static_cast<__half*>(w), n, cols, gain,
         static_cast<int*>(nullptr));
  RF_GPU_CHECK_LAUNCH();
}

void softcap_f32(float* x, float cap, int64_t n, const LaunchCtx& ctx) {
  if (n == 0) return;
  launch(softcap_kernel, grid_for(n, 256), 256, 0, ctx, x, cap, n);
  RF_GPU_CHECK_LAUNCH();
}

void add_f16_to_f32(float* x, const void* y, int64_t n, const LaunchCtx& ctx) {
  if (n == 0) return;
  launch(add_kernel, grid_for(n, 256), 256, 0, ctx, x, static_cast<const __half*>(y), n);
  RF_GPU_CHECK_LAUNCH();
}

void add_f16(const void* a, const void* b, void* out, int64_t n, const LaunchCtx& ctx) {
  if (n == 0) return;
  launch(add_f16_kernel, grid_for(n, 256), 256, 0, ctx, static_cast<const __half*>(a), static_cast<const __half*>(b),
         static_cast<__half*>(out), n);
  RF_GPU_CHECK_LAUNCH();
}

void gather_rows(const void* x, const int32_t* rows, int n_rows, int row_words, void* out, const LaunchCtx& ctx) {
  if (n_rows == 0) return;
  launch(gather_kernel, n_rows, 256, 0, ctx, static_cast<const uint32_t*>(x), rows, row_words,
         static_cast<uint32_t*>(out));
  RF_GPU_CHECK_LAUNCH();
}

void f32_to_f16(const float* x, void* out, int64_t n, const LaunchCtx& ctx) {
  if (n == 0) return;
  launch(f32_to_f16_kernel, grid_for(n, 256), 256, 0, ctx, x, static_cast<__half*>(out), n);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
