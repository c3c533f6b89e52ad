// Hopper tensor-core GEMM for batched decode (9..64 activation rows a launch)
// straight from Q4_K, Q5_K, Q6_K and the 32-wide block formats (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0; in expert mode also MXFP4, whose k may end in a partial
// stage of whole blocks): wgmma_matmul_kernel, its launcher and
// shared-memory opt-in. The weights are wgmma's register operand: each
// warpgroup dequantizes its 64 weight rows into the A-fragment layout (k in
// natural order) while the tensor cores work on the previous 16-wide k step
// asynchronously. The activations are the shared-memory operand, staged
// K-major with the 128-byte swizzle: 64 columns, or 16 for launches (and
// MoE expert tiles) of up to 16 rows. Weights (packed) and activations stream
// through a ring of shared-memory stages by cp.async, so the latency of DRAM
// is covered by the ring instead of registers: gemm_mma.cu's mma.sync kernel
// held a chunk of weights in registers and waited on it every chunk. Long k
// ranges are split over blocks, the splits' f32 partials summed in a fixed
// order by a second launch (mma_sum_splits: deterministic results). sm_90a
// only; other targets keep gemm_mma.cu (wgmma_matmul_supported() is false
// there). The block shape, the formats' stage layouts, the wgmma
// instructions and the fragment builders are gemm_wgmma_fragments.cuh's.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/matmul/gemm_wgmma_fragments.cuh"
#include "backend/cuda/matmul/matmul.cuh"

namespace rf::gpu {

#if !defined(RF_PORTABLE)
namespace {

// ---- stage copies ---------------------------------------------------------------------

using WgArgs = QuantGemmArgs;  // dense and expert mode

// A thread's share of the stage copies, fixed for the whole k range: weight
// pieces tid + kThreads j of a stage (row-major, so a warp's copies are
// contiguous runs of rows) and the 16-byte pieces tid % kTpr + kTpr j of
// activation row tid / kTpr (N = 64: one in each 64-wide swizzle atom, at
// the same swizzled column; N = 16: one piece, threads past the stage's
// pieces idle). Source addresses are computed once.
template <DType T, int N>
struct StageCopier {
  using F = WgFormat<T>;
  static constexpr int kTpr = std::min(kThreads / N, F::kChunk / 8);  // threads an activation row
  static constexpr int kXPieces = F::kChunk / 8 / kTpr;                // 16-byte pieces a thread a stage
  static_assert(F::kChunk / 8 % kTpr == 0, "activation pieces share out evenly");
  static constexpr int kPieces = (kRows * F::kUnits + kThreads - 1) / kThreads;
  const uint8_t* w[kPieces];  // this thread's pieces' rows at super-block 0 (aligned formats: the pieces)
  uint32_t w_dst[kPieces];    // ... their offsets in a weight stage
  const uint8_t* x;           // its activation row at chunk 0
  int x_row, x_piece0;        // ... the row, the first piece
  bool x_valid;
  int k;                      // (kPartialStage formats: where the last stage ends)
  __device__ __forceinline__ StageCopier(const WgArgs& a, int row0) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int j = 0; j < kPieces; ++j) {
      const int i = tid + kThreads * j, r = min(i / F::kUnits, kRows - 1), u = i % F::kUnits;
      // Rows past m repeat row m - 1.
      w[j] = a.w + size_t(min(row0 + r, a.m - 1)) * a.row_bytes + (F::kAligned ? 16 * u : 0);
      w_dst[j] = uint32_t(r * F::kRowStride + 16 * u);
    }
    x_row = tid / kTpr;
    x_piece0 = tid % kTpr;
    k = a.k;
    x_valid = x_row < a.n;  // rows past n are zeros
    x = reinterpret_cast<const uint8_t*>(a.x + size_t(x_valid ? x_row : 0) * a.k);
  }
  __device__ __forceinline__ bool copies_activations() const { return N * kTpr == kThreads || x_row < N; }
  // A stage's bytes of a row: all of F::kStageBytes but in a partial last
  // stage (kPartialStage formats: its whole blocks).
  __device__ __forceinline__ uint32_t stage_bytes(int c) const {
    if constexpr (!kPartialStage<T>) return F::kStageBytes;
    return uint32_t(min(F::kChunk, k - c * F::kChunk) / kQK * int(sizeof(BlockMXFP4)));
  }
  __device__ __forceinline__ void weights(int c, uint8_t* ws) const {
    const uint32_t bytes = stage_bytes(c);
#pragma unroll
    for (int j = 0; j < kPieces; ++j) {
      if (kThreads * (j + 1) <= kRows * F::kUnits || int(threadIdx.x) + kThreads * j < kRows * F::kUnits) {
        const uint8_t* src = w[j] + size_t(c) * F::kStageBytes;
        if constexpr (!F::kAligned) {  // the piece's place in the window from the boundary below
          const uint32_t unit = w_dst[j] % F::kRowStride, lo = uint32_t(reinterpret_cast<uintptr_t>(src) & 15);
          // (A row's last unit can lie wholly past its stage bytes: then it is not copied.)
          if ((kPartialStage<T> || 16 * (F::kUnits - 1) >= F::kStageBytes) && unit >= lo + bytes) continue;
          src = src - lo + unit;
        }
        copy16_async(ws + w_dst[j], src);
      }
    }
  }
  __device__ __forceinline__ void activations(int c, uint8_t* xs) const {
    if (!copies_activations()) return;
    const uint8_t* src = x + size_t(c) * F::kChunk * 2;
#pragma unroll
    for (int j = 0; j < kXPieces; ++j) {
      const int u = x_piece0 + kTpr * j;  // piece u: swizzle atom u / 8, column u % 8
      const uint32_t dst = uint32_t((u / 8) * kAtomBytes<N> + x_row * 128 + (((u % 8) ^ (x_row & 7)) << 4));
      // (a partial last stage: columns past k are zeros, not read)
      const bool in_k = !kPartialStage<T> || c * F::kChunk + 8 * u < k;
      copy16_async_or_zero(xs + dst, in_k ? src + 16 * u : x, x_valid && in_k);
    }
  }
};
// Where stage c of a thread's row starts in its stage row (0 for the
// aligned formats): the row's address modulo 16, moved on c stages.
template <DType T>
__device__ __forceinline__ uint32_t block_in_window(uint32_t row_addr_lo, int c) {
  if constexpr (WgFormat<T>::kAligned) return 0;
  return (row_addr_lo + uint32_t(c) * uint32_t(WgFormat<T>::kStageBytes)) & 15u;
}

