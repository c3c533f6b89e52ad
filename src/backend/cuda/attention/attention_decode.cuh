// Decode attention's building blocks, for attention_decode.cu only: the
// block shape (kDec*), the shared-memory layout (DecodeLayout, DecodeSmem),
// a thread's indices (DecodeThread) and the K/V tile pipelines, kDecStages
// deep with block-table lookups one tile ahead: DecodeGroupTiles (head
// size 256, f16 caches, CUDA: each group's rows as whole-row bulk copies on
// the group's own mbarriers) and DecodeTiles (the rest: 16-byte cp.async
// copies by every thread). KV is the cache's element type (__half
// or Fp8, kv_fp8.cuh): tiles are staged as stored, an e4m3 tile with its
// rows' scales.
#pragma once

#include "backend/cuda/attention/attention_args.cuh"
#include "backend/cuda/attention/kv_fp8.cuh"
#include "backend/cuda/ptx.cuh"

namespace rf::gpu::decode_attn {

constexpr int kDecThreads = 128;
constexpr int kDecGroups = 4;       // groups of 32 lanes per block
constexpr int kDecKeysPerGroup = 8;
constexpr int kDecTile = kDecGroups * kDecKeysPerGroup;
constexpr int kDecStages = 3;
constexpr int kDecMaxHeads = kDecodeMaxHeads;  // query heads per block
#ifdef RF_PORTABLE
constexpr int kDecMinBlocks = 1;
#else
constexpr int kDecMinBlocks = 4;  // 4 x 128 threads x 128 registers, 4 x 54.5 KB shared memory per SM (sm_90)
#endif

// Whether a head size and KV cache type take DecodeGroupTiles: head size
// 256 with an f16 cache, on CUDA. A group of 32 lanes reads only its own 8
// keys' rows of a tile, so when its own lanes copy them (one bulk copy a
// row) the tiles need no block barrier, and a 512-byte row costs one
// instruction where 16-byte copies take every thread 8 passes of address
// arithmetic a tile. (Head size 128 keeps its 16-byte copies: bulk copies
// are no faster there.)
#ifndef RF_PORTABLE
template <int HD, typename KV>
inline constexpr bool kDecBulk = HD == 256 && !kIsFp8<KV>;
#else
template <int HD, typename KV>
inline constexpr bool kDecBulk = false;
#endif

// Head sizes whose 8-dim chunks do not divide 32 lanes (96) are laid out
// as the next power of two (kWidth): the dims past the head are zeros in
// the stages and their outputs are never stored.
template <int HD>
struct DecodeDims {
  static constexpr int kWidth = HD == 96 ? 128 : HD;  // dims per staged row and merged accumulator
  static constexpr int kChunks = kWidth / 8;      // 8-dim chunks per row (one lane's share in P.V)
  static constexpr int kSub = 32 / kChunks;       // key subgroups of a group in P.V
  static constexpr int kKeysPerSub = kDecKeysPerGroup / kSub;
};

template <int HD, typename KV>
struct DecodeLayout : DecodeDims<HD> {
  using DecodeDims<HD>::kWidth;
  static constexpr int kPerCopy = 16 / int(sizeof(KV));    // elements per 16-byte copy
  static constexpr int kRow = kWidth + kPerCopy;           // elements per staged key row (16-byte pad)
  static constexpr int kCopyChunks = kWidth / kPerCopy;    // 16-byte copies per staged row
  static constexpr int kHeadCopyChunks = HD / kPerCopy;    // of them, the head's
  static constexpr int kRowsPerPass = kDecThreads / kCopyChunks;
  static constexpr int kPasses = kDecTile / kRowsPerPass;  // rows each thread copies per tile
  // Shared memory (bytes): with RF_PORTABLE probabilities [group][key][head]
  // and rescale factors [group][head] (P.V on CUDA cores), per-group (m, l),
  // q (f16 mma fragments on CUDA, f32 scaled with RF_PORTABLE), then the
  // group stage mbarriers (DecodeGroupTiles), then the K/V stages, which
  // the final merge of the groups' accumulators reuses.
  // CUDA, f16: 54,528 (HD 128) / 36,160 (HD 64).
  static constexpr size_t kML = size_t(2) * kDecGroups * kDecMaxHeads * 4;
#ifdef RF_PORTABLE
  static constexpr size_t kP = size_t(kDecGroups) * kDecMaxHeads * kDecKeysPerGroup * 4;
  static constexpr size_t kC = size_t(kDecGroups) * kDecMaxHeads * 4;
  static constexpr size_t kQ = size_t(kDecMaxHeads) * HD * 4;
#else
  static constexpr size_t kP = 0, kC = 0;
  static constexpr size_t kQ = size_t(HD) * 16;  // f16 mma fragments: [HD / 32][lane] x 16 bytes
#endif
  static constexpr size_t kBars = kDecBulk<HD, KV> ? size_t(kDecGroups) * kDecStages * 8 : 0;  // [group][stage]
  static constexpr size_t kHead = kP + kC + kML + kQ + kBars;
  static constexpr size_t kStages = size_t(kDecStages) * 2 * kDecTile * kRow * sizeof(KV);
  static constexpr size_t kScales = kIsFp8<KV> ? size_t(kDecStages) * 2 * kDecTile * 4 : 0;  // K, V row scales
  static constexpr size_t kMerge = size_t(kDecGroups) * DecodeDims<HD>::kSub * kDecMaxHeads * kWidth * 4;
  // A split's merged result for the cluster's sum (AttnArgs::cluster):
  // unnormalized sums [head][kWidth], then m [head] and l [head]; after the
  // merge's region (within the stages where they are larger).
  static constexpr size_t kCluster = (size_t(kDecMaxHeads) * kWidth + 2 * kDecMaxHeads) * 4;
  // Fp8 on CUDA: each group's 8 V rows of the current tile as f16 (the
  // f16 layout's rows), for P.V on tensor cores; after the scales.
  static constexpr int kVhRow = kWidth + 8;
#ifndef RF_PORTABLE
  static constexpr size_t kVh = kIsFp8<KV> ? size_t(kDecGroups) * kDecKeysPerGroup * kVhRow * 2 : 0;
#else
  static constexpr size_t kVh = 0;
#endif
  static constexpr size_t kBytes =
      kHead + (kStages + kScales + kVh > kMerge + kCluster ? kStages + kScales + kVh : kMerge + kCluster);
  static_assert(kDecTile % kRowsPerPass == 0 && kDecKeysPerGroup % DecodeDims<HD>::kSub == 0, "decode tile shape");
  static_assert(kHead % 16 == 0, "16-byte aligned stages");
};

// The pieces of a block's shared memory (DecodeLayout).
template <typename KV>
struct DecodeSmem {
  float* ps;            // RF_PORTABLE: probabilities [group][key][head]
  float* cs;            // RF_PORTABLE: rescale factors [group][head]
  float* mls;           // m [group][head], then l
  unsigned char* q;     // q: mma fragments [HD / 32][lane] (CUDA) or scaled f32 [head][HD] (RF_PORTABLE)
  uint64_t* bars;       // DecodeGroupTiles: [group][stage] mbarriers (null otherwise)
  KV* ks;               // K stages [stage][key][kRow]
  KV* vs;               // V stages, the same shape
  float* ksc;           // Fp8: K row scales [stage][key] (null for __half)
  float* vsc;           // Fp8: V row scales, the same shape
  __half* vh;           // Fp8 on CUDA: V rows as f16 [group][key][kVhRow] (null otherwise)
  float* merge;         // [group][sub][head][kWidth], after the key loop (reuses the stages)
  float* cpart;         // the split's result for the cluster's sum (DecodeLayout::kCluster), after merge
};
template <int HD, typename KV>
__device__ __forceinline__ DecodeSmem<KV> decode_smem(unsigned char* dsmem) {
  using L = DecodeLayout<HD, KV>;
  DecodeSmem<KV> s;
  s.ps = reinterpret_cast<float*>(dsmem);
  s.cs = reinterpret_cast<float*>(dsmem + L::kP);
  s.mls = reinterpret_cast<float*>(dsmem + L::kP + L::kC);
  s.q = dsmem + L::kP + L::kC + L::kML;
  s.bars = L::kBars > 0 ? reinterpret_cast<uint64_t*>(dsmem + L::kP + L::kC + L::kML + L::kQ) : nullptr;
  s.ks = reinterpret_cast<KV*>(dsmem + L::kHead);
  s.vs = s.ks + size_t(kDecStages) * kDecTile * L::kRow;
  s.ksc = kIsFp8<KV> ? reinterpret_cast<float*>(dsmem + L::kHead + L::kStages) : nullptr;
  s.vsc = kIsFp8<KV> ? s.ksc + kDecStages * kDecTile : nullptr;
  s.vh = L::kVh > 0 ? reinterpret_cast<__half*>(dsmem + L::kHead + L::kStages + L::kScales) : nullptr;
  s.merge = reinterpret_cast<float*>(dsmem + L::kHead);
  s.cpart = reinterpret_cast<float*>(dsmem + L::kHead + L::kMerge);
  return s;
}

#ifndef RF_PORTABLE
// c[0..3] += A (16 x 16, rows 8-15 zero: a0 / a2 hold this lane's row
// lane / 4, columns 2 * (lane % 4) + {0, 1} and + 8) . B (16 x 8, b0 / b1:
// rows 2 * (lane % 4) + {0, 1} and + 8, column lane / 4); f16 in, f32 out.
__device__ __forceinline__ void mma_16816(float (&c)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  ::rf::gpu::mma_16816(c, a0, 0u, a2, 0u, b0, b1);
}
#endif

// ---- this thread's indices ---------------------------------------------------

// The thread's indices as the kernel computes them. The device functions
// below take them from here rather than as arguments: the compiler then
// knows their ranges, and generates the same code as for one function.
struct DecodeThread {
  int tid, grp, lane;  // group of 32 lanes, lane in it
  int gid, tig;        // CUDA mma fragments: row (head) lane / 4, column pair lane % 4
  int vc8, sub;        // P.V: 16-byte chunk of the V row, key subgroup
};
template <int HD>
__device__ __forceinline__ DecodeThread decode_thread() {
  DecodeThread th;
  th.tid = threadIdx.x;
  th.grp = th.tid / 32;
  th.lane = th.tid % 32;
  th.gid = th.lane / 4;
  th.tig = th.lane % 4;
  th.vc8 = th.lane % DecodeDims<HD>::kChunks;
  th.sub = th.lane / DecodeDims<HD>::kChunks;
  return th;
}

// ---- the K/V tile pipeline ---------------------------------------------------

// Tile copies: this thread moves 16-byte chunk `cc` of rows r0 + i *
// kRowsPerPass of every tile (and, Fp8, the threads of chunk 0 their rows'
// scales). Block-table entries of a tile are fetched one tile ahead of its
// copies.
template <int HD, typename KV>
struct DecodeTiles {
  using L = DecodeLayout<HD, KV>;
  const int32_t* table;  // this sequence's block table
  const KV* kbase;       // K / V of this KV head, this thread's chunk
  const KV* vbase;
  KV* ks;
  KV* vs;
  const float* kscale;   // Fp8: row scales of this KV head (n_kv: scales from one slot to the next)
  const float* vscale;
  float* ksc;            // Fp8: the scale stages
  float* vsc;
  int k_begin, k_end, n_tiles;
  int cc, r0;
  int bs, block_shift, kv_dim, n_kv;  // kv_dim: elements from one slot to the next (AttnArgs::kv_stride)

