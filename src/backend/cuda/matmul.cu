// Weight-format matmul kernels: a fused dequantize-GEMV for a few activation
// rows (decode), dequantization of weight rows to f16 scratch (large batches
// then go through BLAS), and a tiled f16 GEMM used where no vendor BLAS is
// available. Kernels are templated on the weight format and output type only.
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"

namespace rf::gpu {
namespace {

constexpr int kMaxCols = 8;        // activation rows per GEMV launch
constexpr int kGemvThreads = 256;
constexpr int kGemvRows = 4;        // rows per block: 64 threads per row (2 warps of 32, or 1 of 64)

template <typename T> __device__ __forceinline__ void store_out(T* p, float v) { *p = from_float<T>(v); }

// Plain formats with k % 32 != 0 (tiny models): element-wise loads.
template <DType T> __device__ __forceinline__ float load1(const uint8_t* row, int i);
template <> __device__ __forceinline__ float load1<DType::F32>(const uint8_t* row, int i) {
  return reinterpret_cast<const float*>(row)[i];
}
template <> __device__ __forceinline__ float load1<DType::F16>(const uint8_t* row, int i) {
  return h2f(ld16(row + 2 * i));
}
template <> __device__ __forceinline__ float load1<DType::BF16>(const uint8_t* row, int i) {
  return __uint_as_float(uint32_t(ld16(row + 2 * i)) << 16);
}
template <DType T> constexpr bool kPlain = T == DType::F32 || T == DType::F16 || T == DType::BF16;

__device__ __forceinline__ void half8_to_float(const uint4& u, float (&f)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 p = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
    f[2 * j] = p.x;
    f[2 * j + 1] = p.y;
  }
}

__device__ __forceinline__ float dot32_half(const float (&v)[32], const __half* x) {
  const uint4* p = reinterpret_cast<const uint4*>(x);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float f[8];
    half8_to_float(p[i], f);
#pragma unroll
    for (int j = 0; j < 8; ++j) s = fmaf(v[8 * i + j], f[j], s);
  }
  return s;
}

// 16 bytes of a plain-format row as floats: 8 (f16/bf16) or 4 (f32) values.
template <DType T> struct PlainVec;
template <> struct PlainVec<DType::F16> {
  static constexpr int kElems = 8;
  __device__ static void load(const uint4& u, float (&f)[8]) { half8_to_float(u, f); }
};
template <> struct PlainVec<DType::BF16> {
  static constexpr int kElems = 8;
  __device__ static void load(const uint4& u, float (&f)[8]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      f[2 * j] = __uint_as_float(w[j] << 16);
      f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  }
};
template <> struct PlainVec<DType::F32> {
  static constexpr int kElems = 4;
  __device__ static void load(const uint4& u, float (&f)[8]) {
    f[0] = __uint_as_float(u.x); f[1] = __uint_as_float(u.y); f[2] = __uint_as_float(u.z); f[3] = __uint_as_float(u.w);
  }
};

// Dot of kElems weights (as floats) with the same span of activation row c.
template <int E>
__device__ __forceinline__ float dot_span(const float (&w)[8], const __half* x) {
  float s = 0.0f;
  if constexpr (E == 8) {
    float f[8];
    half8_to_float(*reinterpret_cast<const uint4*>(x), f);
#pragma unroll
    for (int j = 0; j < 8; ++j) s = fmaf(w[j], f[j], s);
  } else {
    const uint2 u = *reinterpret_cast<const uint2*>(x);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
    s = fmaf(w[0], a.x, fmaf(w[1], a.y, fmaf(w[2], b.x, w[3] * b.y)));
  }
  return s;
}

// Packed-half dot products for the hot k-quants. Two 4- or 6-bit quants
// become half2(1024 + q0, 1024 + q1) with one byte permute; subtracting the
// (exact) bias centers them, and the products with the activations run two
// per instruction in f16 over 16 elements; group scales and mins are applied
// in f32. The activations of a sub-block arrive in registers (xv: 32 halves),
// loaded once for all the rows a warp works on.
template <uint32_t kSel>
__device__ __forceinline__ __half2 quant_pair(uint32_t bytes, __half2 bias) {
  const uint32_t h = __byte_perm(bytes, 0x6464u, kSel);  // bytes (b_i, 0x64, b_j, 0x64)
  return __hsub2(*reinterpret_cast<const __half2*>(&h), bias);
}

