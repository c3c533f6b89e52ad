// Paged attention over the f16 KV cache, causal, with GQA. One pass over the
// keys with an online softmax; with several splits (flash-decoding for long
// contexts) each block covers a slice of the keys and a second kernel
// combines the slices. Tokens with a negative position (padding) output 0.
// Three kernels:
//  - attention_decode_kernel (head_dim 64/128, <= 8 query heads per KV head):
//    every batch the tiled prefill kernel does not take, decode steps above
//    all; K/V tiles stream through a shared-memory pipeline;
//  - attention_prefill_kernel: query tiles of prefill chunks;
//  - attention_kernel: the generic fallback (other head sizes and groups).
// All are programmatic dependent launches (gpu.h: pdl_wait before any read).
#include <algorithm>
#include <atomic>

#include "backend/cuda/kernels.h"
#include "backend/cuda/ptx.cuh"

namespace rf::gpu {
namespace {

constexpr int kTileKeys = 32;
constexpr int kMaxDimsPerLane = 8;  // head_dim <= 8 * warp size

struct AttnArgs {
  const __half* q;
  const __half* kc;
  const __half* vc;
  const int32_t* positions;
  const int32_t* token_seq;
  const int32_t* block_tables;
  int max_blocks_per_seq, block_size;
  int block_shift;  // log2(block_size) when it is a power of two, else -1
  int n_heads, n_kv, hd;
  float scale;
  int n_splits, split_len;
  const int32_t* split_len_dev;  // when set: keys per split for this step (graph-stable launch shape)
  __half* out;
  float* part_out;
  float* part_ml;
};

__global__ void attention_kernel(AttnArgs a) {
  extern __shared__ float smem[];
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int lane = threadIdx.x % RF_WARP_SIZE, warp = threadIdx.x / RF_WARP_SIZE;
  const int n_warps = blockDim.x / RF_WARP_SIZE;
  const int hd = a.hd, group = a.n_heads / a.n_kv;
  const int kstride = hd + 1;  // padded rows: no bank conflicts across keys
  float* ks = smem;                             // [kTileKeys][hd + 1]
  float* vs = ks + kTileKeys * kstride;         // [kTileKeys][hd + 1]
  float* qs = vs + kTileKeys * kstride;         // [n_warps][hd]
  float* ps = qs + n_warps * hd;                // [n_warps][kTileKeys]

  pdl_wait();
  pdl_trigger();
  const int pos = a.positions[t];
  const int n_ctx = pos + 1;
  const int split_len = a.split_len_dev ? *a.split_len_dev : a.split_len;
  const int k_begin = split * split_len;
  const int k_end = min(n_ctx, k_begin + split_len);
  const int32_t* table = a.block_tables + size_t(a.token_seq[t]) * a.max_blocks_per_seq;
  const int kv_dim = a.n_kv * hd;

  for (int h0 = 0; h0 < group; h0 += n_warps) {
    const int h = kvh * group + h0 + warp;
    const bool active = h0 + warp < group;
    if (active)
      for (int d = lane; d < hd; d += RF_WARP_SIZE)
        qs[warp * hd + d] = __half2float(a.q[(size_t(t) * a.n_heads + h) * hd + d]) * a.scale;
    float m = -INFINITY, l = 0.0f;
    float acc[kMaxDimsPerLane];
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) acc[i] = 0.0f;

    for (int k0 = k_begin; k0 < k_end; k0 += kTileKeys) {
      const int nk = min(kTileKeys, k_end - k0);
      __syncthreads();
      if (hd % 8 == 0) {  // 16-byte loads of 8 halves
        const int chunks = hd / 8;
        for (int i = threadIdx.x; i < nk * chunks; i += blockDim.x) {
          const int j = i / chunks, c = i % chunks, p = k0 + j;
          const int64_t slot = int64_t(table[p / a.block_size]) * a.block_size + p % a.block_size;
          const uint4 kv = reinterpret_cast<const uint4*>(a.kc + slot * kv_dim + kvh * hd)[c];
          const uint4 vv = reinterpret_cast<const uint4*>(a.vc + slot * kv_dim + kvh * hd)[c];
          const __half2* kh = reinterpret_cast<const __half2*>(&kv);
          const __half2* vh = reinterpret_cast<const __half2*>(&vv);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float2 kf = __half22float2(kh[e]), vf = __half22float2(vh[e]);
            ks[j * kstride + 8 * c + 2 * e] = kf.x;
            ks[j * kstride + 8 * c + 2 * e + 1] = kf.y;
            vs[j * kstride + 8 * c + 2 * e] = vf.x;
            vs[j * kstride + 8 * c + 2 * e + 1] = vf.y;
          }
        }
      } else {
        for (int i = threadIdx.x; i < nk * hd; i += blockDim.x) {
          const int j = i / hd, d = i % hd, p = k0 + j;
          const int64_t slot = int64_t(table[p / a.block_size]) * a.block_size + p % a.block_size;
          ks[j * kstride + d] = __half2float(a.kc[slot * kv_dim + kvh * hd + d]);
          vs[j * kstride + d] = __half2float(a.vc[slot * kv_dim + kvh * hd + d]);
        }
      }
      __syncthreads();
      if (!active) continue;
      // Scores: lane j scores key j of the tile (tile size == 32 >= warp lanes needed).
      float sc = -INFINITY;
      for (int j = lane; j < nk; j += RF_WARP_SIZE) {
        float s = 0.0f;
        for (int d = 0; d < hd; ++d) s = fmaf(qs[warp * hd + d], ks[j * kstride + d], s);
        ps[warp * kTileKeys + j] = s;
        sc = fmaxf(sc, s);
      }
      const float m_new = fmaxf(m, warp_max(sc));
      float psum = 0.0f;
      for (int j = lane; j < nk; j += RF_WARP_SIZE) {
        const float p = __expf(ps[warp * kTileKeys + j] - m_new);
        ps[warp * kTileKeys + j] = p;
        psum += p;
      }
      psum = warp_sum(psum);
      const float corr = __expf(m - m_new);
      l = l * corr + psum;
      m = m_new;
      RF_SYNCWARP();
#pragma unroll
      for (int i = 0; i < kMaxDimsPerLane; ++i) {
        const int d = lane + i * RF_WARP_SIZE;
        if (d < hd) {
          float v = acc[i] * corr;
          for (int j = 0; j < nk; ++j) v = fmaf(ps[warp * kTileKeys + j], vs[j * kstride + d], v);
          acc[i] = v;
        }
      }
    }
    if (!active) continue;
    if (a.n_splits == 1) {
      const float inv = (pos >= 0 && l > 0.0f) ? 1.0f / l : 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxDimsPerLane; ++i) {
        const int d = lane + i * RF_WARP_SIZE;
        if (d < hd) a.out[(size_t(t) * a.n_heads + h) * hd + d] = __float2half_rn(acc[i] * inv);
      }
    } else {
      const size_t base = (size_t(t) * a.n_heads + h) * a.n_splits + split;
#pragma unroll
      for (int i = 0; i < kMaxDimsPerLane; ++i) {
        const int d = lane + i * RF_WARP_SIZE;
        if (d < hd) a.part_out[base * hd + d] = acc[i];
      }
      if (lane == 0) {
        a.part_ml[base * 2] = m;
        a.part_ml[base * 2 + 1] = l;
      }
    }
  }
}