// kExperts: expert mode (a.tiles set; compiled apart so that the dense
// kernel's registers stay as tuned).
template <DType T, typename OutT, bool kExperts, int N>
__global__ void __launch_bounds__(kThreads, 1) wgmma_matmul_kernel(WgArgs a) {
  using F = WgFormat<T>;
  constexpr int S = kStages<T, N>;
  constexpr int kXS = kXStage<T, N>;
  constexpr int kWStage = kRows * F::kRowStride;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  uint8_t* xs = smem_raw + ((1024 - (raw_addr & 1023)) & 1023);  // swizzle atoms 1024-byte aligned
  uint8_t* ws = xs + S * kXS;
  const uint32_t xs_addr = static_cast<uint32_t>(__cvta_generic_to_shared(xs)), ws_addr = xs_addr + S * kXS;

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kRows;
  const int n_chunks = (a.k + F::kChunk - 1) / F::kChunk;  // (kPartialStage formats: the last may be partial)
  if constexpr (kExperts) {  // the tiles are the previous kernel's output
    pdl_wait();
    if (int(blockIdx.y) >= *a.n_tiles) return;
    const int4 tile = a.tiles[blockIdx.y];
    a.w += size_t(tile.x) * a.expert_bytes;
    a.x += size_t(tile.y) * a.k;
    a.out = static_cast<OutT*>(a.out) + size_t(tile.y) * a.m;
    a.n = tile.z;
  }
  const bool split = !kExperts && gridDim.y > 1;
  const int c_begin = kExperts ? 0 : blockIdx.y * a.chunks_per_split;
  const int count = min(n_chunks, c_begin + a.chunks_per_split) - c_begin;

  // Weights are constant: the first stages' copies start before the wait on
  // the previous kernel (in expert mode, after it: the tile names the expert). Group s holds stage s's activations (group 0 also
  // the weights of stages 0 .. S - 2).
  const StageCopier<T, N> copier(a, row0);
#pragma unroll
  for (int s = 0; s < S - 1; ++s)
    if (s < count) copier.weights(c_begin + s, ws + s * kWStage);
  pdl_wait();
  pdl_trigger();
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < count) copier.activations(c_begin + s, xs + s * kXS);
    copy_commit();
  }

  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  const int r_local = warp * 16 + g;
  // Low address bits of this thread's two rows (where unaligned super-blocks sit in their windows).
  const auto row_lo = [&](int r) {
    return uint32_t(reinterpret_cast<uintptr_t>(a.w + size_t(min(row0 + r, a.m - 1)) * a.row_bytes)) & 15u;
  };
  const uint32_t row_lo0 = row_lo(r_local), row_lo8 = row_lo(r_local + 8);
  for (int i = 0; i < count; ++i) {
    const int slot = i % S;
    copy_wait<S - 2>();
    fence_proxy_async();
    __syncthreads();  // stage i landed everywhere; every warpgroup is done with stage i - 1's slot
    if (i + S - 1 < count) {
      const int refill = (i + S - 1) % S;
      copier.weights(c_begin + i + S - 1, ws + refill * kWStage);
      copier.activations(c_begin + i + S - 1, xs + refill * kXS);
    }
    copy_commit();
    const uint32_t wst = ws_addr + slot * kWStage;
    const uint32_t r0 = wst + r_local * F::kRowStride + block_in_window<T>(row_lo0, c_begin + i);
    const uint32_t r8 = wst + (r_local + 8) * F::kRowStride + block_in_window<T>(row_lo8, c_begin + i);
    const uint64_t desc0 = swizzled_desc(xs_addr + slot * kXS);
    fence_acc(acc);
    if constexpr (T == DType::Q4_K || T == DType::Q5_K)
      q45k_stage<T == DType::Q5_K, N>(r0, r8, t, desc0, acc);
    else if constexpr (T == DType::Q6_K)
      q6k_stage<N>(r0, r8, t, desc0, acc);
    else if constexpr (T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q5_0 || T == DType::Q5_1)
      nibble_stage<T, N>(r0, r8, t, desc0, acc);
    else if constexpr (T == DType::MXFP4)
      mxfp4_stage<N>(r0, r8, t, desc0, acc, min(F::kChunk, a.k - (c_begin + i) * F::kChunk) / kQK);
    else
      q8_0_stage<N>(r0, r8, t, desc0, acc);
    wgmma_wait<0>();  // the slot is refilled after the next barrier
    fence_acc(acc);
  }

  // D fragment: acc[4 i + e] = out^T row g (e < 2) or g + 8, column 8 i + 2 t + (e & 1).