// Q4_K sub-block `sb` of a row: d1*q - m1 = d1*(q - 8) + (8*d1 - m1), the
// second term times sum(x) (xsum, computed once per sub-block by the caller).
__device__ __forceinline__ float q4k_dot32(const uint8_t* row, int sb, const uint4 (&xv)[4], float xsum) {
  const Q4KSub q = q4k_sub_block(row, sb);
  const float d1 = q.d1, m1 = q.m1;
  const uint32_t(&w)[8] = q.w;
  const int shift = q.shift;
  const __half2 bias = __float2half2_rn(1032.0f);  // 1024 + 8
  float qx = 0.0f;
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    __half2 acc = __float2half2_rn(0.0f);
#pragma unroll
    for (int i = 2 * g; i < 2 * g + 2; ++i) {
      const __half2* xh = reinterpret_cast<const __half2*>(&xv[i]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t nib = (w[2 * i + h] >> shift) & 0x0F0F0F0Fu;  // 4 quants, one per byte
        acc = __hfma2(quant_pair<0x4140>(nib, bias), xh[2 * h], acc);
        acc = __hfma2(quant_pair<0x4342>(nib, bias), xh[2 * h + 1], acc);
      }
    }
    const float2 a = __half22float2(acc);
    qx += a.x + a.y;
  }
  return d1 * qx + (8.0f * d1 - m1) * xsum;
}

// Q6_K sub-block: two groups of 16 with their own scales; quants are q - 32.
__device__ __forceinline__ float q6k_dot32(const uint8_t* row, int sb, const uint4 (&xv)[4]) {
  const uint8_t* b = row + size_t(sb / 8) * 210;
  const int j = sb % 8, n = j / 4, k = j % 4;
  const uint16_t* ql = reinterpret_cast<const uint16_t*>(b + 64 * n + 32 * (k & 1));
  const uint16_t* qh = reinterpret_cast<const uint16_t*>(b + 128 + 32 * n);
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = h2f(ld16(b + 208));
  const int lshift = k < 2 ? 0 : 4, hshift = 2 * k;
  const __half2 bias = __float2half2_rn(1056.0f);  // 1024 + 32
  float total = 0.0f;
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    __half2 acc = __float2half2_rn(0.0f);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const __half2* xh = reinterpret_cast<const __half2*>(&xv[2 * g + i]);
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const uint32_t lw = ql[8 * g + 4 * i + p], hw = qh[8 * g + 4 * i + p];
        const uint32_t q = ((lw >> lshift) & 0x0F0Fu) | (((hw >> hshift) & 0x0303u) << 4);
        acc = __hfma2(quant_pair<0x4140>(q, bias), xh[p], acc);
      }
    }
    const float2 a = __half22float2(acc);
    total += d * float(sc[2 * j + g]) * (a.x + a.y);
  }
  return total;
}

// Dot products of one weight row (all columns `n` of x) for this thread's
// share of the row (elements id, id + stride, ...), added to acc.
template <DType T, int C>
__device__ __forceinline__ void row_dot(const uint8_t* row, size_t row_bytes, int k, const __half* x, int n, int id,
                                        int stride, float (&acc)[C]) {
  if constexpr (kPlain<T>) {
    constexpr int E = PlainVec<T>::kElems;
    if (k % (E * 4) == 0 && row_bytes % 16 == 0) {
      const int nv = k / E;
      const uint4* rv = reinterpret_cast<const uint4*>(row);
      int v = id;
      // Two 16-byte loads in flight per lane (measured on the H200: 2 beats
      // 4 and 8, which cost registers and occupancy; docs/PERFORMANCE.md).
      for (; v + 1 * stride < nv; v += 2 * stride) {
        uint4 u[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) u[i] = rv[v + i * stride];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          float f[8];
          PlainVec<T>::load(u[i], f);
#pragma unroll
          for (int c = 0; c < C; ++c)
            if (c < n) acc[c] += dot_span<E>(f, x + size_t(c) * k + size_t(v + i * stride) * E);
        }
      }
      for (; v < nv; v += stride) {
        float f[8];
        PlainVec<T>::load(rv[v], f);
#pragma unroll
        for (int c = 0; c < C; ++c)
          if (c < n) acc[c] += dot_span<E>(f, x + size_t(c) * k + size_t(v) * E);
      }
    } else {
      for (int i = id; i < k; i += stride) {
        const float wv = load1<T>(row, i);
#pragma unroll
        for (int c = 0; c < C; ++c)
          if (c < n) acc[c] = fmaf(wv, __half2float(x[size_t(c) * k + i]), acc[c]);
      }
    }
  } else {
    for (int sb = id; sb < k / 32; sb += stride) {
      float v[32];
      WeightFormat<T>::load32(row, sb, v);
#pragma unroll
      for (int c = 0; c < C; ++c)
        if (c < n) acc[c] += dot32_half(v, x + size_t(c) * k + size_t(sb) * 32);
    }
  }
}