// Prefill (several new tokens per sequence): a block takes a tile of up to
// kPrefillQ consecutive query tokens of one sequence and all query heads of
// one KV head, four threads per (query, head) row each owning HD/4 dims.
// K/V tiles of kPrefillK keys are staged in shared memory once for every
// head of the group; scores of a key tile go through one online-softmax
// update.
constexpr int kPrefillQ = 16, kPrefillK = 32;

template <int HD>
__global__ void __launch_bounds__(256) attention_prefill_kernel(AttnArgs a, const int32_t* __restrict__ tiles,
                                                                int heads_per_block) {
  constexpr int DPT = HD / 4;
  __shared__ __align__(16) __half ks[kPrefillK][HD + 8];
  __shared__ __align__(16) __half vs[kPrefillK][HD + 8];
  pdl_wait();
  pdl_trigger();
  const int t0 = tiles[2 * blockIdx.x], nq = tiles[2 * blockIdx.x + 1];
  const int kvh = blockIdx.y;
  const int group = a.n_heads / a.n_kv;
  const int hb = heads_per_block;  // this block's heads: blockIdx.z * hb ... of the group
  const int row = threadIdx.x / 4, part = threadIdx.x % 4;
  const int qi = row / hb, h = kvh * group + blockIdx.z * hb + row % hb;
  const bool active = qi < nq;
  const int tok = t0 + (active ? qi : 0);
  const int pos = active ? a.positions[tok] : -1;
  const int max_pos = a.positions[t0 + nq - 1];
  const int32_t* table = a.block_tables + size_t(a.token_seq[t0]) * a.max_blocks_per_seq;
  const int kv_dim = a.n_kv * HD;

  float q[DPT], acc[DPT];
  const __half* qp = a.q + (size_t(tok) * a.n_heads + h) * HD + part * DPT;
#pragma unroll
  for (int d = 0; d < DPT; ++d) {
    q[d] = active ? __half2float(qp[d]) * a.scale : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  constexpr int kChunks = HD * 2 / 16;  // 16-byte chunks per key row
  for (int k0 = 0; k0 <= max_pos; k0 += kPrefillK) {
    __syncthreads();
    for (int i = threadIdx.x; i < kPrefillK * kChunks; i += blockDim.x) {
      const int j = i / kChunks, c = i % kChunks, p = k0 + j;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
      if (p <= max_pos) {
        const int64_t slot = int64_t(table[p / a.block_size]) * a.block_size + p % a.block_size;
        kv = reinterpret_cast<const uint4*>(a.kc + slot * kv_dim + kvh * HD)[c];
        vv = reinterpret_cast<const uint4*>(a.vc + slot * kv_dim + kvh * HD)[c];
      }
      reinterpret_cast<uint4*>(&ks[j][0])[c] = kv;
      reinterpret_cast<uint4*>(&vs[j][0])[c] = vv;
    }
    __syncthreads();
    float sc[kPrefillK];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPrefillK; ++j) {
      float s = 0.0f;
#pragma unroll
      for (int d = 0; d < DPT; d += 2) {
        const float2 kf = __half22float2(*reinterpret_cast<const __half2*>(&ks[j][part * DPT + d]));
        s = fmaf(q[d], kf.x, fmaf(q[d + 1], kf.y, s));
      }
      s += RF_SHFL_XOR(s, 1);
      s += RF_SHFL_XOR(s, 2);
      sc[j] = (k0 + j <= pos) ? s : -INFINITY;
      tile_max = fmaxf(tile_max, sc[j]);
    }
    if (tile_max == -INFINITY) continue;  // nothing visible to this row in the tile
    const float m_new = fmaxf(m, tile_max);
    const float corr = __expf(m - m_new);
    l *= corr;
#pragma unroll
    for (int d = 0; d < DPT; ++d) acc[d] *= corr;
#pragma unroll
    for (int j = 0; j < kPrefillK; ++j) {
      const float p = __expf(sc[j] - m_new);
      l += p;
#pragma unroll
      for (int d = 0; d < DPT; d += 2) {
        const float2 vf = __half22float2(*reinterpret_cast<const __half2*>(&vs[j][part * DPT + d]));
        acc[d] = fmaf(p, vf.x, acc[d]);
        acc[d + 1] = fmaf(p, vf.y, acc[d + 1]);
      }
    }
    m = m_new;
  }
  if (!active) return;
  const float inv = (pos >= 0 && l > 0.0f) ? 1.0f / l : 0.0f;
  __half* o = a.out + (size_t(tok) * a.n_heads + h) * HD + part * DPT;
#pragma unroll
  for (int d = 0; d < DPT; d += 2)
    *reinterpret_cast<__half2*>(&o[d]) = __floats2half2_rn(acc[d] * inv, acc[d + 1] * inv);
}