  // blk[i]: the block-table entry of row i of `tile` (rows in range only).
  __device__ __forceinline__ void fetch(int tile, int (&blk)[L::kPasses]) const {
#pragma unroll
    for (int i = 0; i < L::kPasses; ++i) {
      const int p = k_begin + tile * kDecTile + r0 + i * L::kRowsPerPass;
      if (tile < n_tiles && p < k_end) blk[i] = table[block_shift >= 0 ? p >> block_shift : p / bs];
    }
  }
  // Starts the copies of `tile` into its stage; rows past the range are zeroed.
  __device__ __forceinline__ void issue(int tile, const int (&blk)[L::kPasses]) const {
    const int st = tile % kDecStages;
#pragma unroll
    for (int i = 0; i < L::kPasses; ++i) {
      const int p = k_begin + tile * kDecTile + r0 + i * L::kRowsPerPass;
      const int srow = st * kDecTile + r0 + i * L::kRowsPerPass;
      const size_t row = size_t(srow) * L::kRow + cc * L::kPerCopy;
      const size_t slot = p < k_end ? size_t(blk[i]) * bs + (block_shift >= 0 ? p & (bs - 1) : p % bs) : 0;
      if (p < k_end && (L::kHeadCopyChunks == L::kCopyChunks || cc < L::kHeadCopyChunks)) {
        copy16_async(ks + row, kbase + slot * kv_dim);
        copy16_async(vs + row, vbase + slot * kv_dim);
      } else {  // past the range or the head: zeros (p = 0 must not meet garbage V)
        *reinterpret_cast<uint4*>(ks + row) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vs + row) = make_uint4(0, 0, 0, 0);
      }
      if constexpr (kIsFp8<KV>) {
        if (cc == 0 && p < k_end) {
          copy4_async(ksc + srow, kscale + slot * n_kv);
          copy4_async(vsc + srow, vscale + slot * n_kv);
        } else if (cc == 0) {  // zero scales: the zero rows stay zeros (never NaN times 0)
          ksc[srow] = 0.0f;
          vsc[srow] = 0.0f;
        }
      }
    }
  }
};