// Up to 3 weight matrices of the same type and width, stacked: global row r
// belongs to the first segment whose row_end exceeds it and writes that
// segment's output. Paired mode: segment 0 is gate, w_up the matching up
// rows, and out[0] receives silu(gate) * up.
struct GemvArgs {
  const uint8_t* w[3];
  void* out[3];
  int row_end[3];
  int n_segs;
  const uint8_t* w_up;
  size_t row_bytes;
  int k, n;
  const __half* x;
  bool prefetch;  // bulk L2 prefetch of each row (16-byte aligned rows only)
  bool tma;       // rows may be bulk-copied to shared memory (sm_90 TMA; launchers check the size)
};

// One block: kGemvRows rows of kGemvThreads / kGemvRows threads each; the
// warps of a row split its columns and combine through shared memory.
template <DType T, typename OutT, bool kPaired, int C>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemvArgs a) {
  __shared__ float partial[kGemvThreads / 32][2 * C];
  const int lane = threadIdx.x % RF_WARP_SIZE, warp = threadIdx.x / RF_WARP_SIZE;
  const int warps_per_row = blockDim.x / RF_WARP_SIZE / kGemvRows;
  const int r = blockIdx.x * kGemvRows + warp / warps_per_row;
  const int part = warp % warps_per_row;
  const int id = part * RF_WARP_SIZE + lane, stride = warps_per_row * RF_WARP_SIZE;
  // Segment lookup with constant indices only: indexing the kernel
  // parameters at run time would copy them to local memory in every thread.
  const int m = a.n_segs == 1 ? a.row_end[0] : (a.n_segs == 2 ? a.row_end[1] : a.row_end[2]);
  const int seg = (a.n_segs > 1 && r >= a.row_end[0]) + (a.n_segs > 2 && r >= a.row_end[1]);
  const int start = seg == 0 ? 0 : (seg == 1 ? a.row_end[0] : a.row_end[1]);
  const int local = r - start;
  const int seg_rows = (seg == 0 ? a.row_end[0] : (seg == 1 ? a.row_end[1] : a.row_end[2])) - start;
  const uint8_t* wseg = seg == 0 ? a.w[0] : (seg == 1 ? a.w[1] : a.w[2]);
  void* oseg = seg == 0 ? a.out[0] : (seg == 1 ? a.out[1] : a.out[2]);
  // Weights are constant: start pulling this block's rows into L2 before
  // waiting for the previous kernel (which produces x).
  if (a.prefetch && part == 0 && lane == 0 && r < m) {
    prefetch_l2(wseg + size_t(local) * a.row_bytes, uint32_t(a.row_bytes));
    if constexpr (kPaired) prefetch_l2(a.w_up + size_t(local) * a.row_bytes, uint32_t(a.row_bytes));
  }
  pdl_wait();
  pdl_trigger();
  float acc[C], acc_up[C];
#pragma unroll
  for (int c = 0; c < C; ++c) acc[c] = acc_up[c] = 0.0f;
  if (r < m) {
    row_dot<T, C>(wseg + size_t(local) * a.row_bytes, a.row_bytes, a.k, a.x, a.n, id, stride, acc);
    if constexpr (kPaired) row_dot<T, C>(a.w_up + size_t(local) * a.row_bytes, a.row_bytes, a.k, a.x, a.n, id, stride, acc_up);
  }
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (c < a.n) {  // no break: every acc index stays a compile-time constant (registers, not local memory)
      const float s = warp_sum(acc[c]);
      if (lane == 0) partial[warp][c] = s;
      if constexpr (kPaired) {
        const float u = warp_sum(acc_up[c]);
        if (lane == 0) partial[warp][C + c] = u;
      }
    }
  }
  __syncthreads();
  if (part == 0 && lane < a.n && r < m) {
    float s = 0.0f, u = 0.0f;
    for (int p = 0; p < warps_per_row; ++p) {
      s += partial[warp + p][lane];
      if constexpr (kPaired) u += partial[warp + p][C + lane];
    }
    if constexpr (kPaired) {
      // Round gate and up to f16 first, as the unfused path stores them.
      const float g = __half2float(__float2half_rn(s)), up = __half2float(__float2half_rn(u));
      s = g / (1.0f + __expf(-g)) * up;
    }
    store_out(static_cast<OutT*>(oseg) + size_t(lane) * seg_rows + local, s);
  }
}