// Decode (one query per sequence, the hot path): a block of 128 threads per
// (token, KV head, split) holds every query head of the GQA group (<= 8), so
// K and V are read from memory once. The block's keys go through tiles of
// kDecTile keys staged as f16 in shared memory (padded rows: no bank
// conflicts), kDecStages deep: the loads of the next tiles are in flight
// (cp.async on CUDA) while a tile is computed. The block works as four
// groups of 32 lanes ("warps"; two of them per wavefront on 64-wide HIP
// hardware), each taking 8 keys of every tile with its own online softmax
// per head; the groups are merged at the end.
//  - scores, CUDA: one mma.sync m16n8k16 (f16 in, f32 accumulation) per 16
//    dims gives [heads (rows 0-7 of 16)] x [the group's 8 keys]; lane
//    (head = lane / 4) holds keys 2 * (lane % 4) + {0, 1};
//  - scores, HIP: lane (key jl = lane % 8, part = lane / 8) sums q . k in
//    f32 over the 16-byte chunks part, part + 4, ... of its key for every
//    head (q scaled, f32 in shared memory), then two shuffles add the parts;
//  - P.V (both): lane (chunk c = lane % (HD / 8), key subgroup) owns 8
//    output dims of every head for its keys; acc in f32 registers.
constexpr int kDecThreads = 128;
constexpr int kDecGroups = 4;       // groups of 32 lanes per block
constexpr int kDecKeysPerGroup = 8;
constexpr int kDecTile = kDecGroups * kDecKeysPerGroup;
constexpr int kDecStages = 3;
constexpr int kDecMaxHeads = 8;     // query heads per KV head
#ifdef RF_HIP
constexpr int kDecMinBlocks = 1;
#else
constexpr int kDecMinBlocks = 4;  // 4 x 128 threads x 128 registers, 4 x 55.7 KB shared memory per SM (sm_90)
#endif

