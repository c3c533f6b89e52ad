// The streaming GEMV's kernel and launchers, templated on the weight format
// (gemv_stream.cu describes the scheme): gemv_stream_rows (a block's rows:
// rows per warp, warps per row set, lane groups, expert tiles), the
// kernels around it, and launch_stream_rows / _own_rows / _type / _rows_n
// that pick a variant for a launch. Included by each translation unit that
// instantiates formats (gemv_stream.cu; gemv_stream_grid.cu for the grid
// i-quants), so that their kernels compile in parallel.
#pragma once

#include <cstddef>
#include <type_traits>

#include "backend/cuda/elementwise/glu.cuh"
#include "backend/cuda/matmul/gemv_args.cuh"
#include "backend/cuda/matmul/gemv_dot.cuh"
#include "backend/cuda/matmul/gemv_stream_format.cuh"

namespace rf::gpu {
namespace {

// kSplit warps share a set of rows, splitting its chunks (lane l of part
// p: chunks p W + l, (p + kSplit) W + l, ...) and adding their sums through
// shared memory: long rows (the 14336-wide down projections) otherwise
// leave each warp a chain of dependent loads.
//
// kOwnRows (expert mode, Tuning::kq_stream_expert_rows): each tile
// reads its own row of the quantized activations, not the shared first one.
//
// kGroup (> 0: rows shorter than a warp's lanes have chunks, e.g. Qwen3-MoE's
// 768-wide expert down rows, Tuning::kq_stream_short_expert_rows; or
// rows of a chunk count the warp's lanes do not divide, stream_group): the
// warp's lanes split into groups of kGroup (a multiple of 4), each taking
// its own set of rows, so that no lane idles; 0: the whole warp one set.
//
// kEarlyTwo (Tuning::kq_stream_early_two): a lane's first two chunks
// load before the PDL wait, not one (stream_chunks_two_loaded).
//
// The body, for block `block` of a's rows (gemv_stream_kernel; the
// two-format kernel below runs two of them).
template <DType T, typename OutT, bool kPaired, int kRows, int kSplit, bool kOwnRows = false, int kGroup = 0,
          bool kEarlyTwo = false>
__device__ __forceinline__ void gemv_stream_rows(const GemvArgs& a, int block) {
  using F = StreamFormat<T>;
  constexpr int S = kRows * (kPaired ? 2 : 1);  // rows a warp reads: gate (or plain) rows, then up rows
  constexpr int W = RF_WARP_SIZE, kSets = kStreamWarps / kSplit;
  constexpr int G = kGroup > 0 ? kGroup : W, kSlots = W / G;  // lanes per set of rows, sets per warp
  static_assert(kStreamWarps % kSplit == 0, "gemv_stream_kernel: warps per block split evenly");
  static_assert(G % 4 == 0 && W % G == 0 && (kGroup == 0 || kSplit == 1), "gemv_stream_kernel: lane groups");
  const int lane = threadIdx.x % W, warp = threadIdx.x / W, set = warp / kSplit, part = warp % kSplit;
  const int glane = lane % G, slot = lane / G;
  const int m = a.n_segs == 1 ? a.row_end[0] : (a.n_segs == 2 ? a.row_end[1] : a.row_end[2]);
  const int r0 = ((block * kSets + set) * kSlots + slot) * kRows;
  // Expert mode (one token): this block row's tile names the expert, known
  // only once the previous kernels are done (gemv_tile waits for them).
  GemvTile tile{};
  if (a.tiles && !gemv_tile(a, m, tile)) return;
  const uint8_t* rows[S];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const GemvRow g = gemv_row(a, min(r0 + i, m - 1));  // rows past m repeat the last (not stored)
    rows[i] = g.w + tile.w_off;
    if constexpr (kPaired) rows[kRows + i] = a.w_up + tile.w_off + size_t(g.local) * a.row_bytes;
  }
  const int chunks = a.k / 64, p = glane % 4, first = part * G + glane;
  constexpr int kStride = kSplit * G;
  const int8_t* xq = a.xq;
  const float2* xds = a.xds;
  if constexpr (kOwnRows) {  // the tile's row of quants
    xq += tile.x_row * size_t(a.k);
    xds += tile.x_row * size_t(a.k / 32);
  }
  typename F::Chunk cur[S], next[S];
  if (first < chunks) {
#pragma unroll
    for (int s = 0; s < S; ++s) cur[s] = F::load(rows[s], first, a.weights_l1);
  }
  if constexpr (kEarlyTwo) {
    if (first + kStride < chunks) {
#pragma unroll
      for (int s = 0; s < S; ++s) next[s] = F::load(rows[s], first + kStride, a.weights_l1);
    }
  }
  // Formats with lookup tables in shared memory (the grid i-quants) fill
  // them while the first chunks' loads are in flight.
  if constexpr (requires { F::stage_tables(); }) {
    F::stage_tables();
    __syncthreads();
  }
  pdl_wait();
  pdl_trigger();
  float acc[S];
#pragma unroll
  for (int s = 0; s < S; ++s) acc[s] = 0.0f;
  // Chunk c against every row's loaded chunk (its activations loaded once
  // for all rows).
  const auto step = [&](int c, const typename F::Chunk(&q)[S]) {
    const typename F::XChunk x = F::load_x(xq, xds, c);
#pragma unroll
    for (int s = 0; s < S; ++s) acc[s] += F::dot(q[s], x, p);
  };
  const auto load = [&](int c, typename F::Chunk(&q)[S]) {
#pragma unroll
    for (int s = 0; s < S; ++s) q[s] = F::load(rows[s], c, a.weights_l1);
  };
  if constexpr (kEarlyTwo) stream_chunks_two_loaded(first, chunks, kStride, cur, next, load, step);
  else stream_chunks(first, chunks, kStride, cur, next, load, step);
#pragma unroll
  for (int s = 0; s < S; ++s) {
    if constexpr (kGroup > 0) {
#pragma unroll
      for (int off = G / 2; off >= 1; off /= 2) acc[s] += RF_SHFL_XOR(acc[s], off);
    } else {
      acc[s] = warp_sum(acc[s]);
    }
  }
  if (!sum_split_parts<kSplit>(acc, warp, lane, part)) return;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    if (glane == i && r0 + i < m) {
      float v = acc[i];
      if constexpr (kPaired) {
        v = a.glu_biased ? glu_biased_f16(v, acc[kRows + i], a, tile.expert * size_t(m) + size_t(r0 + i))
                         : glu_f16_rounded(v, acc[kRows + i], a.gelu);
      }
      const GemvRow g = gemv_row(a, r0 + i);
      store_out(static_cast<OutT*>(g.out) + tile.out_off + g.local, with_bias(g, v));
    }
  }
}