#if !defined(RF_HIP)
// Bulk copies (TMA, sm_90) of weight rows into shared memory, completing on
// one mbarrier: thread 0 calls tma_rows_start (before pdl_wait: weights are
// constant), then __syncthreads (barrier initialized), every thread calls
// tma_rows_wait before reading. One use per kernel (phase 0).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void tma_rows_start(uint64_t* bar, uint8_t* dst, const uint8_t* const* rows, int count,
                                               uint32_t rb) {
  const uint32_t b = smem_addr(bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(b) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(rb * uint32_t(count)) : "memory");
  for (int i = 0; i < count; ++i)
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_addr(dst + size_t(i) * rb)),
                 "l"(rows[i]), "r"(rb), "r"(b)
                 : "memory");
}
__device__ __forceinline__ void tma_rows_wait(uint64_t* bar) {
  const uint32_t b = smem_addr(bar);
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(b)
        : "memory");
}
#endif

// Row r's weights and output: the segment it belongs to (constant indices
// only: indexing the kernel parameters at run time would copy them to local
// memory in every thread).
struct GemvRow {
  const uint8_t* w;
  void* out;
  int local, seg_rows;
};
__device__ __forceinline__ GemvRow gemv_row(const GemvArgs& a, int r) {
  const int seg = (a.n_segs > 1 && r >= a.row_end[0]) + (a.n_segs > 2 && r >= a.row_end[1]);
  const int start = seg == 0 ? 0 : (seg == 1 ? a.row_end[0] : a.row_end[1]);
  GemvRow g;
  g.local = r - start;
  g.seg_rows = (seg == 0 ? a.row_end[0] : (seg == 1 ? a.row_end[1] : a.row_end[2])) - start;
  g.w = (seg == 0 ? a.w[0] : (seg == 1 ? a.w[1] : a.w[2])) + size_t(g.local) * a.row_bytes;
  g.out = seg == 0 ? a.out[0] : (seg == 1 ? a.out[1] : a.out[2]);
  return g;
}

// k-quant GEMV: a block of kKqWarps warps takes kKqRows rows (x2 when
// paired: gate and up) and splits k between its warps, lane l taking
// sub-blocks l, l + kKqWarps * warp size, ...; each sub-block's activations
// are loaded once per column and used for all the block's rows. Partial sums
// meet in shared memory.
constexpr int kKqRows = 4, kKqWarps = 4;

