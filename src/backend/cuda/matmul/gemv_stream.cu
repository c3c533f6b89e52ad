// Streaming GEMV for one activation row (batch-1 decode; Q4_K, Q5_K, Q6_K,
// the 32-wide block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, and IQ4_NL,
// IQ4_XS, MXFP4): the weights go straight from memory into registers, no shared memory, no
// block barrier (but for long rows, below), so each warp computes as soon
// as its own bytes land and the loads of every warp overlap the others'
// arithmetic.
//
// A warp takes kRows rows (and their up rows when paired: gate/up fused
// with SiLU/GELU) across the whole width; in expert mode (one token's
// mixture-of-experts FFN) block row y takes the rows of tile y's expert
// (gemv_experts_glu_biased, at the end: a biased gate/up pair with its GLU,
// gpt-oss's, which only this kernel runs). Lane l takes the chunks of 64
// weights l, l + W, l + 2W, ... of each row (W: the warp size; the format's
// StreamFormat, gemv_stream_format.cuh and gemv_stream_iq4.cuh, says which bytes a chunk is). Since W is a multiple of 4, a
// lane's chunks always sit at the same place in their super-blocks. The next chunk's loads are issued before the
// current one is computed, and the first ones before the wait for the
// previous kernel (weights are constant). The activations go in as 8-bit
// quants with a scale per 32 (quantize_act_q8_kernel, launched just before
// into LaunchCtx::act_q8, unless the op that wrote the row handed them over:
// Fusions::act_q8), so the nibbles meet them in integer dot products:
// about one instruction per weight, where f16 arithmetic takes over two.
// (Not bit-equal to f16 activations: within llama.cpp's tolerance for this
// op, NMSE 5e-4; tests/gpu/cuda_ops_test.cpp checks both.)
#include <cstddef>
#include <type_traits>

#include "backend/cuda/elementwise/glu.cuh"
#include "backend/cuda/matmul/gemv_args.cuh"
#include "backend/cuda/matmul/gemv_dot.cuh"
#include "backend/cuda/matmul/gemv_stream_format.cuh"
#include "backend/cuda/matmul/gemv_stream_iq4.cuh"
#include "backend/cuda/matmul/matmul.cuh"