template <int HD>
struct DecodeLayout {
  static constexpr int kRow = HD + 8;             // halves per staged key row (16-byte pad)
  static constexpr int kChunks = HD / 8;          // 16-byte chunks per key row
  static constexpr int kRowsPerPass = kDecThreads / kChunks;
  static constexpr int kPasses = kDecTile / kRowsPerPass;  // rows each thread copies per tile
  static constexpr int kSub = 32 / kChunks;       // key subgroups of a group in P.V
  static constexpr int kKeysPerSub = kDecKeysPerGroup / kSub;
  // Shared memory (bytes): probabilities [group][key][head], rescale
  // factors [group][head], per-group (m, l), q (f16 mma fragments on CUDA,
  // f32 scaled on HIP), then the K/V stages, which the final merge of the
  // groups' accumulators reuses. CUDA: 55,680 (HD 128) / 35,200 (HD 64).
  static constexpr size_t kP = size_t(kDecGroups) * kDecMaxHeads * kDecKeysPerGroup * 4;
  static constexpr size_t kC = size_t(kDecGroups) * kDecMaxHeads * 4;
  static constexpr size_t kML = size_t(2) * kDecGroups * kDecMaxHeads * 4;
#ifdef RF_HIP
  static constexpr size_t kQ = size_t(kDecMaxHeads) * HD * 4;
#else
  static constexpr size_t kQ = size_t(HD) * 16;  // f16 mma fragments: [HD / 32][lane] x 16 bytes
#endif
  static constexpr size_t kHead = kP + kC + kML + kQ;
  static constexpr size_t kStages = size_t(kDecStages) * 2 * kDecTile * kRow * 2;
  static constexpr size_t kMerge = size_t(kDecGroups) * kSub * kDecMaxHeads * HD * 4;
  static constexpr size_t kBytes = kHead + (kStages > kMerge ? kStages : kMerge);
  static_assert(kDecTile % kRowsPerPass == 0 && kDecKeysPerGroup % kSub == 0, "decode tile shape");
  static_assert(kHead % 16 == 0, "16-byte aligned stages");
};

#ifndef RF_HIP
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

template <int HD>
__global__ void __launch_bounds__(kDecThreads, kDecMinBlocks) attention_decode_kernel(AttnArgs a) {
  using L = DecodeLayout<HD>;
  extern __shared__ __align__(16) unsigned char dsmem[];
  float* ps = reinterpret_cast<float*>(dsmem);                          // [group][key][head]
  float* cs = reinterpret_cast<float*>(dsmem + L::kP);                  // [group][head]
  float* mls = reinterpret_cast<float*>(dsmem + L::kP + L::kC);         // m [group][head], then l
  __half* ks = reinterpret_cast<__half*>(dsmem + L::kHead);             // [stage][key][kRow]
  __half* vs = ks + size_t(kDecStages) * kDecTile * L::kRow;
  float* merge = reinterpret_cast<float*>(dsmem + L::kHead);            // [group][sub][head][HD], after the loop

  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int tid = threadIdx.x, grp = tid / 32, lane = tid % 32;
  const int group = a.n_heads / a.n_kv;
  const int pos = a.positions[t];
  const int split_len = a.split_len_dev ? *a.split_len_dev : a.split_len;
  const int k_begin = split * split_len;
  const int k_end = min(pos + 1, k_begin + split_len);
  const int n_tiles = k_end > k_begin ? (k_end - k_begin + kDecTile - 1) / kDecTile : 0;
  const int kv_dim = a.n_kv * HD;
  const int bs = a.block_size;
  const __half* qg = a.q + (size_t(t) * a.n_heads + size_t(kvh) * group) * HD;  // the group's heads

#ifndef RF_HIP
  // Scores: mma A fragments of q (head lane / 4; zero rows past the group),
  // two k-steps of 16 dims per 16 bytes; shared by the four groups.
  const int gid = lane / 4, tig = lane % 4;
  uint4* qf = reinterpret_cast<uint4*>(dsmem + L::kP + L::kC + L::kML);  // [HD / 32][lane]
  if (grp == 0) {
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) {
      uint32_t f[4] = {0u, 0u, 0u, 0u};
      if (gid < group) {
        const __half* qh = qg + size_t(gid) * HD + i * 32 + 2 * tig;
        f[0] = *reinterpret_cast<const uint32_t*>(qh);
        f[1] = *reinterpret_cast<const uint32_t*>(qh + 8);
        f[2] = *reinterpret_cast<const uint32_t*>(qh + 16);
        f[3] = *reinterpret_cast<const uint32_t*>(qh + 24);
      }
      qf[i * 32 + lane] = make_uint4(f[0], f[1], f[2], f[3]);
    }
  }
  float m_h = -INFINITY, l_h = 0.0f;  // softmax state of head gid over this lane's keys
#else
  float* qs = reinterpret_cast<float*>(dsmem + L::kP + L::kC + L::kML);  // [head][HD], scaled
  for (int i = tid; i < group * HD / 2; i += kDecThreads) {
    const float2 f = __half22float2(reinterpret_cast<const __half2*>(qg)[i]);
    qs[2 * i] = f.x * a.scale;
    qs[2 * i + 1] = f.y * a.scale;
  }
  const int jl = lane % kDecKeysPerGroup, part = lane / kDecKeysPerGroup;
  float m[kDecMaxHeads], l[kDecMaxHeads];
#pragma unroll
  for (int h = 0; h < kDecMaxHeads; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.0f;
  }
#endif
  float acc[kDecMaxHeads][8];