template <DType T, typename OutT, bool kPaired, int C>
__global__ void __launch_bounds__(kKqWarps * RF_WARP_SIZE) gemv_kq_kernel(GemvArgs a) {
  constexpr int R = kKqRows * (kPaired ? 2 : 1);
  __shared__ float partial[kKqWarps][R][C];
  const int lane = threadIdx.x % RF_WARP_SIZE, warp = threadIdx.x / RF_WARP_SIZE;
  const int m = a.n_segs == 1 ? a.row_end[0] : (a.n_segs == 2 ? a.row_end[1] : a.row_end[2]);
  const int r0 = blockIdx.x * kKqRows;
  const uint8_t* rows[R];
#pragma unroll
  for (int i = 0; i < kKqRows; ++i) {
    const GemvRow g = gemv_row(a, min(r0 + i, m - 1));
    rows[i] = g.w;
    if constexpr (kPaired) rows[kKqRows + i] = a.w_up + size_t(g.local) * a.row_bytes;
  }
#if !defined(RF_HIP)
  // With a.tma the block's rows go to shared memory in bulk (see
  // tma_rows_start) and are read from there.
  extern __shared__ __align__(128) uint8_t wsm[];
  __shared__ __align__(8) uint64_t bar;
  if (a.tma) {
    if (threadIdx.x == 0) tma_rows_start(&bar, wsm, rows, R, uint32_t(a.row_bytes));
    __syncthreads();
  }
#endif
  if (a.prefetch && !a.tma && warp == 0 && lane < R && r0 + lane % kKqRows < m) {
#pragma unroll
    for (int i = 0; i < R; ++i)
      if (i == lane) prefetch_l2(rows[i], uint32_t(a.row_bytes));
  }
  pdl_wait();
  pdl_trigger();
#if !defined(RF_HIP)
  if (a.tma) {
    tma_rows_wait(&bar);
#pragma unroll
    for (int i = 0; i < R; ++i) rows[i] = wsm + size_t(i) * a.row_bytes;
  }
#endif
  float acc[R][C];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int c = 0; c < C; ++c) acc[i][c] = 0.0f;
  const int subs = a.k / 32;
  for (int sb = warp * RF_WARP_SIZE + lane; sb < subs; sb += kKqWarps * RF_WARP_SIZE) {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      if (c < a.n) {
        const uint4* xp = reinterpret_cast<const uint4*>(a.x + size_t(c) * a.k + size_t(sb) * 32);
        const uint4 xv[4] = {__ldg(xp), __ldg(xp + 1), __ldg(xp + 2), __ldg(xp + 3)};
        float xsum = 0.0f;
        if constexpr (T == DType::Q4_K) {
          __half2 s = __float2half2_rn(0.0f);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const __half2* xh = reinterpret_cast<const __half2*>(&xv[i]);
            s = __hadd2(s, __hadd2(__hadd2(xh[0], xh[1]), __hadd2(xh[2], xh[3])));
          }
          const float2 f = __half22float2(s);
          xsum = f.x + f.y;
        }
#pragma unroll
        for (int i = 0; i < R; ++i) {
          if constexpr (T == DType::Q4_K) acc[i][c] += q4k_dot32(rows[i], sb, xv, xsum);
          else acc[i][c] += q6k_dot32(rows[i], sb, xv);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int c = 0; c < C; ++c) {
      if (c < a.n) {  // no break: acc indices stay compile-time constants
        const float v = warp_sum(acc[i][c]);
        if (lane == 0) partial[warp][i][c] = v;
      }
    }
  __syncthreads();
  // Thread (row i, column c) of the first kKqRows * C threads finishes one output.
  const int i = threadIdx.x / C, c = threadIdx.x % C;
  if (i < kKqRows && c < a.n && r0 + i < m) {
    float v = 0.0f, u = 0.0f;
#pragma unroll
    for (int w = 0; w < kKqWarps; ++w) {
      v += partial[w][i][c];
      if constexpr (kPaired) u += partial[w][kKqRows + i][c];
    }
    if constexpr (kPaired) {
      // Round gate and up to f16 first, as the unfused path stores them.
      const float g = __half2float(__float2half_rn(v));
      v = g / (1.0f + __expf(-g)) * __half2float(__float2half_rn(u));
    }
    const GemvRow g = gemv_row(a, r0 + i);
    store_out(static_cast<OutT*>(g.out) + size_t(c) * g.seg_rows + g.local, v);
  }
}

// f16 GEMV for one activation row on sm_90: one thread of each block starts
// bulk copies (TMA) of the block's weight rows into shared memory before the
// kernel waits for its inputs, so a whole block's weights are in flight at
// once (and during the previous kernel's tail); the warps then read them
// from shared memory. Up to kTmaMaxBlockBytes per block (4 f16 rows of 4096,
// or 4 gate + 4 up rows); larger rows go to gemv_kernel (measured on the
// H200: bulk-copying the 4 x 28 KB rows of the 14336-wide down projection,
// two blocks per SM, lowered decode from 212 to 197 tok/s).
constexpr size_t kTmaMaxBlockBytes = size_t(64) << 10;