namespace rf::gpu {
namespace {

// x (one row of k f16 activations) as 8-bit quants, per 32: d = max |x| /
// 127, quant = round(x / d), and (d, d * sum of quants). A thread per 32.
__global__ void quantize_act_q8_kernel(const __half* x, int k, int8_t* xq, float2* xds) {
  pdl_wait();
  pdl_trigger();
  const int b = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (b >= k / 32) return;
  const uint4* xp = reinterpret_cast<const uint4*>(x) + size_t(b) * 4;
  float v[32];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float f[8];
    half8_to_float(xp[i], f);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      v[8 * i + j] = f[j];
      amax = fmaxf(amax, fabsf(f[j]));
    }
  }
  const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
  uint32_t packed[8];
  int sum = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int q = __float2int_rn(v[4 * i + j] * inv);
      sum += q;
      word |= uint32_t(q & 0xFF) << (8 * j);
    }
    packed[i] = word;
  }
  uint4* out = reinterpret_cast<uint4*>(xq) + size_t(b) * 2;
  out[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  out[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  xds[b] = make_float2(d, d * float(sum));
}

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
bool stream_early_two(int chunks, const LaunchCtx& ctx) {
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
int stream_group(int chunks, int rows_per_warp, bool expert_tiles, const LaunchCtx& ctx) {
  const int w = ctx.warp_size;
  if (rows_per_warp != 2 || ctx.tuning.kq_stream_split > 1) return 0;
  if (expert_tiles && ctx.tuning.kq_stream_expert_groups && chunks == w && w % 16 == 0) return 16;
  if (!ctx.tuning.kq_stream_lane_groups || chunks >= 2 * w || chunks % w == 0) return 0;
  return chunks % 16 == 0 ? 16 : 0;
}

// Whether `blocks` of `kernel` need more than one wave on the device.
bool past_one_wave(void (*kernel)(GemvArgs), dim3 blocks, unsigned threads, const LaunchCtx& ctx) {
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

int stream_split(DType t, int chunks, const LaunchCtx& ctx) {
  if (ctx.tuning.kq_stream_split > 0) return ctx.tuning.kq_stream_split;
  const int w = ctx.warp_size;
  // k-quants: one warp a row set up to 10 warp widths (with Q6_K's bounded
  // kernel past one wave, launch_stream_rows), which covers 18,944-wide
  // rows (296 chunks, where 4 warps would give a lane 2 or 3 chunks of 74 a
  // part). The 32-wide block formats keep the rule below: one warp up to
  // 8 widths is slower on their 13,696-wide rows.
  if (t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K) return chunks <= 10 * w ? 1 : 4;
  return chunks <= 2 * w ? 1 : chunks <= 4 * w ? 2 : 4;
}

void quantize_act_q8_rows(const void* x, int elems, const LaunchCtx& ctx) {
  const int groups = elems / 32;
  launch(quantize_act_q8_kernel, unsigned((groups + 127) / 128), 128u, 0, ctx, static_cast<const __half*>(x), elems,
         act_q8_quants(ctx.act_q8), act_q8_scales(ctx.act_q8));
  act_q8_clobber(ctx);
}

namespace {
// The 32-wide block formats (rows of whole 64-weight chunks).
bool block32(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0 ||
         t == DType::IQ4_NL || t == DType::MXFP4;
}
// The formats whose expert tiles may read rows of their own (the down
// projections' kernels; few kernels to build: q4_k_m's and gpt-oss's).
bool own_rows_format(DType t) { return t == DType::Q4_K || t == DType::Q6_K || t == DType::MXFP4; }
// Rows per warp of the streaming kernel for this format (0: not streamed).
// (Q5_K, IQ4_XS and the 32-wide block formats: two, where Q4_K streams at
// all; fewer kernels to build.)
int stream_rows(const Tuning& tuning, DType w_type) {
  switch (w_type) {
    case DType::Q4_K: return tuning.kq_stream_rows;
    case DType::Q5_K:
    case DType::IQ4_XS: return tuning.kq_stream_rows > 0 ? 2 : 0;
    case DType::IQ4_NL:
    case DType::MXFP4:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0: return tuning.kq_stream_rows > 0 && tuning.block32_stream ? 2 : 0;
    case DType::Q6_K: return tuning.kq_stream_q6k_rows;
    default: return 0;
  }
}
}  // namespace

bool gemv_quantizes_activations(const Tuning& tuning, int warp_size, DType w_type, int n, int k) {
  // Whole super-blocks (32-wide blocks: whole chunks of 64; glm4-9b's 13,696-wide rows).
  const int unit = block32(w_type) ? 64 : 256;
  return stream_rows(tuning, w_type) > 0 && n == 1 && k % unit == 0 && k <= kActQ8MaxK && k / 64 >= warp_size;
}

bool gemv_expert_rows_quantize_activations(const Tuning& tuning, int warp_size, DType w_type, int k) {
  if (!tuning.kq_stream_expert_rows || stream_rows(tuning, w_type) != 2 || !own_rows_format(w_type)) return false;
  if (gemv_quantizes_activations(tuning, warp_size, w_type, 1, k)) return true;
  // Lane groups: the k-quants' short rows (MXFP4's only as wide as gpt-oss's).
  return tuning.kq_stream_short_expert_rows && k % 256 == 0 && k >= 256 && w_type != DType::MXFP4;
}

bool act_q8_fusable(const LaunchCtx& ctx, int rows, int k) {
  return ctx.tuning.fusions.act_q8 && ctx.act_q8 && ctx.act_q8_record && ctx.act_q8_produce && rows == 1 &&
         k % 32 == 0 && k > 0 && k <= kActQ8MaxK;
}

void act_q8_record(const LaunchCtx& ctx, const void* src, int k) {
  if (!ctx.act_q8_record) return;
  ActQ8Record& r = *ctx.act_q8_record;
  // (Without fused_act_q8 no op reads another's quants: nothing to hand over.)
  r = {ctx.tuning.fusions.act_q8 ? src : nullptr, k, r.version + 1};
}

void act_q8_clobber(const LaunchCtx& ctx) {
  if (ctx.act_q8_record) *ctx.act_q8_record = {nullptr, 0, ctx.act_q8_record->version + 1};
}

bool act_q8_ready(const LaunchCtx& ctx, const void* src, int k) {
  if (!ctx.tuning.fusions.act_q8 || !ctx.act_q8_record || !src || ctx.act_q8_handed != src) return false;
  const ActQ8Record& r = *ctx.act_q8_record;
  return r.src == src && r.k == k;
}

namespace {

// Whether a's weights (and up rows when paired) and activations suit the
// streaming loads of format w_type: Q4_K / Q5_K rows are read in 16-byte
// pieces, Q6_K ones in 4-byte words from 2-aligned super-blocks, the
// 32-wide block formats and IQ4_XS in 4-byte words; MXFP4 in 4-byte words
// from 2-aligned chunks of a 4-aligned matrix (row_align: what row and
// expert strides keep; base_align: the matrices' starts).
bool stream_aligned(DType w_type, const GemvArgs& a, bool paired) {
  const uintptr_t row_align = w_type == DType::Q6_K || w_type == DType::MXFP4 ? 2
                              : block32(w_type) || w_type == DType::IQ4_XS    ? 4
                                                                               : 16;
  const uintptr_t base_align = w_type == DType::MXFP4 ? 4 : row_align;
  bool aligned = reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.row_bytes % row_align == 0 &&
                 a.expert_bytes % row_align == 0 && (!paired || reinterpret_cast<uintptr_t>(a.w_up) % base_align == 0);
  for (int i = 0; i < a.n_segs; ++i) aligned = aligned && reinterpret_cast<uintptr_t>(a.w[i]) % base_align == 0;
  return aligned;
}

// a's activation row as 8-bit quants in ctx.act_q8: handed over by the op
// that wrote the row (fused_act_q8), or written now and recorded, so that
// the op hands them on to another GEMV of the same row.
void act_q8_row(const GemvArgs& a, const LaunchCtx& ctx) {
  if (act_q8_ready(ctx, a.x, a.k)) return;
  const int groups = a.k / 32;
  launch(quantize_act_q8_kernel, unsigned((groups + 127) / 128), 128u, 0, ctx, a.x, a.k, act_q8_quants(ctx.act_q8),
         act_q8_scales(ctx.act_q8));
  act_q8_record(ctx, a.x, a.k);
}

// a reading its activations from ctx.act_q8 (the streaming kernel's).
GemvArgs with_act_q8(const GemvArgs& a, const LaunchCtx& ctx) {
  GemvArgs b = a;
  b.xq = act_q8_quants(ctx.act_q8);
  b.xds = act_q8_scales(ctx.act_q8);
  b.weights_l1 = ctx.tuning.kq_stream_l1;
  return b;
}

}  // namespace

bool launch_gemv_kq_stream(DType w_type, const GemvArgs& args, DType out_type, bool paired, int grid_y,
                           const LaunchCtx& ctx, int x_rows) {
  // Expert tiles of one shared token (x_one_row: quantized once), or of one
  // row each of x's x_rows (kq_stream_expert_rows: quantized together).
  const bool own_rows = args.tiles && !args.x_one_row;
  if (own_rows && (!ctx.tuning.kq_stream_expert_rows || !own_rows_format(w_type) ||
                   size_t(x_rows) * args.k > kActQ8MaxK ||
                   out_type != DType::F32 || paired || stream_rows(ctx.tuning, w_type) != 2))
    return false;
  if (!ctx.act_q8) return false;
  if (own_rows ? !gemv_expert_rows_quantize_activations(ctx.tuning, ctx.warp_size, w_type, args.k)
               : !gemv_quantizes_activations(ctx.tuning, ctx.warp_size, w_type, args.n, args.k))
    return false;
  if (!stream_aligned(w_type, args, paired)) return false;
  if (own_rows) {
    // x_rows rows end to end, quantized as one (groups of 32 never cross a
    // row).
    quantize_act_q8_rows(args.x, x_rows * args.k, ctx);
  } else {
    act_q8_row(args, ctx);
  }
  GemvArgs a = with_act_q8(args, ctx);
  const int m = a.row_end[a.n_segs - 1];
  int rows = stream_rows(ctx.tuning, w_type);
  // Rows of fewer than two chunks a lane that fill a warp unevenly (3072,
  // 3584, 3840 wide): one a warp (Tuning::kq_stream_uneven_one_row).
  const int chunks = a.k / 64;
  if ((w_type == DType::Q4_K || w_type == DType::Q5_K) && rows == 2 && !a.tiles &&
      ctx.tuning.kq_stream_uneven_one_row && chunks < 2 * ctx.warp_size && chunks % ctx.warp_size != 0)
    rows = 1;
  if (own_rows) {
    if (w_type == DType::Q4_K) launch_stream_own_rows<DType::Q4_K>(a, m, grid_y, ctx);
    else if (w_type == DType::MXFP4) launch_stream_own_rows<DType::MXFP4>(a, m, grid_y, ctx);
    else launch_stream_own_rows<DType::Q6_K>(a, m, grid_y, ctx);
  } else if (w_type == DType::Q4_K) {
    launch_stream_type<DType::Q4_K>(a, out_type, paired, rows, m, grid_y, ctx);
  } else if (w_type == DType::Q5_K) {
    if (rows == 1) launch_stream_rows_n<DType::Q5_K, 1>(a, out_type, paired, m, grid_y, ctx);
    else launch_stream_rows_n<DType::Q5_K, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::Q8_0) {
    launch_stream_rows_n<DType::Q8_0, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::Q5_0) {
    launch_stream_rows_n<DType::Q5_0, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::Q4_0) {
    launch_stream_rows_n<DType::Q4_0, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::Q4_1) {
    launch_stream_rows_n<DType::Q4_1, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::Q5_1) {
    launch_stream_rows_n<DType::Q5_1, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::IQ4_NL) {
    launch_stream_rows_n<DType::IQ4_NL, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::IQ4_XS) {
    launch_stream_rows_n<DType::IQ4_XS, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::MXFP4) {
    launch_stream_rows_n<DType::MXFP4, 2>(a, out_type, paired, m, grid_y, ctx);
  } else {
    launch_stream_type<DType::Q6_K>(a, out_type, paired, rows, m, grid_y, ctx);
  }
  return true;
}

bool launch_gemv_kq_stream_two(DType t0, const GemvArgs& a0, DType t1, const GemvArgs& a1, const LaunchCtx& ctx) {
  const auto streams_two_rows = [&](DType t) {
    return (t == DType::Q4_K || t == DType::Q6_K) && stream_rows(ctx.tuning, t) == 2;
  };
  if (!ctx.tuning.fusions.gemv_two_formats || !ctx.act_q8 || t0 == t1 || !streams_two_rows(t0) || !streams_two_rows(t1) ||
      a0.k != a1.k || a0.n != 1 || a1.n != 1 || a0.x != a1.x || a0.tiles || a1.tiles ||
      !gemv_quantizes_activations(ctx.tuning, ctx.warp_size, t0, 1, a0.k) ||
      !gemv_quantizes_activations(ctx.tuning, ctx.warp_size, t1, 1, a1.k) ||
      stream_group(a0.k / 64, 2, false, ctx) != 0)
    return false;
  if (!stream_aligned(t0, a0, false) || !stream_aligned(t1, a1, false)) return false;
  act_q8_row(a0, ctx);
  const GemvArgs b0 = with_act_q8(a0, ctx), b1 = with_act_q8(a1, ctx);
  const int split = stream_split(t0, a0.k / 64, ctx);
  const int rows_per_block = kStreamWarps / split * 2;
  const int m0 = a0.row_end[a0.n_segs - 1], m1 = a1.row_end[a1.n_segs - 1];
  const int blocks0 = (m0 + rows_per_block - 1) / rows_per_block;
  const unsigned blocks = unsigned(blocks0 + (m1 + rows_per_block - 1) / rows_per_block);
  const unsigned threads = unsigned(kStreamWarps * ctx.warp_size);
  const auto go = [&](auto t0c, auto t1c) {
    constexpr DType A = decltype(t0c)::value, B = decltype(t1c)::value;
    if (split == 1 && stream_early_two(a0.k / 64, ctx))
      launch(gemv_stream_two_kernel<A, B, 1, true>, blocks, threads, 0, ctx, b0, b1, blocks0);
    else if (split == 1) launch(gemv_stream_two_kernel<A, B, 1>, blocks, threads, 0, ctx, b0, b1, blocks0);
    else if (split == 2) launch(gemv_stream_two_kernel<A, B, 2>, blocks, threads, 0, ctx, b0, b1, blocks0);
    else launch(gemv_stream_two_kernel<A, B, 4>, blocks, threads, 0, ctx, b0, b1, blocks0);
  };
  using Q4 = std::integral_constant<DType, DType::Q4_K>;
  using Q6 = std::integral_constant<DType, DType::Q6_K>;
  if (t0 == DType::Q4_K) go(Q4{}, Q6{});
  else go(Q6{}, Q4{});
  return true;
}

bool gemv_experts_glu_biased(DType w_type, const void* w_gate, const void* w_up, const float* gate_bias,
                             const float* up_bias, Activation act, size_t expert_bytes, size_t row_bytes, int m, int k,
                             const void* x, void* out, const int32_t* tiles, const int32_t* n_tiles, int max_tiles,
                             const LaunchCtx& ctx) {
  if (max_tiles <= 0) return true;
  GemvArgs a{};
  a.w[0] = static_cast<const uint8_t*>(w_gate);
  a.out[0] = out;
  a.row_end[0] = m;
  a.n_segs = 1;
  a.w_up = static_cast<const uint8_t*>(w_up);
  a.glu_biased = true;
  a.act = act;
  a.glu_gate_bias = gate_bias;
  a.glu_up_bias = up_bias;
  a.row_bytes = row_bytes;
  a.k = k;
  a.n = 1;
  a.x = static_cast<const __half*>(x);
  a.x_one_row = true;
  a.tiles = reinterpret_cast<const int4*>(tiles);
  a.n_tiles = n_tiles;
  a.expert_bytes = expert_bytes;
  const bool launched = launch_gemv_kq_stream(w_type, a, DType::F16, true, max_tiles, ctx);
  if (launched) RF_GPU_CHECK_LAUNCH();
  return launched;
}

}  // namespace rf::gpu