template <DType T, typename OutT, bool kPaired, int kRows, int kSplit, bool kOwnRows = false, int kGroup = 0>
__global__ void __launch_bounds__(kStreamWarps* RF_WARP_SIZE) gemv_stream_kernel(GemvArgs a) {
  gemv_stream_rows<T, OutT, kPaired, kRows, kSplit, kOwnRows, kGroup>(a, int(blockIdx.x));
}

// The two-row kernel (one warp a row set; or one row a warp, for the rows
// Tuning::kq_stream_uneven_one_row takes) with a lane's first two
// chunks loaded before the PDL wait (Tuning::kq_stream_early_two).
template <DType T, typename OutT, bool kPaired, int kRows = 2>
__global__ void __launch_bounds__(kStreamWarps* RF_WARP_SIZE) gemv_stream_early_two_kernel(GemvArgs a) {
  gemv_stream_rows<T, OutT, kPaired, kRows, 1, false, 0, true>(a, int(blockIdx.x));
}

// Whether a launch of rows of `chunks` chunks takes the early-two kernel
// (Tuning::kq_stream_early_two: rows whose chunks do not fill a warp's
// lanes evenly).
inline bool stream_early_two(int chunks, const LaunchCtx& ctx) {
  return ctx.tuning.kq_stream_early_two && chunks % ctx.warp_size != 0;
}

// Q6_K's plain two-row kernel (one warp a row set) bounded to 128
// registers, four blocks an SM where 165 leave room for three (no spills):
// for grids past one wave of the unbounded kernel, such as a down
// projection's 448-512 blocks on 132 SMs or the output matrix
// (launch_stream_rows). Below a wave the bound only costs (Phi-3's 384
// blocks).
template <typename OutT>
__global__ void __launch_bounds__(kStreamWarps* RF_WARP_SIZE, 4) gemv_stream_q6k_bounded_kernel(GemvArgs a) {
  gemv_stream_rows<DType::Q6_K, OutT, false, 2, 1>(a, int(blockIdx.x));
}