#if !defined(RF_HIP)
template <typename OutT, bool kPaired>
__global__ void __launch_bounds__(kGemvThreads) gemv_tma_kernel(GemvArgs a) {
  constexpr int R = kGemvRows * (kPaired ? 2 : 1);  // rows in shared memory: gate rows, then up rows
  extern __shared__ __align__(128) uint8_t wsm[];
  __shared__ __align__(8) uint64_t bar;
  __shared__ float partial[kGemvThreads / 32][2];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  constexpr int kWarpsPerRow = kGemvThreads / 32 / kGemvRows;
  const int m = a.n_segs == 1 ? a.row_end[0] : (a.n_segs == 2 ? a.row_end[1] : a.row_end[2]);
  const int r0 = blockIdx.x * kGemvRows;
  const int rows = min(kGemvRows, m - r0);
  const uint32_t rb = uint32_t(a.row_bytes);
  if (threadIdx.x == 0) {
    const uint8_t* src[R];
#pragma unroll
    for (int i = 0; i < kGemvRows; ++i) {
      const GemvRow g = gemv_row(a, r0 + min(i, rows - 1));
      src[i] = g.w;
      if constexpr (kPaired) src[kGemvRows + i] = a.w_up + size_t(g.local) * rb;
    }
    tma_rows_start(&bar, wsm, src, R, rb);
  }
  __syncthreads();  // the barrier is initialized
  pdl_wait();
  pdl_trigger();
  tma_rows_wait(&bar);
  const int i = warp / kWarpsPerRow, part = warp % kWarpsPerRow;
  const int id = part * 32 + lane, stride = kWarpsPerRow * 32;
  const int nv = int(rb / 16);
  float acc = 0.0f, acc_up = 0.0f;
  if (i < rows) {
    const uint4* wv = reinterpret_cast<const uint4*>(wsm + size_t(i) * rb);
    const uint4* uv = reinterpret_cast<const uint4*>(wsm + size_t(kGemvRows + i) * rb);
    for (int v = id; v < nv; v += stride) {
      float f[8];
      half8_to_float(wv[v], f);
      acc += dot_span<8>(f, a.x + size_t(v) * 8);
      if constexpr (kPaired) {
        half8_to_float(uv[v], f);
        acc_up += dot_span<8>(f, a.x + size_t(v) * 8);
      }
    }
  }
  acc = warp_sum(acc);
  if constexpr (kPaired) acc_up = warp_sum(acc_up);
  if (lane == 0) {
    partial[warp][0] = acc;
    partial[warp][1] = acc_up;
  }
  __syncthreads();
  if (part == 0 && lane == 0 && i < rows) {
    float s = 0.0f, u = 0.0f;
    for (int p = 0; p < kWarpsPerRow; ++p) {
      s += partial[warp + p][0];
      u += partial[warp + p][1];
    }
    if constexpr (kPaired) {
      // Round gate and up to f16 first, as the unfused path stores them.
      const float g = __half2float(__float2half_rn(s)), up = __half2float(__float2half_rn(u));
      s = g / (1.0f + __expf(-g)) * up;
    }
    const GemvRow g = gemv_row(a, r0 + i);
    store_out(static_cast<OutT*>(g.out) + g.local, s);
  }
}

template <typename OutT, bool kPaired>
void launch_gemv_tma(const GemvArgs& a, int blocks, const LaunchCtx& ctx) {
  static const bool attr_set = [] {  // once per instantiation (thread-safe static init)
    auto* kernel = gemv_tma_kernel<OutT, kPaired>;
    RF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(kTmaMaxBlockBytes)));
    return true;
  }();
  (void)attr_set;
  launch(gemv_tma_kernel<OutT, kPaired>, blocks, kGemvThreads, size_t(kGemvRows) * (kPaired ? 2 : 1) * a.row_bytes, ctx,
         a);  // all rows copied (the last block repeats its last row)
}
#endif

template <DType T>
__global__ void dequant_rows_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int row0, int rows, int k,
                                    __half* __restrict__ dst) {
  pdl_wait();
  pdl_trigger();
  const int subs = k / 32;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k % 32 == 0) {
    if (idx >= int64_t(rows) * subs) return;
    const int r = int(idx / subs), sb = int(idx % subs);
    float v[32];
    WeightFormat<T>::load32(w + size_t(row0 + r) * row_bytes, sb, v);
    uint4* o = reinterpret_cast<uint4*>(dst + size_t(r) * k + size_t(sb) * 32);  // 64-byte aligned
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t packed[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const __half2 h = __floats2half2_rn(v[8 * i + 2 * j], v[8 * i + 2 * j + 1]);
        packed[j] = *reinterpret_cast<const uint32_t*>(&h);
      }
      o[i] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
  } else if constexpr (kPlain<T>) {
    if (idx >= int64_t(rows) * k) return;
    const int r = int(idx / k), i = int(idx % k);
    dst[size_t(r) * k + i] = __float2half_rn(load1<T>(w + size_t(row0 + r) * row_bytes, i));
  }
}