#pragma unroll
  for (int i = 0; i < N / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * i + 2 * t + (e & 1), row = row0 + r_local + (e < 2 ? 0 : 8);
      if (col >= a.n || row >= a.m) continue;
      const size_t o = size_t(col) * a.m + row;
      if (split)
        a.partials[size_t(blockIdx.y) * a.n * a.m + o] = acc[4 * i + e];
      else
        static_cast<OutT*>(a.out)[o] = from_float<OutT>(acc[4 * i + e]);
    }
  }
}

template <DType T, typename OutT>
void opt_in_smem() {
  const auto opt_in = [](auto* kernel, size_t bytes) {
    RF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  };
  opt_in(wgmma_matmul_kernel<T, OutT, false, 64>, smem_bytes<T, 64>());
  opt_in(wgmma_matmul_kernel<T, OutT, true, 64>, smem_bytes<T, 64>());
  opt_in(wgmma_matmul_kernel<T, OutT, false, 16>, smem_bytes<T, 16>());
  opt_in(wgmma_matmul_kernel<T, OutT, true, 16>, smem_bytes<T, 16>());
}

// The kernel for a launch of up to `cols` activation rows a tile.
template <DType T, bool kExperts>
void launch_wgmma(const WgArgs& a, dim3 grid, int cols, DType out_type, const LaunchCtx& ctx) {
  const bool f32 = out_type == DType::F32;
  if (cols <= 16 && ctx.tuning.wgmma_narrow)
    return f32 ? launch(wgmma_matmul_kernel<T, float, kExperts, 16>, grid, dim3(kThreads), smem_bytes<T, 16>(), ctx, a)
               : launch(wgmma_matmul_kernel<T, __half, kExperts, 16>, grid, dim3(kThreads), smem_bytes<T, 16>(), ctx,
                        a);
  f32 ? launch(wgmma_matmul_kernel<T, float, kExperts, 64>, grid, dim3(kThreads), smem_bytes<T, 64>(), ctx, a)
      : launch(wgmma_matmul_kernel<T, __half, kExperts, 64>, grid, dim3(kThreads), smem_bytes<T, 64>(), ctx, a);
}