#pragma unroll
  for (int h = 0; h < kDecMaxHeads; ++h)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[h][e] = 0.0f;
  const int vc8 = lane % L::kChunks, sub = lane / L::kChunks;  // P.V

  // Tile copies: this thread moves chunk `cc` of rows r0 + i * kRowsPerPass.
  // Block-table entries of the next tile are fetched one tile ahead.
  const int cc = tid % L::kChunks, r0 = tid / L::kChunks;
  const int32_t* table = a.block_tables + size_t(a.token_seq[t]) * a.max_blocks_per_seq;
  const __half* kbase = a.kc + size_t(kvh) * HD + cc * 8;
  const __half* vbase = a.vc + size_t(kvh) * HD + cc * 8;
  auto fetch = [&](int tile, int (&blk)[L::kPasses]) {
#pragma unroll
    for (int i = 0; i < L::kPasses; ++i) {
      const int p = k_begin + tile * kDecTile + r0 + i * L::kRowsPerPass;
      if (tile < n_tiles && p < k_end) blk[i] = table[a.block_shift >= 0 ? p >> a.block_shift : p / bs];
    }
  };
  auto issue = [&](int tile, const int (&blk)[L::kPasses]) {
    const int st = tile % kDecStages;
#pragma unroll
    for (int i = 0; i < L::kPasses; ++i) {
      const int p = k_begin + tile * kDecTile + r0 + i * L::kRowsPerPass;
      const size_t row = (size_t(st) * kDecTile + r0 + i * L::kRowsPerPass) * L::kRow + cc * 8;
      if (p < k_end) {
        const int in_block = a.block_shift >= 0 ? p & (bs - 1) : p % bs;
        const size_t src = (size_t(blk[i]) * bs + in_block) * kv_dim;
        copy16_async(ks + row, kbase + src);
        copy16_async(vs + row, vbase + src);
      } else {  // past the range: zeros (p = 0 must not meet garbage V)
        *reinterpret_cast<uint4*>(ks + row) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vs + row) = make_uint4(0, 0, 0, 0);
      }
    }
  };

  int blk[L::kPasses];  // block-table entries of the next tile to issue
  {
    int first[kDecStages - 1][L::kPasses];
#pragma unroll
    for (int st = 0; st < kDecStages - 1; ++st) fetch(st, first[st]);
#pragma unroll
    for (int st = 0; st < kDecStages - 1; ++st) {
      if (st < n_tiles) issue(st, first[st]);
      copy_commit();
    }
  }
  fetch(kDecStages - 1, blk);
  float* pg = ps + grp * kDecKeysPerGroup * kDecMaxHeads;  // this group's probabilities
  for (int it = 0; it < n_tiles; ++it) {
    copy_wait<kDecStages - 2>();
    __syncthreads();  // tile `it` visible to all; tile it - 1 done with (its stage is refilled next)
    if (it + kDecStages - 1 < n_tiles) {
      issue(it + kDecStages - 1, blk);
      fetch(it + kDecStages, blk);
    }
    copy_commit();

    const int st = it % kDecStages;
    const int k0 = k_begin + it * kDecTile + grp * kDecKeysPerGroup;  // this group's first key
    const __half* kt = ks + (size_t(st) * kDecTile + grp * kDecKeysPerGroup) * L::kRow;
    float corr[kDecMaxHeads];
    bool rescale = false;
#ifndef RF_HIP
    {
      // S[head][key] for the group's 8 keys: two accumulation chains.
      float c0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      const __half* kr = kt + gid * L::kRow + 2 * tig;
#pragma unroll
      for (int i = 0; i < HD / 32; ++i) {
        const uint4 q4 = qf[i * 32 + lane];
        mma_16816(c0, q4.x, q4.y, *reinterpret_cast<const uint32_t*>(kr + i * 32),
                  *reinterpret_cast<const uint32_t*>(kr + i * 32 + 8));
        mma_16816(c1, q4.z, q4.w, *reinterpret_cast<const uint32_t*>(kr + i * 32 + 16),
                  *reinterpret_cast<const uint32_t*>(kr + i * 32 + 24));
      }
      const int key = k0 + 2 * tig;
      const float x0 = key < k_end ? (c0[0] + c1[0]) * a.scale : -INFINITY;
      const float x1 = key + 1 < k_end ? (c0[1] + c1[1]) * a.scale : -INFINITY;
      float mx = fmaxf(x0, x1);
      mx = fmaxf(mx, RF_SHFL_XOR(mx, 1));
      mx = fmaxf(mx, RF_SHFL_XOR(mx, 2));
      const float m_new = fmaxf(m_h, mx);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: p = corr = 0
      const float p0 = __expf(x0 - m_use), p1 = __expf(x1 - m_use);
      const float cr = __expf(m_h - m_use);
      l_h = l_h * cr + (p0 + p1);
      m_h = m_new;
      if (gid < group) {
        pg[2 * tig * kDecMaxHeads + gid] = p0;
        pg[(2 * tig + 1) * kDecMaxHeads + gid] = p1;
        if (tig == 0) cs[grp * kDecMaxHeads + gid] = cr;
      }
    }
    RF_SYNCWARP();
    {
      const float4 ca = *reinterpret_cast<const float4*>(cs + grp * kDecMaxHeads);
      const float4 cb = *reinterpret_cast<const float4*>(cs + grp * kDecMaxHeads + 4);
      const float cv[kDecMaxHeads] = {ca.x, ca.y, ca.z, ca.w, cb.x, cb.y, cb.z, cb.w};
#pragma unroll
      for (int h = 0; h < kDecMaxHeads; ++h) {
        corr[h] = cv[h];
        if (h < group) rescale |= cv[h] != 1.0f;
      }
    }
#else
    {
      // Scores of key jl for every head: this lane's chunks (part, part + 4,
      // ...), then the four parts summed.
      const __half* krow = kt + jl * L::kRow;
      float kf[HD / 4];
#pragma unroll
      for (int i = 0; i < HD / 32; ++i)
        unpack8(*reinterpret_cast<const uint4*>(krow + (part + 4 * i) * 8), kf + 8 * i);
      const bool valid = k0 + jl < k_end;
#pragma unroll
      for (int h = 0; h < kDecMaxHeads; ++h) {
        corr[h] = 1.0f;
        if (h < group) {
          float v0 = 0.0f, v1 = 0.0f;
#pragma unroll
          for (int i = 0; i < HD / 32; ++i) {
            const float* qc = qs + h * HD + (part + 4 * i) * 8;
            const float4 qa = *reinterpret_cast<const float4*>(qc);
            const float4 qb = *reinterpret_cast<const float4*>(qc + 4);
            v0 = fmaf(qa.x, kf[8 * i], v0);
            v1 = fmaf(qa.y, kf[8 * i + 1], v1);
            v0 = fmaf(qa.z, kf[8 * i + 2], v0);
            v1 = fmaf(qa.w, kf[8 * i + 3], v1);
            v0 = fmaf(qb.x, kf[8 * i + 4], v0);
            v1 = fmaf(qb.y, kf[8 * i + 5], v1);
            v0 = fmaf(qb.z, kf[8 * i + 6], v0);
            v1 = fmaf(qb.w, kf[8 * i + 7], v1);
          }
          float x = v0 + v1;
          x += RF_SHFL_XOR(x, 8);
          x += RF_SHFL_XOR(x, 16);
          x = valid ? x : -INFINITY;
          // Online softmax per head over the group's 8 keys (m uniform over the group).
          float mx = fmaxf(x, RF_SHFL_XOR(x, 1));
          mx = fmaxf(mx, RF_SHFL_XOR(mx, 2));
          mx = fmaxf(mx, RF_SHFL_XOR(mx, 4));
          const float m_new = fmaxf(m[h], mx);
          const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: p = corr = 0
          const float p = __expf(x - m_use);
          corr[h] = __expf(m[h] - m_use);
          l[h] = l[h] * corr[h] + p;
          m[h] = m_new;
          rescale |= corr[h] != 1.0f;
          if ((h & 3) == part) pg[jl * kDecMaxHeads + h] = p;
        }
      }
    }
    RF_SYNCWARP();
#endif
    // P.V: 8 dims (chunk vc8) of every head over this lane's keys of the group.
    if (rescale) {
#pragma unroll
      for (int h = 0; h < kDecMaxHeads; ++h)
        if (h < group) {
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[h][e] *= corr[h];
        }
    }
#pragma unroll
    for (int r = 0; r < L::kKeysPerSub; ++r) {
      const int jk = sub * L::kKeysPerSub + r;
      float vf[8];
      unpack8(*reinterpret_cast<const uint4*>(kt + size_t(kDecStages) * kDecTile * L::kRow + jk * L::kRow + vc8 * 8),
              vf);
      const float4 pa = *reinterpret_cast<const float4*>(pg + jk * kDecMaxHeads);
      const float4 pb = *reinterpret_cast<const float4*>(pg + jk * kDecMaxHeads + 4);
      const float pk[kDecMaxHeads] = {pa.x, pa.y, pa.z, pa.w, pb.x, pb.y, pb.z, pb.w};
#pragma unroll
      for (int h = 0; h < kDecMaxHeads; ++h)
        if (h < group) {
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[h][e] = fmaf(pk[h], vf[e], acc[h][e]);
        }
    }
  }

  // Merge the four groups: l over the lanes holding a head's keys, then the
  // groups' (m, l, acc) through shared memory (the stage buffers, now free).