// Shared memory for a k-quant GEMV block's rows when they are bulk-copied.
constexpr size_t kKqTmaMaxBytes = size_t(64) << 10;

template <DType T, typename OutT, bool kPaired, int C>
void launch_gemv_kq(GemvArgs a, const LaunchCtx& ctx) {
  const int m = a.row_end[a.n_segs - 1];
  const int blocks = (m + kKqRows - 1) / kKqRows;
  const size_t smem = size_t(kKqRows) * (kPaired ? 2 : 1) * a.row_bytes;
  a.tma = a.tma && smem <= kKqTmaMaxBytes;
#if !defined(RF_HIP)
  static const bool attr_set = [] {  // once per instantiation (thread-safe static init)
    auto* kernel = gemv_kq_kernel<T, OutT, kPaired, C>;
    RF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(kKqTmaMaxBytes)));
    return true;
  }();
  (void)attr_set;
#endif
  launch(gemv_kq_kernel<T, OutT, kPaired, C>, blocks, kKqWarps * RF_WARP_SIZE, a.tma ? smem : 0, ctx, a);
}

template <DType T, int C>
void launch_gemv_cols(const GemvArgs& a, DType out_type, bool paired, int blocks, const LaunchCtx& ctx) {
  if constexpr (T == DType::Q4_K || T == DType::Q6_K) {
    if (out_type == DType::F32) {
      if (paired) launch_gemv_kq<T, float, true, C>(a, ctx);
      else launch_gemv_kq<T, float, false, C>(a, ctx);
    } else {
      if (paired) launch_gemv_kq<T, __half, true, C>(a, ctx);
      else launch_gemv_kq<T, __half, false, C>(a, ctx);
    }
  } else if (out_type == DType::F32) {
    if (paired) launch(gemv_kernel<T, float, true, C>, blocks, kGemvThreads, 0, ctx, a);
    else launch(gemv_kernel<T, float, false, C>, blocks, kGemvThreads, 0, ctx, a);
  } else {
    if (paired) launch(gemv_kernel<T, __half, true, C>, blocks, kGemvThreads, 0, ctx, a);
    else launch(gemv_kernel<T, __half, false, C>, blocks, kGemvThreads, 0, ctx, a);
  }
}

template <DType T>
void launch_gemv(GemvArgs a, DType out_type, bool paired, const LaunchCtx& ctx) {
  const int m = a.row_end[a.n_segs - 1];
  const int blocks = (m + kGemvRows - 1) / kGemvRows;
  const int n = a.n;
  const __half* x0 = a.x;
  void* out0[3] = {a.out[0], a.out[1], a.out[2]};
  for (int c0 = 0; c0 < n; c0 += kMaxCols) {
    a.n = min(kMaxCols, n - c0);
    a.x = x0 + size_t(c0) * a.k;
    const size_t elem = out_type == DType::F32 ? 4 : 2;
    for (int i = 0; i < a.n_segs; ++i) {
      const int rows = a.row_end[i] - (i ? a.row_end[i - 1] : 0);
      a.out[i] = static_cast<uint8_t*>(out0[i]) + size_t(c0) * rows * elem;
    }
#if !defined(RF_HIP)
    if constexpr (T == DType::F16) {
      if (a.n == 1 && a.tma && size_t(kGemvRows) * (paired ? 2 : 1) * a.row_bytes <= kTmaMaxBlockBytes) {
        if (out_type == DType::F32) {
          if (paired) launch_gemv_tma<float, true>(a, blocks, ctx);
          else launch_gemv_tma<float, false>(a, blocks, ctx);
        } else {
          if (paired) launch_gemv_tma<__half, true>(a, blocks, ctx);
          else launch_gemv_tma<__half, false>(a, blocks, ctx);
        }
        continue;
      }
    }
#endif
    // Single-column launches (batch-1 decode) use kernels with one
    // accumulator per row: fewer registers, more warps in flight.
    // (Only for the common formats, to keep instantiations few.)
    constexpr bool kSingle = T == DType::F16 || T == DType::Q8_0 || T == DType::Q4_K || T == DType::Q6_K;
    if (kSingle && a.n == 1) launch_gemv_cols<T, kSingle ? 1 : kMaxCols>(a, out_type, paired, blocks, ctx);
    else launch_gemv_cols<T, kMaxCols>(a, out_type, paired, blocks, ctx);
    RF_GPU_CHECK_LAUNCH();
  }
}