// Two formats of one width in one launch (q4_k_m's q/k/v where V is Q6_K):
// blocks [0, blocks0) take a0's rows in format T0, the rest a1's in T1; two
// rows per warp, f16 outputs, one shared row of activation quants.
// kEarlyTwo: as gemv_stream_rows'.
template <DType T0, DType T1, int kSplit, bool kEarlyTwo = false>
__global__ void __launch_bounds__(kStreamWarps* RF_WARP_SIZE)
    gemv_stream_two_kernel(GemvArgs a0, GemvArgs a1, int blocks0) {
  if (int(blockIdx.x) < blocks0)
    gemv_stream_rows<T0, __half, false, 2, kSplit, false, 0, kEarlyTwo>(a0, int(blockIdx.x));
  else gemv_stream_rows<T1, __half, false, 2, kSplit, false, 0, kEarlyTwo>(a1, int(blockIdx.x) - blocks0);
}

// Lanes per set of rows (gemv_stream_kernel's kGroup) for rows of `chunks`
// chunks that would leave some of a warp's lanes idle for part of the row:
// 16 where that divides the row evenly (Phi-3's 3072-wide rows: 48 chunks,
// 16 lanes of 3, where a whole warp gives half its lanes 1 chunk and half
// 2; by default such rows go one a warp instead, but for expert tiles:
// Tuning::kq_stream_uneven_one_row), else 0 (the whole warp;
// Tuning::kq_stream_lane_groups). Two rows per warp only. (Not groups of
// 8 for 3584-wide rows, 8 lanes of 7 chunks each: slower, a lane's chunks
// come two at a time.)
// Expert tiles whose rows are one chunk a lane (Qwen3-MoE's 2,048-wide
// gate and up rows) take groups of 16 lanes, two chunks a lane and half the
// blocks (Tuning::kq_stream_expert_groups).
inline int stream_group(int chunks, int rows_per_warp, bool expert_tiles, const LaunchCtx& ctx) {
  const int w = ctx.warp_size;
  if (rows_per_warp != 2 || ctx.tuning.kq_stream_split > 1) return 0;
  if (expert_tiles && ctx.tuning.kq_stream_expert_groups && chunks == w && w % 16 == 0) return 16;
  if (!ctx.tuning.kq_stream_lane_groups || chunks >= 2 * w || chunks % w == 0) return 0;
  return chunks % 16 == 0 ? 16 : 0;
}

// Whether `blocks` of `kernel` need more than one wave on the device.
inline bool past_one_wave(void (*kernel)(GemvArgs), dim3 blocks, unsigned threads, const LaunchCtx& ctx) {
  int per_sm = 0;
  RF_GPU_CHECK(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, int(threads), 0));
  return size_t(blocks.x) * blocks.y > size_t(per_sm) * size_t(ctx.n_sms);
}

template <DType T, typename OutT, bool kPaired, int kRows>
void launch_stream_rows(const GemvArgs& a, int split, int m, int grid_y, const LaunchCtx& ctx) {
  const unsigned threads = unsigned(kStreamWarps * ctx.warp_size);
  if constexpr (kRows == 2) {
    if (const int group = stream_group(a.k / 64, kRows, a.tiles != nullptr, ctx); group > 0) {
      const int rows_per_block = kStreamWarps * (ctx.warp_size / group) * kRows;
      const dim3 blocks(unsigned((m + rows_per_block - 1) / rows_per_block), unsigned(grid_y));
      launch(gemv_stream_kernel<T, OutT, kPaired, kRows, 1, false, 16>, blocks, threads, 0, ctx, a);
      return;
    }
  }
  const int rows_per_block = kStreamWarps / split * kRows;
  const dim3 blocks(unsigned((m + rows_per_block - 1) / rows_per_block), unsigned(grid_y));
  if constexpr (T == DType::Q6_K && !kPaired && kRows == 2) {
    if (split == 1 && past_one_wave(gemv_stream_kernel<T, OutT, kPaired, kRows, 1>, blocks, threads, ctx)) {
      launch(gemv_stream_q6k_bounded_kernel<OutT>, blocks, threads, 0, ctx, a);
      return;
    }
  }
  if constexpr (((T == DType::Q4_K || T == DType::Q6_K) && kRows == 2) ||
                ((T == DType::Q4_K || T == DType::Q5_K) && kRows == 1)) {
    if (split == 1 && stream_early_two(a.k / 64, ctx)) {
      launch(gemv_stream_early_two_kernel<T, OutT, kPaired, kRows>, blocks, threads, 0, ctx, a);
      return;
    }
  }
  if (split == 1) launch(gemv_stream_kernel<T, OutT, kPaired, kRows, 1>, blocks, threads, 0, ctx, a);
  else if (split == 2) launch(gemv_stream_kernel<T, OutT, kPaired, kRows, 2>, blocks, threads, 0, ctx, a);
  else launch(gemv_stream_kernel<T, OutT, kPaired, kRows, 4>, blocks, threads, 0, ctx, a);
}