#ifndef RF_HIP
  l_h += RF_SHFL_XOR(l_h, 1);
  l_h += RF_SHFL_XOR(l_h, 2);
  if (tig == 0 && gid < group) {
    mls[grp * kDecMaxHeads + gid] = m_h;
    mls[(kDecGroups + grp) * kDecMaxHeads + gid] = l_h;
  }
#else
#pragma unroll
  for (int h = 0; h < kDecMaxHeads; ++h)
    if (h < group) {
      l[h] += RF_SHFL_XOR(l[h], 1);
      l[h] += RF_SHFL_XOR(l[h], 2);
      l[h] += RF_SHFL_XOR(l[h], 4);
      if (lane == 0) {
        mls[grp * kDecMaxHeads + h] = m[h];
        mls[(kDecGroups + grp) * kDecMaxHeads + h] = l[h];
      }
    }
#endif
  copy_wait<0>();
  __syncthreads();
#pragma unroll
  for (int h = 0; h < kDecMaxHeads; ++h)
    if (h < group) {
      float* dst = merge + ((size_t(grp) * L::kSub + sub) * kDecMaxHeads + h) * HD + vc8 * 8;
      *reinterpret_cast<float4*>(dst) = make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
      *reinterpret_cast<float4*>(dst + 4) = make_float4(acc[h][4], acc[h][5], acc[h][6], acc[h][7]);
    }
  __syncthreads();
  for (int i = tid; i < group * HD; i += kDecThreads) {
    const int h = i / HD, d = i % HD;
    float mx = -INFINITY;
#pragma unroll
    for (int g = 0; g < kDecGroups; ++g) mx = fmaxf(mx, mls[g * kDecMaxHeads + h]);
    float lsum = 0.0f, v = 0.0f;
#pragma unroll
    for (int g = 0; g < kDecGroups; ++g) {
      const float mg = mls[g * kDecMaxHeads + h];
      if (mg == -INFINITY) continue;  // no key of this group in range
      const float f = __expf(mg - mx);
      lsum = fmaf(f, mls[(kDecGroups + g) * kDecMaxHeads + h], lsum);
      float sv = 0.0f;
#pragma unroll
      for (int u = 0; u < L::kSub; ++u) sv += merge[((size_t(g) * L::kSub + u) * kDecMaxHeads + h) * HD + d];
      v = fmaf(f, sv, v);
    }
    const int hq = kvh * group + h;
    if (a.n_splits == 1) {
      const float inv = (pos >= 0 && lsum > 0.0f) ? 1.0f / lsum : 0.0f;
      a.out[(size_t(t) * a.n_heads + hq) * HD + d] = __float2half_rn(v * inv);
    } else {
      const size_t base = (size_t(t) * a.n_heads + hq) * a.n_splits + split;
      a.part_out[base * HD + d] = v;
      if (d == 0) {
        a.part_ml[base * 2] = mx;
        a.part_ml[base * 2 + 1] = lsum;
      }
    }
  }
}