#ifndef RF_PORTABLE
// The group tile pipeline (kDecBulk<HD, KV>): lane j < 8 copies K row j of the
// group's 8 keys of a tile, lane 8 + j V row j, each as one bulk copy into
// the stage; lane 0 arrives on the group's mbarrier of that stage with the
// tile's bytes, so the group waits for its own rows only. A V row of a key
// past the range is zeroed instead (its probability is 0, and 0 times stale
// shared memory must not be NaN); a K row past the range is left as it is
// (its score is replaced by -inf).
template <int HD, typename KV>
struct DecodeGroupTiles {
  using L = DecodeLayout<HD, KV>;
  static constexpr uint32_t kRowBytes = HD * sizeof(KV);
  const int32_t* table;  // this sequence's block table
  const KV* src;         // this lane's cache (K or V) at this KV head
  KV* dst;               // this lane's row in stage 0
  uint64_t* bars;        // the group's kDecStages mbarriers
  int first;             // key of the group's row 0 in tile 0
  int k_end, n_tiles;
  int lane, row;         // row: this lane's key of the group's 8
  int bs, block_shift, kv_dim;

  __device__ __forceinline__ bool copies() const { return lane < 2 * kDecKeysPerGroup; }
  // blk: the block-table entry of this lane's row of `tile` (rows in range only).
  __device__ __forceinline__ void fetch(int tile, int& blk) const {
    const int p = first + tile * kDecTile + row;
    if (copies() && tile < n_tiles && p < k_end) blk = table[block_shift >= 0 ? p >> block_shift : p / bs];
  }
  __device__ __forceinline__ void issue(int tile, int blk) const {
    const int st = tile % kDecStages;
    const int base = first + tile * kDecTile;
    const int valid = min(max(k_end - base, 0), kDecKeysPerGroup);
    uint64_t* bar = bars + st;
    if (lane == 0) mbar_arrive_expect_tx(bar, uint32_t(valid) * 2u * kRowBytes);
    if (!copies()) return;
    KV* d = dst + size_t(st) * kDecTile * L::kRow;
    if (row < valid) {
      const int p = base + row;
      const int slot = blk * bs + (block_shift >= 0 ? p & (bs - 1) : p % bs);
      bulk_copy_async(d, src + size_t(slot) * kv_dim, kRowBytes, bar);
    } else if (lane >= kDecKeysPerGroup) {
#pragma unroll
      for (int c = 0; c < L::kCopyChunks; ++c) reinterpret_cast<uint4*>(d)[c] = make_uint4(0, 0, 0, 0);
    }
  }
};
#endif

}  // namespace rf::gpu::decode_attn
