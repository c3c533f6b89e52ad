// GEMV: out[n, m] = x[n, k] . w[m, k]^T for a few activation rows (n <= 8
// per launch; decode), straight from the weights' stored format. Owns the
// GEMV kernels and their launchers:
//  - gemv_kernel: any format, a block of 4 rows, the warps of a row
//    splitting its columns (dot products: gemv_dot.cuh);
//  - gemv_kq_kernel: Q4_K / Q6_K, packed-half dot products, activations
//    loaded once per sub-block for all the block's rows, optionally with the
//    rows bulk-copied into shared memory (TMA, sm_90);
//  - gemv_tma_kernel: f16 or FP8 weights, one activation row, rows
//    bulk-copied into shared memory (sm_90).
// Q4_K, Q5_K, Q6_K, the 32-wide block formats, IQ4_NL, IQ4_XS, MXFP4 and the grid i-quants
// with one activation row go to the streaming kernel of gemv_stream.cu
// where it applies.
// Up to three weight matrices of one format and width go through one launch
// (segments), each optionally adding an f32 bias per row (q/k/v biases),
// and a gate/up pair can be fused with SiLU or GELU (paired). Expert mode
// (mixture-of-experts FFNs, gemv_experts): blockIdx.y takes one tile of
// rows grouped by expert and reads only that expert's weights. Switches:
// Tuning::tma_gemv and l2_prefetch (tuning.h).
#include "backend/cuda/elementwise/glu.cuh"
#include "backend/cuda/matmul/gemv_args.cuh"
#include "backend/cuda/matmul/gemv_dot.cuh"
#include "backend/cuda/matmul/matmul.cuh"
#include "backend/cuda/ptx.cuh"

