// Decode attention's building blocks, for attention_decode.cu only: the
// block shape (kDec*), the shared-memory layout (DecodeLayout, DecodeSmem),
// a thread's indices (DecodeThread) and the K/V tile pipeline (DecodeTiles:
// block-table lookups one tile ahead, cp.async copies kDecStages deep).
#pragma once

#include "backend/cuda/attention.cuh"
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
constexpr int kDecMinBlocks = 4;  // 4 x 128 threads x 128 registers, 4 x 55.7 KB shared memory per SM (sm_90)
#endif

// Head sizes whose 16-byte chunks do not divide 32 lanes (96) are laid out
// as the next power of two (kWidth): the chunks past the head are zeros in
// the stages and their outputs are never stored.
template <int HD>
struct DecodeLayout {
  static constexpr int kWidth = HD == 96 ? 128 : HD;  // dims per staged row and merged accumulator
  static constexpr int kRow = kWidth + 8;         // halves per staged key row (16-byte pad)
  static constexpr int kChunks = kWidth / 8;      // 16-byte chunks per staged row
  static constexpr int kHeadChunks = HD / 8;      // of them, the chunks of the head
  static constexpr int kRowsPerPass = kDecThreads / kChunks;
  static constexpr int kPasses = kDecTile / kRowsPerPass;  // rows each thread copies per tile
  static constexpr int kSub = 32 / kChunks;       // key subgroups of a group in P.V
  static constexpr int kKeysPerSub = kDecKeysPerGroup / kSub;
  // Shared memory (bytes): probabilities [group][key][head], rescale
  // factors [group][head], per-group (m, l), q (f16 mma fragments on CUDA,
  // f32 scaled with RF_PORTABLE), then the K/V stages, which the final merge of the
  // groups' accumulators reuses. CUDA: 55,680 (HD 128) / 35,200 (HD 64).
  static constexpr size_t kP = size_t(kDecGroups) * kDecMaxHeads * kDecKeysPerGroup * 4;
  static constexpr size_t kC = size_t(kDecGroups) * kDecMaxHeads * 4;
  static constexpr size_t kML = size_t(2) * kDecGroups * kDecMaxHeads * 4;
#ifdef RF_PORTABLE
  static constexpr size_t kQ = size_t(kDecMaxHeads) * HD * 4;
#else
  static constexpr size_t kQ = size_t(HD) * 16;  // f16 mma fragments: [HD / 32][lane] x 16 bytes
#endif
  static constexpr size_t kHead = kP + kC + kML + kQ;
  static constexpr size_t kStages = size_t(kDecStages) * 2 * kDecTile * kRow * 2;
  static constexpr size_t kMerge = size_t(kDecGroups) * kSub * kDecMaxHeads * kWidth * 4;
  static constexpr size_t kBytes = kHead + (kStages > kMerge ? kStages : kMerge);
  static_assert(kDecTile % kRowsPerPass == 0 && kDecKeysPerGroup % kSub == 0, "decode tile shape");
  static_assert(kHead % 16 == 0, "16-byte aligned stages");
};

// The pieces of a block's shared memory (DecodeLayout).
struct DecodeSmem {
  float* ps;            // probabilities [group][key][head]
  float* cs;            // rescale factors [group][head]
  float* mls;           // m [group][head], then l
  unsigned char* q;     // q: mma fragments [HD / 32][lane] (CUDA) or scaled f32 [head][HD] (RF_PORTABLE)
  __half* ks;           // K stages [stage][key][kRow]
  __half* vs;           // V stages, the same shape
  float* merge;         // [group][sub][head][kWidth], after the key loop (reuses the stages)
};
template <int HD>
__device__ __forceinline__ DecodeSmem decode_smem(unsigned char* dsmem) {
  using L = DecodeLayout<HD>;
  DecodeSmem s;
  s.ps = reinterpret_cast<float*>(dsmem);
  s.cs = reinterpret_cast<float*>(dsmem + L::kP);
  s.mls = reinterpret_cast<float*>(dsmem + L::kP + L::kC);
  s.q = dsmem + L::kP + L::kC + L::kML;
  s.ks = reinterpret_cast<__half*>(dsmem + L::kHead);
  s.vs = s.ks + size_t(kDecStages) * kDecTile * L::kRow;
  s.merge = reinterpret_cast<float*>(dsmem + L::kHead);
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

__device__ __forceinline__ void unpack8(const uint4& u, float* f) {
  const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 x = __half22float2(h[e]);
    f[2 * e] = x.x;
    f[2 * e + 1] = x.y;
  }
}

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
  th.vc8 = th.lane % DecodeLayout<HD>::kChunks;
  th.sub = th.lane / DecodeLayout<HD>::kChunks;
  return th;
}

// ---- the K/V tile pipeline ---------------------------------------------------

// Tile copies: this thread moves chunk `cc` of rows r0 + i * kRowsPerPass of
// every tile. Block-table entries of a tile are fetched one tile ahead of
// its copies.
template <int HD>
struct DecodeTiles {
  using L = DecodeLayout<HD>;
  const int32_t* table;  // this sequence's block table
  const __half* kbase;   // K / V of this KV head, this thread's chunk
  const __half* vbase;
  __half* ks;
  __half* vs;
  int k_begin, k_end, n_tiles;
  int cc, r0;
  int bs, block_shift, kv_dim;

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
      const size_t row = (size_t(st) * kDecTile + r0 + i * L::kRowsPerPass) * L::kRow + cc * 8;
      if (p < k_end && (L::kHeadChunks == L::kChunks || cc < L::kHeadChunks)) {
        const int in_block = block_shift >= 0 ? p & (bs - 1) : p % bs;
        const size_t src = (size_t(blk[i]) * bs + in_block) * kv_dim;
        copy16_async(ks + row, kbase + src);
        copy16_async(vs + row, vbase + src);
      } else {  // past the range or the head: zeros (p = 0 must not meet garbage V)
        *reinterpret_cast<uint4*>(ks + row) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vs + row) = make_uint4(0, 0, 0, 0);
      }
    }
  }
};

}  // namespace rf::gpu::decode_attn