template <DType T>
void launch_dequant(const void* w, size_t row_bytes, int row0, int rows, int k, void* dst, const LaunchCtx& ctx) {
  const int64_t work = k % 32 == 0 ? int64_t(rows) * (k / 32) : int64_t(rows) * k;
  const int threads = 256;
  launch(dequant_rows_kernel<T>, unsigned((work + threads - 1) / threads), threads, 0, ctx, 
      static_cast<const uint8_t*>(w), row_bytes, row0, rows, k, static_cast<__half*>(dst));
  RF_GPU_CHECK_LAUNCH();
}

// Tiled GEMM: 64x64 output tile per block of 256 threads, 4x4 per thread.
constexpr int kTile = 64, kTileK = 16;
template <typename OutT>
__global__ void __launch_bounds__(256) gemm_tiled_kernel(const __half* __restrict__ x, const __half* __restrict__ w,
                                                          OutT* __restrict__ out, int n, int m, int k, int ldo) {
  pdl_wait();
  pdl_trigger();
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
      if (r < n && c < m) store_out(out + size_t(r) * ldo + c, acc[i][j]);
    }
}

}  // namespace

void gemv_segments(DType w_type, const GemvSegment* segs, int n_segs, const void* w_up, size_t row_bytes, int k,
                   const void* x, int n, DType out_type, const LaunchCtx& ctx) {
  RF_CHECK(out_type == DType::F32 || out_type == DType::F16, "gemv: output must be f32 or f16");
  RF_CHECK(n_segs >= 1 && n_segs <= 3 && (!w_up || n_segs == 1), "gemv: 1..3 segments (one when paired)");
  GemvArgs a{};
  int end = 0;
  for (int i = 0; i < n_segs; ++i) {
    a.w[i] = static_cast<const uint8_t*>(segs[i].w);
    a.out[i] = segs[i].out;
    end += segs[i].rows;
    a.row_end[i] = end;
  }
  a.n_segs = n_segs;
  a.w_up = static_cast<const uint8_t*>(w_up);
  a.row_bytes = row_bytes;
  a.k = k;
  a.n = n;
  a.x = static_cast<const __half*>(x);
  bool aligned = row_bytes % 16 == 0 && row_bytes < (size_t(1) << 31);
  for (int i = 0; i < n_segs; ++i) aligned = aligned && reinterpret_cast<uintptr_t>(segs[i].w) % 16 == 0;
  if (w_up) aligned = aligned && reinterpret_cast<uintptr_t>(w_up) % 16 == 0;
  // Measured on the H200: the prefetch slows the f16 GEMV (its loads already
  // stream) and speeds up the k-quant ones.
  a.prefetch = aligned && ctx.options.l2_prefetch && (w_type == DType::Q4_K || w_type == DType::Q6_K);
#if defined(RF_HIP)
  a.tma = false;  // no bulk-copy engine
#else
  a.tma = aligned && ctx.options.tma_gemv;
#endif
  switch (w_type) {
#define RF_CASE(T) \
  case DType::T: return launch_gemv<DType::T>(a, out_type, w_up != nullptr, ctx);
    RF_FOR_EACH_WEIGHT_FORMAT(RF_CASE)
#undef RF_CASE
    default: fail("cuda matmul: weight type ", dtype_name(w_type), " is not supported");
  }
}

void gemv(DType w_type, const void* w, size_t row_bytes, int m, int k, const void* x, int n, void* out, DType out_type,
          const LaunchCtx& ctx) {
  const GemvSegment seg{w, out, m};
  gemv_segments(w_type, &seg, 1, nullptr, row_bytes, k, x, n, out_type, ctx);
}

void dequant_rows_f16(DType w_type, const void* w, size_t row_bytes, int row0, int rows, int k, void* dst,
                      const LaunchCtx& ctx) {
  switch (w_type) {
#define RF_CASE(T) \
  case DType::T: return launch_dequant<DType::T>(w, row_bytes, row0, rows, k, dst, ctx);
    RF_FOR_EACH_WEIGHT_FORMAT(RF_CASE)
#undef RF_CASE
    default: fail("cuda matmul: weight type ", dtype_name(w_type), " is not supported");
  }
}

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
