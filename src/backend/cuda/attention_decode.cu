// Decode attention (one query per sequence, the hot path) over the paged f16
// KV cache, and the kernel that combines split-K slices (flash-decoding).
// Owns attention_decode_kernel (head_dim 64/128, <= 8 query heads per KV
// head), attention_combine_kernel, their launchers and their one-time
// shared-memory opt-ins. attention.cu chooses between the kernels.
//
// A block of 128 threads per (token, KV head, split) holds every query head
// of the GQA group (<= 8), so K and V are read from memory once. The block's
// keys go through tiles of kDecTile keys staged as f16 in shared memory
// (padded rows: no bank conflicts), kDecStages deep: the loads of the next
// tiles are in flight (cp.async on CUDA) while a tile is computed. The block
// works as four groups of 32 lanes ("warps"; two of them per wavefront on
// 64-wide HIP hardware), each taking 8 keys of every tile with its own online
// softmax per head; the groups are merged at the end.
//  - scores, CUDA: one mma.sync m16n8k16 (f16 in, f32 accumulation) per 16
//    dims gives [heads (rows 0-7 of 16)] x [the group's 8 keys]; lane
//    (head = lane / 4) holds keys 2 * (lane % 4) + {0, 1};
//  - scores, HIP: lane (key jl = lane % 8, part = lane / 8) sums q . k in
//    f32 over the 16-byte chunks part, part + 4, ... of its key for every
//    head (q scaled, f32 in shared memory), then two shuffles add the parts;
//  - P.V (both): lane (chunk c = lane % (HD / 8), key subgroup) owns 8
//    output dims of every head for its keys; acc in f32 registers.
#include <algorithm>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/ptx.cuh"

namespace rf::gpu {
namespace {

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
void opt_in_decode() {
  constexpr size_t bytes = DecodeLayout<HD>::kBytes;
  if constexpr (bytes > 48 * 1024) {
    RF_GPU_CHECK(gpuFuncSetAttribute(attention_decode_kernel<HD>, gpuFuncAttributeMaxDynamicSharedMemorySize,
                                     int(bytes)));
#ifndef RF_HIP
    // Four blocks per SM need the largest shared-memory carveout.
    RF_GPU_CHECK(cudaFuncSetAttribute(attention_decode_kernel<HD>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      int(cudaSharedmemCarveoutMaxShared)));
#endif
  }
}

}  // namespace

void attention_decode_device_setup() {
  opt_in_decode<128>();
  opt_in_decode<64>();
}

bool attention_decode_supported(int head_dim, int group) {
  return (head_dim == 64 || head_dim == 128) && group <= kDecMaxHeads;
}

void launch_attention_decode(dim3 grid, const AttnArgs& a, const LaunchCtx& ctx) {
  if (a.hd == 128)
    launch(attention_decode_kernel<128>, grid, dim3(kDecThreads), DecodeLayout<128>::kBytes, ctx, a);
  else
    launch(attention_decode_kernel<64>, grid, dim3(kDecThreads), DecodeLayout<64>::kBytes, ctx, a);
}

void launch_attention_combine(const AttentionScratch& scratch, const int32_t* positions, int n_tokens, int n_heads,
                              int head_dim, int n_splits, void* out, const LaunchCtx& ctx) {
  launch(attention_combine_kernel, dim3(unsigned(n_tokens), unsigned(n_heads)),
         dim3(unsigned(std::min(256, std::max(32, head_dim)))), 0, ctx, scratch.partial_out, scratch.partial_ml,
         positions, n_heads, head_dim, n_splits, static_cast<__half*>(out));
}

}  // namespace rf::gpu