namespace rf::gpu {
namespace {

constexpr int kMaxCols = 8;        // activation rows per GEMV launch
constexpr int kGemvThreads = 256;
constexpr int kGemvRows = 4;        // rows per block: 64 threads per row (2 warps of 32, or 1 of 64)

// One block: kGemvRows rows of kGemvThreads / kGemvRows threads each; the
// warps of a row split its columns and combine through shared memory.
template <DType T, typename OutT, bool kPaired, int C>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemvArgs a) {
  __shared__ float partial[kGemvThreads / RF_WARP_SIZE][2 * C];
  const int lane = threadIdx.x % RF_WARP_SIZE, warp = threadIdx.x / RF_WARP_SIZE;
  const int warps_per_row = blockDim.x / RF_WARP_SIZE / kGemvRows;
  const int r = blockIdx.x * kGemvRows + warp / warps_per_row;
  const int part = warp % warps_per_row;
  const int id = part * RF_WARP_SIZE + lane, stride = warps_per_row * RF_WARP_SIZE;
  // The segment lookup of gemv_row, inline (the same code through gemv_row
  // compiles differently here).
  const int m = a.n_segs == 1 ? a.row_end[0] : (a.n_segs == 2 ? a.row_end[1] : a.row_end[2]);
  const int seg = (a.n_segs > 1 && r >= a.row_end[0]) + (a.n_segs > 2 && r >= a.row_end[1]);
  const int start = seg == 0 ? 0 : (seg == 1 ? a.row_end[0] : a.row_end[1]);
  const int local = r - start;
  const int seg_rows = (seg == 0 ? a.row_end[0] : (seg == 1 ? a.row_end[1] : a.row_end[2])) - start;
  GemvTile tile;
  if (!gemv_tile(a, m, tile)) return;
  const uint8_t* wseg = (seg == 0 ? a.w[0] : (seg == 1 ? a.w[1] : a.w[2])) + tile.w_off;
  const uint8_t* wup = a.w_up + tile.w_off;
  void* oseg = static_cast<OutT*>(seg == 0 ? a.out[0] : (seg == 1 ? a.out[1] : a.out[2])) + tile.out_off;
  const float* bseg = seg == 0 ? a.bias[0] : (seg == 1 ? a.bias[1] : a.bias[2]);
  const __half* x = tile.x;
  const int n = tile.n;
  // Weights are constant: start pulling this block's rows into L2 before
  // waiting for the previous kernel (which produces x).
  if (a.prefetch && part == 0 && lane == 0 && r < m) {
    prefetch_l2(wseg + size_t(local) * a.row_bytes, uint32_t(a.row_bytes));
    if constexpr (kPaired) prefetch_l2(wup + size_t(local) * a.row_bytes, uint32_t(a.row_bytes));
  }
  pdl_wait();
  pdl_trigger();
  float acc[C], acc_up[C];
#pragma unroll
  for (int c = 0; c < C; ++c) acc[c] = acc_up[c] = 0.0f;
  if (r < m) {
    row_dot<T, C>(wseg + size_t(local) * a.row_bytes, a.row_bytes, a.k, x, n, id, stride, acc);
    if constexpr (kPaired) row_dot<T, C>(wup + size_t(local) * a.row_bytes, a.row_bytes, a.k, x, n, id, stride, acc_up);
  }
#pragma unroll
  for (int c = 0; c < C; ++c) {
    if (c < n) {  // no break: every acc index stays a compile-time constant (registers, not local memory)
      const float s = warp_sum(acc[c]);
      if (lane == 0) partial[warp][c] = s;
      if constexpr (kPaired) {
        const float u = warp_sum(acc_up[c]);
        if (lane == 0) partial[warp][C + c] = u;
      }
    }
  }
  __syncthreads();
  if (part == 0 && lane < n && r < m) {
    float s = 0.0f, u = 0.0f;
    for (int p = 0; p < warps_per_row; ++p) {
      s += partial[warp + p][lane];
      if constexpr (kPaired) u += partial[warp + p][C + lane];
    }
    if constexpr (kPaired) s = glu_f16_rounded(s, u, a.gelu);
    if (bseg) s += bseg[local];
    store_out(static_cast<OutT*>(oseg) + size_t(lane) * seg_rows + local, s);
  }
}


// k-quant GEMV: a block of kKqWarps warps takes kSets sets of kKqRows rows
// (x2 when paired: gate and up); the kKqWarps / kSets warps of a set split k,
// lane l taking sub-blocks l, l + (warps of the set) * warp size, ...; each
// sub-block's activations are loaded once per column and used for all the
// set's rows. Partial sums meet in shared memory. Short rows (k of 32 or 64
// sub-blocks) use 4 or 2 sets so that most lanes have a sub-block.
constexpr int kKqRows = 4, kKqWarps = 4;

template <DType T, typename OutT, bool kPaired, int C, int kSets>
__global__ void __launch_bounds__(kKqWarps * RF_WARP_SIZE) gemv_kq_kernel(GemvArgs a) {
  static_assert(kKqWarps % kSets == 0 && kSets * kKqRows * C <= kKqWarps * 32, "gemv_kq_kernel: bad shape");
  constexpr int R = kKqRows * (kPaired ? 2 : 1);
  constexpr int kSetWarps = kKqWarps / kSets;
  __shared__ float partial[kKqWarps][R][C];
  const int lane = threadIdx.x % RF_WARP_SIZE, warp = threadIdx.x / RF_WARP_SIZE;
  const int set = warp / kSetWarps, part = warp % kSetWarps;
  const int m = a.n_segs == 1 ? a.row_end[0] : (a.n_segs == 2 ? a.row_end[1] : a.row_end[2]);
  const int r0 = (int(blockIdx.x) * kSets + set) * kKqRows;
  GemvTile tile;
  if (!gemv_tile(a, m, tile)) return;
  const uint8_t* rows[R];
#pragma unroll
  for (int i = 0; i < kKqRows; ++i) {
    const GemvRow g = gemv_row(a, min(r0 + i, m - 1));
    rows[i] = g.w + tile.w_off;
    if constexpr (kPaired) rows[kKqRows + i] = a.w_up + tile.w_off + size_t(g.local) * a.row_bytes;
  }
#if !defined(RF_PORTABLE)
  // With a.tma (one set only) the block's rows go to shared memory in bulk
  // (see tma_rows_start) and are read from there.
  extern __shared__ __align__(128) uint8_t wsm[];
  __shared__ __align__(8) uint64_t bar;
  if (kSets == 1 && a.tma) {
    if (threadIdx.x == 0) tma_rows_start(&bar, wsm, rows, R, uint32_t(a.row_bytes));
    __syncthreads();
  }
#endif
  if (a.prefetch && !a.tma && part == 0 && lane < R && r0 + lane % kKqRows < m) {
#pragma unroll
    for (int i = 0; i < R; ++i)
      if (i == lane) prefetch_l2(rows[i], uint32_t(a.row_bytes));
  }
  pdl_wait();
  pdl_trigger();
#if !defined(RF_PORTABLE)
  if (kSets == 1 && a.tma) {
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
  for (int sb = part * RF_WARP_SIZE + lane; sb < subs; sb += kSetWarps * RF_WARP_SIZE) {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      if (c < tile.n) {
        const uint4* xp = reinterpret_cast<const uint4*>(tile.x + size_t(c) * a.k + size_t(sb) * 32);
        const uint4 xv[4] = {__ldg(xp), __ldg(xp + 1), __ldg(xp + 2), __ldg(xp + 3)};
        const float xsum = T == DType::Q4_K ? half_sum32(xv) : 0.0f;
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
      if (c < tile.n) {  // no break: acc indices stay compile-time constants
        const float v = warp_sum(acc[i][c]);
        if (lane == 0) partial[warp][i][c] = v;
      }
    }
  __syncthreads();
  // Thread (set, row i, column c) of the first kSets * kKqRows * C threads
  // finishes one output.
  const int t = int(threadIdx.x), os = t / (kKqRows * C), i = (t / C) % kKqRows, c = t % C;
  const int r = (int(blockIdx.x) * kSets + os) * kKqRows + i;
  if (os < kSets && c < tile.n && r < m) {
    float v = 0.0f, u = 0.0f;
#pragma unroll
    for (int w = 0; w < kSetWarps; ++w) {
      v += partial[os * kSetWarps + w][i][c];
      if constexpr (kPaired) u += partial[os * kSetWarps + w][kKqRows + i][c];
    }
    if constexpr (kPaired) v = glu_f16_rounded(v, u, a.gelu);
    const GemvRow g = gemv_row(a, r);
    store_out(static_cast<OutT*>(g.out) + tile.out_off + size_t(c) * g.seg_rows + g.local, with_bias(g, v));
  }
}

// f16 (and FP8) GEMV for one activation row on sm_90: one thread of each block starts
// bulk copies (TMA) of the block's weight rows into shared memory before the
// kernel waits for its inputs, so a whole block's weights are in flight at
// once (and during the previous kernel's tail); the warps then read them
// from shared memory. Tuning::gemv_tma_rows rows per block (by
// default one for f16: the most blocks in flight; two for FP8), halved
// until the block's rows (and up rows) fit kTmaMaxBlockBytes; rows wider
// than that go to gemv_kernel.
[[maybe_unused]] constexpr size_t kTmaMaxBlockBytes = size_t(64) << 10;  // unused with RF_PORTABLE
// But two f16 rows a block for the o projection of one token fused with the
// residual add (rows of up to 8 KB; the down projection's are wider): it
// runs after the attention, and its resident blocks copy their weights
// while the attention does, so two rows a block put twice the bytes in
// flight in that window.
[[maybe_unused]] constexpr size_t kTmaResidualPairBytes = size_t(8) << 10;

#if !defined(RF_PORTABLE)
// T: F16, or F8_E4M3_ROW (FP8 weights: a row's 16-byte header holds its
// scale, applied once to the row's sum).
template <DType T, typename OutT, bool kPaired, int kRows>
__global__ void __launch_bounds__(kGemvThreads) gemv_tma_kernel(GemvArgs a) {
  static_assert(T == DType::F16 || T == DType::F8_E4M3_ROW, "bulk-copying GEMV: f16 or FP8 rows");
  constexpr int R = kRows * (kPaired ? 2 : 1);  // rows in shared memory: gate rows, then up rows
  extern __shared__ __align__(128) uint8_t wsm[];
  __shared__ __align__(8) uint64_t bar;
  __shared__ float partial[kGemvThreads / 32][3];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  constexpr int kWarpsPerRow = kGemvThreads / 32 / kRows;
  const int m = a.n_segs == 1 ? a.row_end[0] : (a.n_segs == 2 ? a.row_end[1] : a.row_end[2]);
  const int r0 = blockIdx.x * kRows;
  const int rows = min(kRows, m - r0);
  const uint32_t rb = uint32_t(a.row_bytes);
  if (threadIdx.x == 0) {
    const uint8_t* src[R];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const GemvRow g = gemv_row(a, r0 + min(i, rows - 1));
      src[i] = g.w;
      if constexpr (kPaired) src[kRows + i] = a.w_up + size_t(g.local) * rb;
    }
    tma_rows_start(&bar, wsm, src, R, rb);
  }
  __syncthreads();  // the barrier is initialized
  pdl_wait();
  pdl_trigger();
  const int i = warp / kWarpsPerRow, part = warp % kWarpsPerRow;
  // A fused residual add: the row's residual read while the weights arrive.
  float residual = 0.0f;
  if (a.residual && part == 0 && lane == 0 && i < rows) residual = a.residual[gemv_row(a, r0 + i).local];
  tma_rows_wait(&bar);
  const int id = part * 32 + lane, stride = kWarpsPerRow * 32;
  float acc = 0.0f, acc_up = 0.0f, x_sq = 0.0f;  // x_sq: the sum of x^2 (x_rms)
  if (i < rows) {
    const uint8_t* wrow = wsm + size_t(i) * rb;
    const uint8_t* urow = wsm + size_t(kRows + i) * rb;
    if constexpr (T == DType::F16) {
      const int nv = int(rb / 16);
      const uint4* wv = reinterpret_cast<const uint4*>(wrow);
      const uint4* uv = reinterpret_cast<const uint4*>(urow);
      for (int v = id; v < nv; v += stride) {
        float xf[8], f[8];
        half8_to_float(*reinterpret_cast<const uint4*>(a.x + size_t(v) * 8), xf);
        half8_to_float(wv[v], f);
        acc += dot8(f, xf);
        if constexpr (kPaired) {
          half8_to_float(uv[v], f);
          acc_up += dot8(f, xf);
        }
        if (a.x_rms) x_sq += dot8(xf, xf);  // (each row's warps read all of x)
      }
    } else {
      const int nv = a.k / 16;
      const uint4* wv = f8_row_codes(wrow);
      const uint4* uv = f8_row_codes(urow);
      float part[1] = {0.0f}, part_up[1] = {0.0f};
      for (int v = id; v < nv; v += stride) {
        f8_dot16<1>(wv[v], a.x, a.k, v, 1, part);
        if constexpr (kPaired) f8_dot16<1>(uv[v], a.x, a.k, v, 1, part_up);
      }
      acc = part[0] * (f8_row_scale(wrow) * kFp8HalfScale);
      if constexpr (kPaired) acc_up = part_up[0] * (f8_row_scale(urow) * kFp8HalfScale);
    }
  }
  acc = warp_sum(acc);
  if constexpr (kPaired) acc_up = warp_sum(acc_up);
  if (a.x_rms) x_sq = warp_sum(x_sq);
  if (lane == 0) {
    partial[warp][0] = acc;
    partial[warp][1] = acc_up;
    partial[warp][2] = x_sq;
  }
  __syncthreads();
  if (part == 0 && lane == 0 && i < rows) {
    float s = 0.0f, u = 0.0f, sq = 0.0f;
    for (int p = 0; p < kWarpsPerRow; ++p) {
      s += partial[warp + p][0];
      u += partial[warp + p][1];
      sq += partial[warp + p][2];
    }
    if (a.x_rms) {
      const float inv_rms = rsqrtf(sq / float(a.k) + a.rms_eps);
      s *= inv_rms;
      u *= inv_rms;
    }
    if constexpr (kPaired) s = glu_f16_rounded(s, u, a.gelu);
    const GemvRow g = gemv_row(a, r0 + i);
    if (a.residual) {
      // As the projection's f16 output added to the residual would be.
      const float h = residual + __half2float(__float2half(with_bias(g, s)));
      a.residual[g.local] = h;
      a.residual_f16[g.local] = __float2half(h);
    } else {
      store_out(static_cast<OutT*>(g.out) + g.local, with_bias(g, s));
    }
  }
}

template <DType T, typename OutT, bool kPaired>
void launch_gemv_tma(const GemvArgs& a, int rows_per_block, const LaunchCtx& ctx) {
  const int m = a.row_end[a.n_segs - 1];
  const int blocks = (m + rows_per_block - 1) / rows_per_block;
  // All rows copied (the last block repeats its last row).
  const size_t smem = size_t(rows_per_block) * (kPaired ? 2 : 1) * a.row_bytes;
  if (rows_per_block == kGemvRows)
    launch(gemv_tma_kernel<T, OutT, kPaired, kGemvRows>, blocks, kGemvThreads, smem, ctx, a);
  else if (rows_per_block == 1)
    launch(gemv_tma_kernel<T, OutT, kPaired, 1>, blocks, kGemvThreads, smem, ctx, a);
  else
    launch(gemv_tma_kernel<T, OutT, kPaired, 2>, blocks, kGemvThreads, smem, ctx, a);
}
#endif

// Shared memory for a k-quant GEMV block's rows when they are bulk-copied.
constexpr size_t kKqTmaMaxBytes = size_t(64) << 10;

// grid_y: 1, or the most expert tiles (expert mode). One activation row and
// short rows: 2 or 4 sets of rows per block (see gemv_kq_kernel).
template <DType T, typename OutT, bool kPaired, int C>
void launch_gemv_kq(GemvArgs a, int grid_y, const LaunchCtx& ctx) {
  const int m = a.row_end[a.n_segs - 1];
  const int subs = a.k / 32;
  const int sets =
      C == 1 && ctx.tuning.gemv_row_sets ? (subs <= ctx.warp_size ? 4 : subs <= 2 * ctx.warp_size ? 2 : 1) : 1;
  const int rows_per_block = kKqRows * sets;
  const dim3 grid(unsigned((m + rows_per_block - 1) / rows_per_block), unsigned(grid_y));
  const dim3 block(kKqWarps * ctx.warp_size);
  const size_t smem = size_t(kKqRows) * (kPaired ? 2 : 1) * a.row_bytes;
  a.tma = a.tma && sets == 1 && smem <= kKqTmaMaxBytes;
  if constexpr (C == 1) {
    if (sets == 4) return launch(gemv_kq_kernel<T, OutT, kPaired, C, 4>, grid, block, 0, ctx, a);
    if (sets == 2) return launch(gemv_kq_kernel<T, OutT, kPaired, C, 2>, grid, block, 0, ctx, a);
  }
  launch(gemv_kq_kernel<T, OutT, kPaired, C, 1>, grid, block, a.tma ? smem : 0, ctx, a);
}

template <DType T, int C>
void launch_gemv_cols(const GemvArgs& a, DType out_type, bool paired, int blocks, int grid_y, const LaunchCtx& ctx) {
  const dim3 grid{unsigned(blocks), unsigned(grid_y)}, block{unsigned(kGemvThreads)};
  if constexpr (T == DType::Q4_K || T == DType::Q6_K) {
    if (out_type == DType::F32) {
      if (paired) launch_gemv_kq<T, float, true, C>(a, grid_y, ctx);
      else launch_gemv_kq<T, float, false, C>(a, grid_y, ctx);
    } else {
      if (paired) launch_gemv_kq<T, __half, true, C>(a, grid_y, ctx);
      else launch_gemv_kq<T, __half, false, C>(a, grid_y, ctx);
    }
  } else if (out_type == DType::F32) {
    if (paired) launch(gemv_kernel<T, float, true, C>, grid, block, 0, ctx, a);
    else launch(gemv_kernel<T, float, false, C>, grid, block, 0, ctx, a);
  } else {
    if (paired) launch(gemv_kernel<T, __half, true, C>, grid, block, 0, ctx, a);
    else launch(gemv_kernel<T, __half, false, C>, grid, block, 0, ctx, a);
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
#if !defined(RF_PORTABLE)
    if constexpr (T == DType::F16 || T == DType::F8_E4M3_ROW) {
      const size_t row_set_bytes = size_t(paired ? 2 : 1) * a.row_bytes;
      int rows_per_block = T == DType::F16 ? 1 : 2;
      if (T == DType::F16 && a.residual && !paired && a.row_bytes <= kTmaResidualPairBytes) rows_per_block = 2;
      if (ctx.tuning.gemv_tma_rows > 0) rows_per_block = ctx.tuning.gemv_tma_rows;
      while (rows_per_block > 0 && size_t(rows_per_block) * row_set_bytes > kTmaMaxBlockBytes) rows_per_block /= 2;
      if (a.n == 1 && a.tma && rows_per_block > 0) {
        if (out_type == DType::F32) {
          if (paired) launch_gemv_tma<T, float, true>(a, rows_per_block, ctx);
          else launch_gemv_tma<T, float, false>(a, rows_per_block, ctx);
        } else {
          if (paired) launch_gemv_tma<T, __half, true>(a, rows_per_block, ctx);
          else launch_gemv_tma<T, __half, false>(a, rows_per_block, ctx);
        }
        continue;
      }
    }
#endif
    if constexpr (T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K || T == DType::Q4_0 ||
                T == DType::Q4_1 || T == DType::Q5_0 || T == DType::Q5_1 || T == DType::Q8_0 ||
                  T == DType::IQ4_NL || T == DType::IQ4_XS || T == DType::MXFP4 || T == DType::IQ1_S ||
                  T == DType::IQ1_M || T == DType::IQ2_XXS || T == DType::IQ2_XS || T == DType::IQ2_S ||
                  T == DType::IQ3_XXS || T == DType::IQ3_S) {
      if (a.n == 1 && launch_gemv_kq_stream(T, a, out_type, paired, 1, ctx)) continue;
    }
    // Single-column launches (batch-1 decode) use kernels with one
    // accumulator per row: fewer registers, more warps in flight.
    // (Only for the common formats, to keep instantiations few.)
    constexpr bool kSingle = T == DType::F16 || T == DType::F32 || T == DType::Q8_0 || T == DType::Q4_K ||
                             T == DType::Q6_K || T == DType::F8_E4M3_ROW;
    if (kSingle && a.n == 1) launch_gemv_cols<T, kSingle ? 1 : kMaxCols>(a, out_type, paired, blocks, 1, ctx);
    else launch_gemv_cols<T, kMaxCols>(a, out_type, paired, blocks, 1, ctx);
    RF_GPU_CHECK_LAUNCH();
  }
}

// Expert mode: one launch over every tile (a.n: the most rows of a tile).
template <DType T>
void launch_gemv_experts(const GemvArgs& a, DType out_type, bool paired, int max_tiles, int x_rows,
                         const LaunchCtx& ctx) {
  if constexpr (T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K || T == DType::Q4_0 ||
                T == DType::Q4_1 || T == DType::Q5_0 || T == DType::Q5_1 || T == DType::Q8_0 ||
                  T == DType::IQ4_NL || T == DType::IQ4_XS || T == DType::MXFP4 || T == DType::IQ1_S ||
                  T == DType::IQ1_M || T == DType::IQ2_XXS || T == DType::IQ2_XS || T == DType::IQ2_S ||
                  T == DType::IQ3_XXS || T == DType::IQ3_S) {
    if (a.n == 1 && launch_gemv_kq_stream(T, a, out_type, paired, max_tiles, ctx, x_rows)) return;
  }
  const int blocks = (a.row_end[0] + kGemvRows - 1) / kGemvRows;
  constexpr bool kSingle = T == DType::F16 || T == DType::F32 || T == DType::Q8_0 || T == DType::Q4_K ||
                           T == DType::Q6_K || T == DType::F8_E4M3_ROW;
  if (kSingle && a.n == 1) launch_gemv_cols<T, kSingle ? 1 : kMaxCols>(a, out_type, paired, blocks, max_tiles, ctx);
  else launch_gemv_cols<T, kMaxCols>(a, out_type, paired, blocks, max_tiles, ctx);
}

// The shared-memory opt-ins of the kernels that bulk-copy rows (gemv_device_setup).
template <typename OutT, bool kPaired>
void opt_in_bulk_copies() {
#if !defined(RF_PORTABLE)
  const auto set = [](auto* kernel, size_t bytes) {
    RF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  };
  for (auto* kernel : {gemv_tma_kernel<DType::F16, OutT, kPaired, kGemvRows>, gemv_tma_kernel<DType::F16, OutT, kPaired, 2>,
                       gemv_tma_kernel<DType::F8_E4M3_ROW, OutT, kPaired, kGemvRows>,
                       gemv_tma_kernel<DType::F8_E4M3_ROW, OutT, kPaired, 2>,
                       gemv_tma_kernel<DType::F16, OutT, kPaired, 1>, gemv_tma_kernel<DType::F8_E4M3_ROW, OutT, kPaired, 1>})
    set(kernel, kTmaMaxBlockBytes);
  set(gemv_kq_kernel<DType::Q4_K, OutT, kPaired, 1, 1>, kKqTmaMaxBytes);
  set(gemv_kq_kernel<DType::Q4_K, OutT, kPaired, kMaxCols, 1>, kKqTmaMaxBytes);
  set(gemv_kq_kernel<DType::Q6_K, OutT, kPaired, 1, 1>, kKqTmaMaxBytes);
  set(gemv_kq_kernel<DType::Q6_K, OutT, kPaired, kMaxCols, 1>, kKqTmaMaxBytes);
#endif
}

}  // namespace

void gemv_device_setup() {
  opt_in_bulk_copies<float, false>();
  opt_in_bulk_copies<float, true>();
  opt_in_bulk_copies<__half, false>();
  opt_in_bulk_copies<__half, true>();
}

namespace {

// The bulk-copy and prefetch switches for weights at these addresses.
void set_bulk_loads(GemvArgs& a, DType w_type, bool aligned, const LaunchCtx& ctx) {
  aligned = aligned && a.row_bytes % 16 == 0 && a.row_bytes < (size_t(1) << 31);
  // The prefetch speeds up the k-quant GEMVs; the f16 one's loads already
  // stream, and prefetching slows it.
  a.prefetch = aligned && ctx.tuning.l2_prefetch && (w_type == DType::Q4_K || w_type == DType::Q6_K);
#if defined(RF_PORTABLE)
  a.tma = false;  // RF_PORTABLE: no bulk copies
#else
  a.tma = aligned && ctx.tuning.tma_gemv;
#endif
}

}  // namespace

void gemv_experts(DType w_type, const void* w, const void* w_up, bool gelu, size_t expert_bytes, size_t row_bytes,
                  int m, int k, const void* x, bool x_one_row, int x_rows, void* out, DType out_type,
                  const int32_t* tiles, const int32_t* n_tiles, int max_tiles, int max_tile_rows,
                  const LaunchCtx& ctx) {
  RF_CHECK(out_type == DType::F32 || out_type == DType::F16, "gemv: output must be f32 or f16");
  RF_CHECK(!x_one_row || max_tile_rows == 1, "gemv_experts: one shared activation row means tiles of one row");
  RF_CHECK(max_tile_rows >= 1 && max_tile_rows <= kMaxCols, "gemv_experts: tiles of 1..", kMaxCols, " rows");
  if (max_tiles <= 0) return;
  GemvArgs a{};
  a.w[0] = static_cast<const uint8_t*>(w);
  a.out[0] = out;
  a.row_end[0] = m;
  a.n_segs = 1;
  a.w_up = static_cast<const uint8_t*>(w_up);
  a.gelu = gelu;
  a.row_bytes = row_bytes;
  a.k = k;
  a.n = max_tile_rows;
  a.x = static_cast<const __half*>(x);
  a.x_one_row = x_one_row;
  a.tiles = reinterpret_cast<const int4*>(tiles);
  a.n_tiles = n_tiles;
  a.expert_bytes = expert_bytes;
  set_bulk_loads(a, w_type,
                 expert_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(w_up) % 16 == 0,
                 ctx);
  a.prefetch = false;  // the expert is known only after the wait
  switch (w_type) {
#define RF_CASE(T) \
  case DType::T: launch_gemv_experts<DType::T>(a, out_type, w_up != nullptr, max_tiles, x_rows, ctx); break;
    RF_FOR_EACH_WEIGHT_FORMAT(RF_CASE)
#undef RF_CASE
    default: fail("cuda moe: expert weight type ", dtype_name(w_type), " is not supported");
  }
  RF_GPU_CHECK_LAUNCH();
}

namespace {
// The arguments of segments stacked in one launch (GemvArgs' segments).
GemvArgs segment_args(const GemvSegment* segs, int n_segs, size_t row_bytes, int k, const void* x, int n) {
  GemvArgs a{};
  int end = 0;
  for (int i = 0; i < n_segs; ++i) {
    a.w[i] = static_cast<const uint8_t*>(segs[i].w);
    a.out[i] = segs[i].out;
    a.bias[i] = segs[i].bias;
    end += segs[i].rows;
    a.row_end[i] = end;
  }
  a.n_segs = n_segs;
  a.row_bytes = row_bytes;
  a.k = k;
  a.n = n;
  a.x = static_cast<const __half*>(x);
  return a;
}
}  // namespace

bool gemv_fuses_norm(const Tuning& tuning, DType w_type, size_t row_bytes, bool paired) {
#if defined(RF_PORTABLE)
  (void)tuning, (void)w_type, (void)row_bytes, (void)paired;
  return false;  // (no bulk-copying kernel)
#else
  return w_type == DType::F16 && tuning.tma_gemv && row_bytes % 16 == 0 &&
         (paired ? 2 : 1) * row_bytes <= kTmaMaxBlockBytes;
#endif
}

void gemv_segments(DType w_type, const GemvSegment* segs, int n_segs, const void* w_up, bool gelu, size_t row_bytes,
                   int k, const void* x, int n, DType out_type, const LaunchCtx& ctx, const GemvNormFusion* fusion) {
  RF_CHECK(out_type == DType::F32 || out_type == DType::F16, "gemv: output must be f32 or f16");
  RF_CHECK(n_segs >= 1 && n_segs <= 3 && (!w_up || n_segs == 1), "gemv: 1..3 segments (one when paired)");
  GemvArgs a = segment_args(segs, n_segs, row_bytes, k, x, n);
  a.w_up = static_cast<const uint8_t*>(w_up);
  a.gelu = gelu;
  bool aligned = true;
  for (int i = 0; i < n_segs; ++i) aligned = aligned && reinterpret_cast<uintptr_t>(segs[i].w) % 16 == 0;
  if (w_up) aligned = aligned && reinterpret_cast<uintptr_t>(w_up) % 16 == 0;
  set_bulk_loads(a, w_type, aligned, ctx);
  if (fusion) {
    // Only the f16 bulk-copying kernel has the fused epilogue and prologue.
    RF_CHECK(n == 1 && a.tma && gemv_fuses_norm(ctx.tuning, w_type, row_bytes, w_up != nullptr) &&
                 (!fusion->residual || (n_segs == 1 && !w_up && fusion->residual_f16)),
             "gemv: a fused residual / RMSNorm needs one f16 row on the bulk-copying kernel");
    a.residual = fusion->residual;
    a.residual_f16 = static_cast<__half*>(fusion->residual_f16);
    a.x_rms = fusion->x_rms;
    a.rms_eps = fusion->eps;
  }
  switch (w_type) {
#define RF_CASE(T) \
  case DType::T: return launch_gemv<DType::T>(a, out_type, w_up != nullptr, ctx);
    RF_FOR_EACH_WEIGHT_FORMAT(RF_CASE)
#undef RF_CASE
    default: fail("cuda matmul: weight type ", dtype_name(w_type), " is not supported");
  }
}

bool gemv_segments_two_formats(DType t0, const GemvSegment* segs0, int n0, size_t row_bytes0, DType t1,
                               const GemvSegment* segs1, int n1, size_t row_bytes1, int k, const void* x,
                               const LaunchCtx& ctx) {
  RF_CHECK(n0 >= 1 && n1 >= 1 && n0 + n1 <= 3, "gemv: 1..3 segments in all");
  return launch_gemv_kq_stream_two(t0, segment_args(segs0, n0, row_bytes0, k, x, 1), t1,
                                   segment_args(segs1, n1, row_bytes1, k, x, 1), ctx);
}

void gemv(DType w_type, const void* w, size_t row_bytes, int m, int k, const void* x, int n, void* out, DType out_type,
          const LaunchCtx& ctx) {
  const GemvSegment seg{w, out, m};
  gemv_segments(w_type, &seg, 1, nullptr, false, row_bytes, k, x, n, out_type, ctx);
}

}  // namespace rf::gpu