// Combines the splits of one (token, head): one block of hd threads or more.
__global__ void attention_combine_kernel(const float* __restrict__ part_out, const float* __restrict__ part_ml,
                                         const int32_t* __restrict__ positions, int n_heads, int hd, int n_splits,
                                         __half* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, h = blockIdx.y;
  const size_t base = (size_t(t) * n_heads + h) * n_splits;
  float mx = -INFINITY;
  for (int s = 0; s < n_splits; ++s) mx = fmaxf(mx, part_ml[(base + s) * 2]);
  float denom = 0.0f;
  for (int s = 0; s < n_splits; ++s) {
    const float ms = part_ml[(base + s) * 2];
    if (ms > -INFINITY) denom += __expf(ms - mx) * part_ml[(base + s) * 2 + 1];
  }
  const bool valid = positions[t] >= 0 && denom > 0.0f;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float v = 0.0f;
    if (valid) {
      for (int s = 0; s < n_splits; ++s) {
        const float ms = part_ml[(base + s) * 2];
        if (ms > -INFINITY) v += __expf(ms - mx) * part_out[(base + s) * hd + d];
      }
      v /= denom;
    }
    out[(size_t(t) * n_heads + h) * hd + d] = __float2half_rn(v);
  }
}

template <int HD>
void launch_decode(dim3 grid, const AttnArgs& a, const LaunchCtx& ctx) {
  constexpr size_t bytes = DecodeLayout<HD>::kBytes;
  if constexpr (bytes > 48 * 1024) {
    // Opt in to the larger shared memory once per device.
    static std::atomic<uint64_t> opted{0};
    int dev = 0;
    RF_GPU_CHECK(gpuGetDevice(&dev));
    const uint64_t bit = dev >= 0 && dev < 64 ? uint64_t(1) << dev : 0;
    if (!bit || !(opted.load(std::memory_order_acquire) & bit)) {
      RF_GPU_CHECK(gpuFuncSetAttribute(attention_decode_kernel<HD>, gpuFuncAttributeMaxDynamicSharedMemorySize,
                                       int(bytes)));
#ifndef RF_HIP
      // Four blocks per SM need the largest shared-memory carveout.
      RF_GPU_CHECK(cudaFuncSetAttribute(attention_decode_kernel<HD>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        int(cudaSharedmemCarveoutMaxShared)));
#endif
      opted.fetch_or(bit, std::memory_order_release);
    }
  }
  launch(attention_decode_kernel<HD>, grid, dim3(kDecThreads), bytes, ctx, a);
}

}  // namespace