// Expert tiles reading their own activation rows: f32 outputs, not paired,
// two rows per warp (the down projections' case; few kernels to build).
// Rows of fewer chunks than a warp has lanes: lane groups of 16 (rows of 9
// to 16 chunks) or 8 (up to 8).
template <DType T>
void launch_stream_own_rows(const GemvArgs& a, int m, int grid_y, const LaunchCtx& ctx) {
  constexpr int kRows = 2;
  const int chunks = a.k / 64;
  if (chunks < ctx.warp_size) {
    const int group = chunks <= 8 ? 8 : 16;
    const int rows_per_block = kStreamWarps * (ctx.warp_size / group) * kRows;
    const dim3 blocks(unsigned((m + rows_per_block - 1) / rows_per_block), unsigned(grid_y));
    const unsigned threads = unsigned(kStreamWarps * ctx.warp_size);
    if (group == 8) launch(gemv_stream_kernel<T, float, false, kRows, 1, true, 8>, blocks, threads, 0, ctx, a);
    else launch(gemv_stream_kernel<T, float, false, kRows, 1, true, 16>, blocks, threads, 0, ctx, a);
    return;
  }
  const int split = stream_split(T, chunks, ctx);
  const int rows_per_block = kStreamWarps / split * kRows;
  const dim3 blocks(unsigned((m + rows_per_block - 1) / rows_per_block), unsigned(grid_y));
  const unsigned threads = unsigned(kStreamWarps * ctx.warp_size);
  if (split == 1) launch(gemv_stream_kernel<T, float, false, kRows, 1, true>, blocks, threads, 0, ctx, a);
  else if (split == 2) launch(gemv_stream_kernel<T, float, false, kRows, 2, true>, blocks, threads, 0, ctx, a);
  else launch(gemv_stream_kernel<T, float, false, kRows, 4, true>, blocks, threads, 0, ctx, a);
}

template <DType T, typename OutT, bool kPaired>
void launch_stream(const GemvArgs& a, int rows_per_warp, int m, int grid_y, const LaunchCtx& ctx) {
  const int split = stream_split(T, a.k / 64, ctx);
  if (rows_per_warp == 1) launch_stream_rows<T, OutT, kPaired, 1>(a, split, m, grid_y, ctx);
  else if (rows_per_warp == 2) launch_stream_rows<T, OutT, kPaired, 2>(a, split, m, grid_y, ctx);
  else launch_stream_rows<T, OutT, kPaired, 4>(a, split, m, grid_y, ctx);
}

template <DType T>
void launch_stream_type(const GemvArgs& a, DType out_type, bool paired, int rows_per_warp, int m, int grid_y,
                        const LaunchCtx& ctx) {
  if (out_type == DType::F32) {
    if (paired) launch_stream<T, float, true>(a, rows_per_warp, m, grid_y, ctx);
    else launch_stream<T, float, false>(a, rows_per_warp, m, grid_y, ctx);
  } else {
    if (paired) launch_stream<T, __half, true>(a, rows_per_warp, m, grid_y, ctx);
    else launch_stream<T, __half, false>(a, rows_per_warp, m, grid_y, ctx);
  }
}

// kRows rows per warp (Q5_K and the 32-wide block formats: two; Q5_K one
// as well, for rows that would take lane groups).
template <DType T, int kRows>
void launch_stream_rows_n(const GemvArgs& a, DType out_type, bool paired, int m, int grid_y, const LaunchCtx& ctx) {
  const int split = stream_split(T, a.k / 64, ctx);
  if (out_type == DType::F32) {
    if (paired) launch_stream_rows<T, float, true, kRows>(a, split, m, grid_y, ctx);
    else launch_stream_rows<T, float, false, kRows>(a, split, m, grid_y, ctx);
  } else {
    if (paired) launch_stream_rows<T, __half, true, kRows>(a, split, m, grid_y, ctx);
    else launch_stream_rows<T, __half, false, kRows>(a, split, m, grid_y, ctx);
  }
}


}  // namespace
}  // namespace rf::gpu