// k a stage and a row's bytes of it, by weight format.
bool block32(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0;
}
int stage_k(DType t) { return block32(t) || t == DType::MXFP4 ? 4 * kQK : kQuantGemmChunk; }
int stage_row_bytes(DType t) {
  switch (t) {
    case DType::Q5_K: return WgFormat<DType::Q5_K>::kStageBytes;
    case DType::Q6_K: return WgFormat<DType::Q6_K>::kStageBytes;
    case DType::Q8_0: return WgFormat<DType::Q8_0>::kStageBytes;
    case DType::Q5_0: return WgFormat<DType::Q5_0>::kStageBytes;
    case DType::Q4_0: return WgFormat<DType::Q4_0>::kStageBytes;
    case DType::Q4_1: return WgFormat<DType::Q4_1>::kStageBytes;
    case DType::Q5_1: return WgFormat<DType::Q5_1>::kStageBytes;
    default: return WgFormat<DType::Q4_K>::kStageBytes;
  }
}

}  // namespace

// (MXFP4: expert mode only, k any multiple of 32.)
bool wgmma_experts_supported(DType w_type, int k) {
  return w_type == DType::MXFP4 ? k % kQK == 0 && k > 0 : wgmma_matmul_supported(w_type, k);
}

void wgmma_matmul_experts(DType w_type, const void* w, size_t expert_bytes, size_t row_bytes, int m, int k,
                          const void* x, void* out, DType out_type, const int32_t* tiles, const int32_t* n_tiles,
                          int max_tiles, int tile_rows, const LaunchCtx& ctx) {
  RF_CHECK(wgmma_experts_supported(w_type, k), "wgmma matmul: unsupported expert weight type ", dtype_name(w_type),
           " or width ", k);
  RF_CHECK(tile_rows >= 1 && tile_rows <= kCols, "wgmma matmul: expert tiles of ", tile_rows, " rows");
  if (max_tiles <= 0) return;
  int splits = 1;
  WgArgs a = quant_gemm_args("wgmma matmul", w, row_bytes, m, k, x, kCols, kCols, out, out_type, splits, nullptr,
                             w_type == DType::MXFP4 ? kQK : stage_k(w_type));
  a.tiles = reinterpret_cast<const int4*>(tiles);
  a.n_tiles = n_tiles;
  a.expert_bytes = expert_bytes;
  const dim3 grid(unsigned((m + kRows - 1) / kRows), unsigned(max_tiles));
  switch (w_type) {
    case DType::Q4_K: return launch_wgmma<DType::Q4_K, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q5_K: return launch_wgmma<DType::Q5_K, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q6_K: return launch_wgmma<DType::Q6_K, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q5_0: return launch_wgmma<DType::Q5_0, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q4_0: return launch_wgmma<DType::Q4_0, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q4_1: return launch_wgmma<DType::Q4_1, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q5_1: return launch_wgmma<DType::Q5_1, true>(a, grid, tile_rows, out_type, ctx);
    case DType::MXFP4: return launch_wgmma<DType::MXFP4, true>(a, grid, tile_rows, out_type, ctx);
    default: return launch_wgmma<DType::Q8_0, true>(a, grid, tile_rows, out_type, ctx);
  }
}