void attention(const void* q, const KVLayer& cache, const StepMeta& m, int n_tokens, const AttentionParams& p,
               int n_splits, const AttentionScratch& scratch, void* out, const LaunchCtx& ctx) {
  if (n_tokens == 0) return;
  const int group_size = p.n_heads / std::max(p.n_kv_heads, 1);
  const bool tiled = m.max_new_tokens > 1 && m.q_tiles && m.n_q_tiles > 0 && (p.head_dim == 64 || p.head_dim == 128) &&
                     p.n_heads % p.n_kv_heads == 0;
  int heads_per_block = std::min(group_size, 4);  // <= 256 threads: 16 queries x 4 heads x 4 threads
  while (group_size % heads_per_block) --heads_per_block;
  RF_CHECK(cache.type == DType::F16, "cuda attention: KV cache must be f16");
  RF_CHECK(p.head_dim <= kMaxDimsPerLane * 32, "cuda attention: head_dim ", p.head_dim, " > 256 is not supported");
  RF_CHECK(p.n_heads % p.n_kv_heads == 0, "cuda attention: heads not divisible by KV heads");
  n_splits = std::max(1, n_splits);
  RF_CHECK(n_splits == 1 || (n_splits <= scratch.max_splits && n_tokens <= scratch.max_tokens),
           "cuda attention: split scratch too small");
  const int group = p.n_heads / p.n_kv_heads;
  const int threads = std::max(64, 32 * std::min(group, 8));
  const int max_warps = threads / 32;  // upper bound on warps for shared-memory sizing
  const size_t smem = sizeof(float) * (2 * kTileKeys * (p.head_dim + 1) + max_warps * (p.head_dim + kTileKeys));
  AttnArgs a;
  a.q = static_cast<const __half*>(q);
  a.kc = static_cast<const __half*>(cache.k);
  a.vc = static_cast<const __half*>(cache.v);
  a.positions = m.positions;
  a.token_seq = m.token_seq;
  a.block_tables = m.block_tables;
  a.max_blocks_per_seq = m.max_blocks_per_seq;
  a.block_size = cache.block_size;
  a.block_shift = -1;
  for (int sh = 0; sh < 31; ++sh)
    if (cache.block_size == (1 << sh)) a.block_shift = sh;
  a.n_heads = p.n_heads;
  a.n_kv = p.n_kv_heads;
  a.hd = p.head_dim;
  a.scale = p.scale;
  a.n_splits = n_splits;
  a.split_len_dev = nullptr;
  // Keys per split: this step's value from the device when the backend
  // provides it, else the context capacity divided evenly.
  const int capacity = m.max_blocks_per_seq * cache.block_size;
  a.split_len = (capacity + n_splits - 1) / n_splits;
  a.split_len_dev = n_splits > 1 ? m.attn_split_len : nullptr;
  a.out = static_cast<__half*>(out);
  a.part_out = scratch.partial_out;
  a.part_ml = scratch.partial_ml;
  if (tiled) {
    const dim3 grid(unsigned(m.n_q_tiles), unsigned(p.n_kv_heads), unsigned(group_size / heads_per_block));
    const int threads = heads_per_block * kPrefillQ * 4;
    if (p.head_dim == 128)
      launch(attention_prefill_kernel<128>, grid, dim3(threads), 0, ctx, a, m.q_tiles, heads_per_block);
    else
      launch(attention_prefill_kernel<64>, grid, dim3(threads), 0, ctx, a, m.q_tiles, heads_per_block);
    return;
  }
  const dim3 grid(unsigned(n_tokens), unsigned(p.n_kv_heads), unsigned(n_splits));
  if ((p.head_dim == 64 || p.head_dim == 128) && group <= kDecMaxHeads) {
    // The decode kernel (any token works; it is built for one per sequence).
    if (p.head_dim == 128)
      launch_decode<128>(grid, a, ctx);
    else
      launch_decode<64>(grid, a, ctx);
  } else {
    if (smem > 48 * 1024)
      RF_GPU_CHECK(gpuFuncSetAttribute(attention_kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    launch(attention_kernel, grid, dim3(threads), smem, ctx, a);
  }
  if (n_splits > 1)
    launch(attention_combine_kernel, dim3(unsigned(n_tokens), unsigned(p.n_heads)),
           dim3(unsigned(std::min(256, std::max(32, p.head_dim)))), 0, ctx, scratch.partial_out,
           scratch.partial_ml, m.positions, p.n_heads, p.head_dim, n_splits, static_cast<__half*>(out));
}

}  // namespace rf::gpu