void wgmma_device_setup() {
  opt_in_smem<DType::Q4_K, float>();
  opt_in_smem<DType::Q4_K, __half>();
  opt_in_smem<DType::Q5_K, float>();
  opt_in_smem<DType::Q5_K, __half>();
  opt_in_smem<DType::Q6_K, float>();
  opt_in_smem<DType::Q6_K, __half>();
  opt_in_smem<DType::Q8_0, float>();
  opt_in_smem<DType::Q8_0, __half>();
  opt_in_smem<DType::Q5_0, float>();
  opt_in_smem<DType::Q5_0, __half>();
  opt_in_smem<DType::Q4_0, float>();
  opt_in_smem<DType::Q4_0, __half>();
  opt_in_smem<DType::Q4_1, float>();
  opt_in_smem<DType::Q4_1, __half>();
  opt_in_smem<DType::Q5_1, float>();
  opt_in_smem<DType::Q5_1, __half>();
  opt_in_smem<DType::MXFP4, float>();
  opt_in_smem<DType::MXFP4, __half>();
}

bool wgmma_matmul_supported(DType w_type, int k) {
  return (w_type == DType::Q4_K || w_type == DType::Q5_K || w_type == DType::Q6_K || block32(w_type)) &&
         k % stage_k(w_type) == 0;
}

int wgmma_matmul_splits(DType w_type, int m, int k, int n, int n_sms, int split_cost) {
  // One block is resident an SM (its shared memory): a launch takes about
  // waves x (stages a block) stage-times, plus, when split, split_cost for
  // the partials' sum and the stage-times their bytes (written and read
  // back) would stream in. Each split keeps >= 2 stages; ties go to fewer
  // splits.
  const int row_blocks = (m + kRows - 1) / kRows, n_chunks = k / stage_k(w_type);
  const double block_bytes = double(stage_row_bytes(w_type));
  const double wave_stage_bytes = double(n_sms) * kRows * block_bytes;
  int best = 1;
  double best_cost = -1;
  for (int s = 1; s <= std::max(1, n_chunks / 2); ++s) {
    const int per = (n_chunks + s - 1) / s, splits = (n_chunks + per - 1) / per;
    const long waves = (long(row_blocks) * splits + n_sms - 1) / n_sms;
    const double partials = splits > 1 ? split_cost + double(splits) * n * m * 8 / wave_stage_bytes : 0.0;
    const double cost = double(waves * per) + partials;
    if (best_cost < 0 || cost < best_cost) best = splits, best_cost = cost;
  }
  return best;
}

void wgmma_matmul(DType w_type, const void* w, size_t row_bytes, int m, int k, const void* x, int n, void* out,
                  DType out_type, int splits, float* partials, const LaunchCtx& ctx) {
  RF_CHECK(wgmma_matmul_supported(w_type, k), "wgmma matmul: unsupported weight type ", dtype_name(w_type),
           " or width ", k);
  const WgArgs a =
      quant_gemm_args("wgmma matmul", w, row_bytes, m, k, x, n, kCols, out, out_type, splits, partials, stage_k(w_type));
  const dim3 grid(unsigned((a.m + kRows - 1) / kRows), unsigned(splits));
  switch (w_type) {
    case DType::Q4_K: launch_wgmma<DType::Q4_K, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q5_K: launch_wgmma<DType::Q5_K, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q6_K: launch_wgmma<DType::Q6_K, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q5_0: launch_wgmma<DType::Q5_0, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q4_0: launch_wgmma<DType::Q4_0, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q4_1: launch_wgmma<DType::Q4_1, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q5_1: launch_wgmma<DType::Q5_1, false>(a, grid, a.n, out_type, ctx); break;
    default: launch_wgmma<DType::Q8_0, false>(a, grid, a.n, out_type, ctx);
  }
  if (splits > 1) mma_sum_splits(a.partials, splits, int64_t(a.n) * a.m, a.out, out_type, ctx);
}

#else  // no wgmma: the mma.sync kernel (gemm_mma.cu) or dequantization + BLAS

void wgmma_device_setup() {}
bool wgmma_matmul_supported(DType, int) { return false; }
int wgmma_matmul_splits(DType, int, int, int, int, int) { return 1; }
void wgmma_matmul(DType, const void*, size_t, int, int, const void*, int, void*, DType, int, float*,
                  const LaunchCtx&) {
  fail("wgmma matmul: not available on this GPU");
}
bool wgmma_experts_supported(DType, int) { return false; }
void wgmma_matmul_experts(DType, const void*, size_t, size_t, int, int, const void*, void*, DType, const int32_t*,
                          const int32_t*, int, int, const LaunchCtx&) {
  fail("wgmma matmul: not available on this GPU");
}

#endif

}  // namespace rf::gpu
