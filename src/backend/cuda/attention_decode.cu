// Decode attention (one query per sequence, the hot path) over the paged KV
// cache (f16, or e4m3 with row scales: kv_fp8.cuh), and the sum of its
// split-K slices (flash-decoding): on CUDA by the slices' blocks as one
// thread-block cluster (decode_cluster_combine, through distributed shared
// memory; CudaOptions::attention_cluster), else by a kernel that combines
// them. Either may also write one token's row as 8-bit quants for the GEMV
// after it (CudaOptions::fused_act_q8).
// Owns attention_decode_kernel (head_dim 64/96/128, and 256 on CUDA; up to 8
// query heads per block), attention_combine_kernel, their launchers and
// their one-time shared-memory opt-ins. attention.cu chooses between the
// kernels. The kExt instantiations add a sliding window (the block's keys
// start at the window), logit soft-capping and head chunks (a KV head with
// more than 8 query heads gets a block per 8: blockIdx.y = kvh * chunks +
// chunk); the others are the plain causal kernel.
//
// A block of 128 threads per (token, KV head, split) holds every query head
// of the GQA group (<= 8), so K and V are read from memory once. The block's
// keys go through tiles of kDecTile keys staged as f16 in shared memory
// (padded rows: no bank conflicts), kDecStages deep: the loads of the next
// tiles are in flight while a tile is computed. The block works as four
// groups of 32 lanes ("warps"; two of them per wavefront on 64-wide HIP
// hardware), each taking 8 keys of every tile with its own online softmax
// per head; the groups are merged at the end. Head size 256 with an f16
// cache on CUDA: each group bulk-copies its own 8 K and V rows of a tile (a
// row a lane) and waits on its own mbarriers, no block barrier per tile
// (decode_keys_bulk); otherwise every thread copies 16-byte pieces of the
// tile (cp.async on CUDA) and the block meets at a barrier per tile.
//  - scores, CUDA: one mma.sync m16n8k16 (f16 in, f32 accumulation) per 16
//    dims gives [heads (rows 0-7 of 16)] x [the group's 8 keys]; lane
//    (head = lane / 4) holds keys 2 * (lane % 4) + {0, 1};
//  - scores, RF_PORTABLE (HIP): lane (key jl = lane % 8, part = lane / 8) sums q . k in
//    f32 over the 16-byte chunks part, part + 4, ... of its key for every
//    head (q scaled, f32 in shared memory), then two shuffles add the parts;
//  - P.V, CUDA: on tensor cores, O^T (dims x heads) += V^T . P^T by mma
//    m16n8k8: the probabilities stay in the registers the scores left them
//    in, V^T's fragments come by ldmatrix.trans (decode_tile_mma); an e4m3
//    group first writes its 8 V rows as f16 to its own shared slice;
//  - P.V, RF_PORTABLE: lane (chunk c = lane % (HD / 8), key subgroup) owns
//    8 output dims of every head for its keys; acc in f32 registers.
// The kernel reads as its steps: start the copies of the first tiles (those
// of keys before this token's even before waiting for the kernels before:
// earlier steps stored them), load q, then per tile: issue the copies of
// a later tile, score the group's keys, update the online softmax,
// accumulate V; at the end merge the four groups and store the output (or
// this split's partial result for the combine kernel, or for the cluster's
// sum in its own shared memory).
//  - e4m3 caches (KV = Fp8): tiles staged as stored (half the bytes) with
//    their rows' scales; elements become f16 (kv_fp8.cuh) as the fragments
//    and V rows are read; a key's K scale multiplies its score, its V scale
//    the probability that weighs its row (the softmax sum keeps the
//    unscaled one).
#include <algorithm>

#include "backend/cuda/attention_decode.cuh"
#ifndef RF_PORTABLE  // (gpu.h, above, says)
#include <cooperative_groups.h>
#endif

namespace rf::gpu {
namespace {

using namespace decode_attn;  // attention_decode.cuh

// ---- load q ------------------------------------------------------------------

#ifndef RF_PORTABLE
// The mma A fragments of q (head gid; zero rows past the group), two
// k-steps of 16 dims per 16 bytes, written by the first group for all four.
// qg: the group's first query head of token t.
template <int HD>
__device__ __forceinline__ void decode_load_q(const __half* q, int n_heads, int t, int head0, int group, uint4* qf) {
  const DecodeThread th = decode_thread<HD>();
  const __half* qg = q + (size_t(t) * n_heads + size_t(head0)) * HD;
  if (th.grp == 0) {
#pragma unroll
    for (int i = 0; i < HD / 32; ++i) {
      uint32_t f[4] = {0u, 0u, 0u, 0u};
      if (th.gid < group) {
        const __half* qh = qg + size_t(th.gid) * HD + i * 32 + 2 * th.tig;
        f[0] = *reinterpret_cast<const uint32_t*>(qh);
        f[1] = *reinterpret_cast<const uint32_t*>(qh + 8);
        f[2] = *reinterpret_cast<const uint32_t*>(qh + 16);
        f[3] = *reinterpret_cast<const uint32_t*>(qh + 24);
      }
      qf[i * 32 + th.lane] = make_uint4(f[0], f[1], f[2], f[3]);
    }
  }
}
#else
// q of every head of the group, f32, scaled.
template <int HD>
__device__ __forceinline__ void decode_load_q(const __half* q, int n_heads, float scale, int t, int head0, int group,
                                              float* qs) {
  const DecodeThread th = decode_thread<HD>();
  const __half* qg = q + (size_t(t) * n_heads + size_t(head0)) * HD;
  for (int i = th.tid; i < group * HD / 2; i += kDecThreads) {
    const float2 f = __half22float2(reinterpret_cast<const __half2*>(qg)[i]);
    qs[2 * i] = f.x * scale;
    qs[2 * i + 1] = f.y * scale;
  }
}
#endif

// ---- scores and the online softmax -------------------------------------------

#ifndef RF_PORTABLE
// Scores of head gid against keys 2 * tig + {0, 1} of the group's 8 keys at
// kt (two accumulation chains), scaled; keys from k_end on score -inf.
// Fp8: ksc holds the group's 8 K row scales.
template <int HD, bool kExt, typename KV>
__device__ __forceinline__ float2 decode_score_keys(const uint4* qf, const KV* kt, const float* ksc, float scale,
                                                    float softcap, int k0, int k_end) {
  using L = DecodeLayout<HD, KV>;
  const DecodeThread th = decode_thread<HD>();
  float c0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const KV* kr = kt + th.gid * L::kRow + 2 * th.tig;
#pragma unroll
  for (int i = 0; i < HD / 32; ++i) {
    const uint4 q4 = qf[i * 32 + th.lane];
    mma_16816(c0, q4.x, q4.y, kv_pair_bits(kr + i * 32), kv_pair_bits(kr + i * 32 + 8));
    mma_16816(c1, q4.z, q4.w, kv_pair_bits(kr + i * 32 + 16), kv_pair_bits(kr + i * 32 + 24));
  }
  float d0 = c0[0] + c1[0], d1 = c0[1] + c1[1];
  if constexpr (kIsFp8<KV>) {
    const float2 sk = *reinterpret_cast<const float2*>(ksc + 2 * th.tig);
    d0 *= sk.x * kFp8HalfScale;
    d1 *= sk.y * kFp8HalfScale;
  }
  const int key = k0 + 2 * th.tig;
  if constexpr (kExt) {
    float s0 = d0 * scale, s1 = d1 * scale;
    if (softcap > 0.0f) {
      s0 = softcap_score(s0, softcap);
      s1 = softcap_score(s1, softcap);
    }
    return make_float2(key < k_end ? s0 : -INFINITY, key + 1 < k_end ? s1 : -INFINITY);
  }
  const float x0 = key < k_end ? d0 * scale : -INFINITY;
  const float x1 = key + 1 < k_end ? d1 * scale : -INFINITY;
  return make_float2(x0, x1);
}

// One online-softmax step of head gid (state m, l over this lane's keys)
// with the lane quad's 8 scores (x: this lane's two): the new maximum, the
// probabilities p0, p1 and the factor that rescales what came before.
struct SoftmaxStep {
  float p0, p1, corr;
};
__device__ __forceinline__ SoftmaxStep decode_softmax_update(float& m, float& l, float2 x) {
  float mx = fmaxf(x.x, x.y);
  mx = fmaxf(mx, RF_SHFL_XOR(mx, 1));
  mx = fmaxf(mx, RF_SHFL_XOR(mx, 2));
  const float m_new = fmaxf(m, mx);
  const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: p = corr = 0
  SoftmaxStep r;
  r.p0 = __expf(x.x - m_use);
  r.p1 = __expf(x.y - m_use);
  r.corr = __expf(m - m_use);
  l = l * r.corr + (r.p0 + r.p1);
  m = m_new;
  return r;
}

#else
// Score of head h against key jl = lane % 8: this lane's chunks (part,
// part + 4, ...) of kf, then the four parts summed.
template <int HD>
__device__ __forceinline__ float decode_score_key(const float* qs, int h, int part, const float (&kf)[HD / 4]) {
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
  return x;
}

// One online-softmax step of a head (state m, l) over the group's 8 scores
// (x: this lane's; m uniform over the group): returns the probability, sets
// the rescale factor of what was accumulated before.
__device__ __forceinline__ float decode_softmax_update(float& m, float& l, float x, float& corr) {
  float mx = fmaxf(x, RF_SHFL_XOR(x, 1));
  mx = fmaxf(mx, RF_SHFL_XOR(mx, 2));
  mx = fmaxf(mx, RF_SHFL_XOR(mx, 4));
  const float m_new = fmaxf(m, mx);
  const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // nothing seen yet: p = corr = 0
  const float p = __expf(x - m_use);
  corr = __expf(m - m_use);
  l = l * corr + p;
  m = m_new;
  return p;
}

// Scores and softmax of one tile for this thread's group: probabilities to
// its slice of ps [group][key][head], the rescale factors to corr; rescale:
// any factor != 1. Fp8: ksc / vsc hold the group's 8 K / V row scales, and
// the stored probabilities carry the V scales.
template <int HD, bool kExt, typename KV>
__device__ __forceinline__ void decode_tile_softmax(float (&m)[kDecMaxHeads], float (&l)[kDecMaxHeads],
                                                    const float* qs, const KV* kt, const float* ksc, const float* vsc,
                                                    float softcap, int k0, int k_end, int group, float* ps,
                                                    float (&corr)[kDecMaxHeads], bool& rescale) {
  using L = DecodeLayout<HD, KV>;
  const DecodeThread th = decode_thread<HD>();
  float* pg = ps + th.grp * kDecKeysPerGroup * kDecMaxHeads;
  const int jl = th.lane % kDecKeysPerGroup, part = th.lane / kDecKeysPerGroup;
  const KV* krow = kt + jl * L::kRow;
  float kf[HD / 4];
#pragma unroll
  for (int i = 0; i < HD / 32; ++i) kv_unpack8(krow + (part + 4 * i) * 8, kf + 8 * i);
  float k_mul = 1.0f, v_mul = 1.0f;
  if constexpr (kIsFp8<KV>) {
    k_mul = ksc[jl] * kFp8HalfScale;
    v_mul = vsc[jl] * kFp8HalfScale;
  }
  const bool valid = k0 + jl < k_end;
#pragma unroll
  for (int h = 0; h < kDecMaxHeads; ++h) {
    corr[h] = 1.0f;
    if (h < group) {
      float x = decode_score_key<HD>(qs, h, part, kf);
      if constexpr (kIsFp8<KV>) x *= k_mul;
      if constexpr (kExt)
        if (softcap > 0.0f) x = softcap_score(x, softcap);
      x = valid ? x : -INFINITY;
      const float p = decode_softmax_update(m[h], l[h], x, corr[h]);
      rescale |= corr[h] != 1.0f;
      if ((h & 3) == part) pg[jl * kDecMaxHeads + h] = kIsFp8<KV> ? p * v_mul : p;
    }
  }
  RF_SYNCWARP();
}
#endif

// ---- P.V ---------------------------------------------------------------------

#ifdef RF_PORTABLE
// acc[h][0..8) (dims vc8 * 8.. of head h) = acc * corr + P . V over this
// lane's keys (subgroup `sub`) of the group's 8 keys (V rows at vt,
// probabilities in the group's slice of ps).
template <int HD, typename KV>
__device__ __forceinline__ void decode_accumulate_v(float (&acc)[kDecMaxHeads][8], const float (&corr)[kDecMaxHeads],
                                                    bool rescale, const KV* vt, const float* ps, int group) {
  using L = DecodeLayout<HD, KV>;
  const DecodeThread th = decode_thread<HD>();
  const float* pg = ps + th.grp * kDecKeysPerGroup * kDecMaxHeads;
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
    const int jk = th.sub * L::kKeysPerSub + r;
    float vf[8];
    kv_unpack8(vt + jk * L::kRow + th.vc8 * 8, vf);
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
#else
// P.V on tensor cores: O^T (dims x heads) += V^T (dims x
// the group's 8 keys) . P^T (keys x heads) by mma m16n8k8. P^T's fragment is
// the lane's two probabilities where the scores left them (head gid, keys
// 2 tig + {0, 1}); V^T's come from the staged rows by ldmatrix.trans, two
// 16-dim tiles per load. o[i]: dims 16 i + gid (c0: head 2 tig, c1: head
// 2 tig + 1) and 16 i + gid + 8 (c2, c3). e4m3 caches: the group's 8 V rows
// first become f16 (value / kFp8HalfScale, exact) in its slice of sm.vh,
// and the probabilities carry the V rows' scales (the softmax sum keeps
// the unscaled ones), as on CUDA cores.
template <int HD>
constexpr int kPvTiles = DecodeDims<HD>::kWidth / 16;

// The group's 8 staged e4m3 V rows (vt) as f16 rows of kVhRow halves at vh:
// lane l converts a quarter of row l / 4.
template <int HD>
__device__ __forceinline__ void decode_v_rows_to_f16(const Fp8* vt, __half* vh) {
  using L = DecodeLayout<HD, Fp8>;
  constexpr int kPer = L::kWidth / 4;  // elements a lane converts: 16, 32 or 64
  const DecodeThread th = decode_thread<HD>();
  const int r = th.lane / 4, part = th.lane % 4;
  const uint8_t* src = reinterpret_cast<const uint8_t*>(vt + r * L::kRow) + part * kPer;
  __half* dst = vh + r * L::kVhRow + part * kPer;
#pragma unroll
  for (int c = 0; c < kPer / 16; ++c) {
    const uint4 codes = *reinterpret_cast<const uint4*>(src + 16 * c);
    const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
    uint32_t h[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      h[2 * i] = e4m3x2_to_half2_bits(w[i]);
      h[2 * i + 1] = e4m3x2_to_half2_bits(w[i] >> 16);
    }
    *reinterpret_cast<uint4*>(dst + 16 * c) = make_uint4(h[0], h[1], h[2], h[3]);
    *reinterpret_cast<uint4*>(dst + 16 * c + 8) = make_uint4(h[4], h[5], h[6], h[7]);
  }
}

// One tile for this thread's group: scores, the online softmax and P.V.
// vh: the group's f16 V rows (e4m3 caches only).
template <int HD, bool kExt, typename KV>
__device__ __forceinline__ void decode_tile_mma(float& m, float& l, const uint4* qf, const KV* kt, const KV* vt,
                                                const float* ksc, const float* vsc, __half* vh, float scale,
                                                float softcap, int k0, int k_end, float (&o)[kPvTiles<HD>][4]) {
  const DecodeThread th = decode_thread<HD>();
  const float2 x = decode_score_keys<HD, kExt>(qf, kt, ksc, scale, softcap, k0, k_end);
  const SoftmaxStep st = decode_softmax_update(m, l, x);
  // The rescale factors of this lane's two accumulator heads (lanes 4 h hold head h's).
  const float c_lo = __shfl_sync(0xffffffffu, st.corr, 8 * th.tig);
  const float c_hi = __shfl_sync(0xffffffffu, st.corr, 8 * th.tig + 4);
  float p0 = st.p0, p1 = st.p1;
  const __half* vrows;  // the group's V rows as f16
  int row_stride;
  if constexpr (kIsFp8<KV>) {
    const float2 sv = *reinterpret_cast<const float2*>(vsc + 2 * th.tig);
    p0 *= sv.x * kFp8HalfScale;
    p1 *= sv.y * kFp8HalfScale;
    decode_v_rows_to_f16<HD>(vt, vh);
    __syncwarp();
    vrows = vh;
    row_stride = DecodeLayout<HD, Fp8>::kVhRow;
  } else {
    vrows = vt;
    row_stride = DecodeLayout<HD, __half>::kRow;
  }
  const __half2 p2 = __floats2half2_rn(p0, p1);
  const uint32_t p = *reinterpret_cast<const uint32_t*>(&p2);
  const __half* vr = vrows + (th.lane % 8) * row_stride + (th.lane / 8) * 8;
#pragma unroll
  for (int i = 0; i < kPvTiles<HD>; i += 2) {
    uint32_t v[4];
    ldmatrix_x4_trans(v, vr + i * 16);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      o[i + j][0] *= c_lo;
      o[i + j][1] *= c_hi;
      o[i + j][2] *= c_lo;
      o[i + j][3] *= c_hi;
      mma_1688(o[i + j], v[2 * j], v[2 * j + 1], p);
    }
  }
  if constexpr (kIsFp8<KV>) __syncwarp();  // every lane's reads of vh done before the next tile's rows
}

// This lane's O^T fragments to merge [group][head][kWidth] (heads < group).
template <int HD>
__device__ __forceinline__ void decode_stash_mma(const float (&o)[kPvTiles<HD>][4], int group, float* merge) {
  using L = DecodeDims<HD>;
  const DecodeThread th = decode_thread<HD>();
  const int h0 = 2 * th.tig, h1 = h0 + 1;
  float* m0 = merge + (size_t(th.grp) * kDecMaxHeads + h0) * L::kWidth + th.gid;
  float* m1 = m0 + L::kWidth;
#pragma unroll
  for (int i = 0; i < kPvTiles<HD>; ++i) {
    if (h0 < group) {
      m0[16 * i] = o[i][0];
      m0[16 * i + 8] = o[i][2];
    }
    if (h1 < group) {
      m1[16 * i] = o[i][1];
      m1[16 * i + 8] = o[i][3];
    }
  }
}
#endif

// ---- merging the four groups -------------------------------------------------

// Each group's (m, l) per head to mls [m: group][head], then [l: group][head],
// l summed first over the lanes that hold a head's keys.
#ifndef RF_PORTABLE
template <int HD>
__device__ __forceinline__ void decode_publish_ml(float m, float l, int group, float* mls) {
  const DecodeThread th = decode_thread<HD>();
  l += RF_SHFL_XOR(l, 1);
  l += RF_SHFL_XOR(l, 2);
  if (th.tig == 0 && th.gid < group) {
    mls[th.grp * kDecMaxHeads + th.gid] = m;
    mls[(kDecGroups + th.grp) * kDecMaxHeads + th.gid] = l;
  }
}
#else
template <int HD>
__device__ __forceinline__ void decode_publish_ml(const float (&m)[kDecMaxHeads], float (&l)[kDecMaxHeads],
                                                  int group, float* mls) {
  const DecodeThread th = decode_thread<HD>();
#pragma unroll
  for (int h = 0; h < kDecMaxHeads; ++h)
    if (h < group) {
      l[h] += RF_SHFL_XOR(l[h], 1);
      l[h] += RF_SHFL_XOR(l[h], 2);
      l[h] += RF_SHFL_XOR(l[h], 4);
      if (th.lane == 0) {
        mls[th.grp * kDecMaxHeads + h] = m[h];
        mls[(kDecGroups + th.grp) * kDecMaxHeads + h] = l[h];
      }
    }
}
#endif

#ifdef RF_PORTABLE
// This lane's accumulators to merge [group][sub][head][kWidth].
template <int HD>
__device__ __forceinline__ void decode_stash_acc(const float (&acc)[kDecMaxHeads][8], int group, float* merge) {
  using L = DecodeDims<HD>;
  const DecodeThread th = decode_thread<HD>();
#pragma unroll
  for (int h = 0; h < kDecMaxHeads; ++h)
    if (h < group) {
      float* dst = merge + ((size_t(th.grp) * L::kSub + th.sub) * kDecMaxHeads + h) * L::kWidth + th.vc8 * 8;
      *reinterpret_cast<float4*>(dst) = make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
      *reinterpret_cast<float4*>(dst + 4) = make_float4(acc[h][4], acc[h][5], acc[h][6], acc[h][7]);
    }
}
#endif

// The four groups' (m, l, acc) combined per (head, dim): the normalized
// output, or this split's unnormalized sum and (m, l) for the combine kernel.
// kSubs: key subgroups per group in merge (1 after P.V on tensor cores).
// With a.cluster: the split's result goes to this block's cpart instead,
// for decode_cluster_combine.
template <int HD, int kSubs>
__device__ __forceinline__ void decode_merge_store(const AttnArgs& a, const float* mls, const float* merge,
                                                   float* cpart, int t, int row, int head0, int split, int pos,
                                                   int group) {
  using L = DecodeDims<HD>;
  const DecodeThread th = decode_thread<HD>();
  for (int i = th.tid; i < group * HD; i += kDecThreads) {
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
      for (int u = 0; u < kSubs; ++u) sv += merge[((size_t(g) * kSubs + u) * kDecMaxHeads + h) * L::kWidth + d];
      v = fmaf(f, sv, v);
    }
    const int hq = head0 + h;
    if (a.n_splits == 1) {
      const float inv = (pos >= 0 && lsum > 0.0f) ? 1.0f / lsum : 0.0f;
      a.out[(size_t(t) * a.n_heads + hq) * HD + d] = __float2half_rn(v * inv);
    } else if (a.cluster) {
      cpart[h * L::kWidth + d] = v;
      if (d == 0) {
        cpart[kDecMaxHeads * L::kWidth + h] = mx;
        cpart[kDecMaxHeads * L::kWidth + kDecMaxHeads + h] = lsum;
      }
    } else {
      const size_t base = (size_t(row) * a.n_heads + hq) * a.n_splits + split;
      a.part_out[base * HD + d] = v;
      if (d == 0) {
        a.part_ml[base * 2] = mx;
        a.part_ml[base * 2 + 1] = lsum;
      }
    }
  }
}

// ---- summing the splits ----------------------------------------------------

__host__ __device__ constexpr int combine_weight_floats(int n_splits) { return (n_splits + 7) / 8 * 8 + 8; }

// Sums the splits of one (partial row `row`, head h) into token t's output,
// every thread of the block (tid < n) calling it (a barrier inside). The
// first warp weighs the splits (each lane its own: max, exp, the softmax sum by shuffles) into
// `weight` (shared, combine_weight_floats(n_splits) floats); then each
// thread sums its dims over the splits with those weights, the loads
// independent of one another. (Each thread walking every split's
// statistics in turn kept their loads in a chain: 8-13 us a layer at batch
// 1, ncu on an H100.) The weights are padded with zeros to a multiple of 8
// and 8 more: the unrolled sum's loads may be merged into 16-byte reads
// past the last split (compute-sanitizer saw one at split 8).
//
// With xq (one token, hd a multiple of 32, whole warps on dims): the
// output row's 8-bit quants and scales too (act_q8's layout;
// CudaOptions::fused_act_q8), for the quantized GEMV after it.
__device__ __forceinline__ void combine_splits(const float* part_out, const float* part_ml, bool valid_pos,
                                               int n_heads, int hd, int n_splits, int row, int t, int h,
                                               __half* out, int8_t* xq, float2* xds, float* weight, int tid, int n) {
  const size_t base = (size_t(row) * n_heads + h) * n_splits;
  if (tid < RF_WARP_SIZE) {
    const int lane = tid;
    float mx = -INFINITY;
    for (int s = lane; s < n_splits; s += RF_WARP_SIZE) mx = fmaxf(mx, part_ml[(base + s) * 2]);
    mx = warp_max(mx);
    float denom = 0.0f;
    for (int s = lane; s < n_splits; s += RF_WARP_SIZE) {
      const float ms = part_ml[(base + s) * 2];
      const float e = ms > -INFINITY ? __expf(ms - mx) : 0.0f;
      weight[s] = e;
      denom += e * part_ml[(base + s) * 2 + 1];
    }
    denom = warp_sum(denom);
    const bool valid = valid_pos && denom > 0.0f;
    for (int s = lane; s < n_splits; s += RF_WARP_SIZE) weight[s] = valid ? weight[s] / denom : 0.0f;
    for (int s = n_splits + lane; s < combine_weight_floats(n_splits); s += RF_WARP_SIZE) weight[s] = 0.0f;
  }
  __syncthreads();
  for (int d = tid; d < hd; d += n) {
    float v = 0.0f;
#pragma unroll 8
    for (int s = 0; s < n_splits; ++s)
      if (weight[s] != 0.0f) v += weight[s] * part_out[(base + s) * hd + d];
    const __half hv = __float2half_rn(v);
    out[(size_t(t) * n_heads + h) * hd + d] = hv;
    if (xq) quantize32_q8(__half2float(hv), h * hd + d, xq, xds);
  }
}

#ifndef RF_PORTABLE
// The splits of one (token, KV head [chunk]) summed inside their thread-block
// cluster (AttnArgs::cluster; the cluster is the grid's z extent, a block's
// rank its split): every block has left its split's result in its own
// cpart (decode_merge_store); after the cluster's barrier, block r takes the
// group's 32-dim output chunks r, r + C, r + 2C, ... (a chunk per warp),
// each lane one dim, and reads the splits' (m, l) and sums from the other
// blocks' shared memory. The splits are weighed and summed with the
// operations of combine_splits in the same order (bit-identical to the
// combine kernel over the same splits). A second barrier keeps every
// block's shared memory alive until the others have read it.
template <int HD>
__device__ __forceinline__ void decode_cluster_combine(const AttnArgs& a, float* cpart, int t, int head0, int pos,
                                                       int group) {
  using L = DecodeDims<HD>;
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const DecodeThread th = decode_thread<HD>();
  const int n_splits = a.n_splits, rank = int(cluster.block_rank());
  constexpr int kChunksPerHead = HD / 32;
  const float* ml = cpart + kDecMaxHeads * L::kWidth;  // m [head], then l [head]
  for (int c = rank + n_splits * th.grp; c < group * kChunksPerHead; c += n_splits * kDecGroups) {
    const int h = c / kChunksPerHead, d = (c % kChunksPerHead) * 32 + th.lane;
    float ms = -INFINITY, ls = 0.0f;
    if (th.lane < n_splits) {
      const float* remote = cluster.map_shared_rank(ml, unsigned(th.lane));
      ms = remote[h];
      ls = remote[kDecMaxHeads + h];
    }
    const float mx = warp_max(ms);
    const float e = ms > -INFINITY ? __expf(ms - mx) : 0.0f;
    float denom = 0.0f;
    if (th.lane < n_splits) denom += e * ls;
    denom = warp_sum(denom);
    const bool valid = pos >= 0 && denom > 0.0f;
    const float w = valid ? e / denom : 0.0f;
    // Every split's value first (every block wrote its own, zeros for no
    // keys): the remote loads in flight together, not one per weight test.
    float part[kMaxDecodeCluster];
#pragma unroll
    for (int sp = 0; sp < kMaxDecodeCluster; ++sp)
      part[sp] = sp < n_splits ? cluster.map_shared_rank(cpart, unsigned(sp))[h * L::kWidth + d] : 0.0f;
    float v = 0.0f;
#pragma unroll
    for (int sp = 0; sp < kMaxDecodeCluster; ++sp) {
      const float ws = __shfl_sync(0xffffffffu, w, sp % RF_WARP_SIZE);
      if (sp < n_splits && ws != 0.0f) v += ws * part[sp];
    }
    const int hq = head0 + h;
    const __half hv = __float2half_rn(v);
    a.out[(size_t(t) * a.n_heads + hq) * HD + d] = hv;
    if (a.xq) quantize32_q8(__half2float(hv), hq * HD + d, a.xq, a.xds);
  }
  cluster.sync();
}
#endif

// ---- the first tiles -----------------------------------------------------------

// How many of the first kDecStages - 1 tiles hold only keys before this
// token's: their K/V were stored by earlier steps, so their copies start
// before the wait for the kernels before (the one just before stores this
// token's K/V, and q).
__device__ __forceinline__ int decode_early_tiles(int k_begin, int k_end, int pos, int n_tiles) {
  int early = 0;
  while (early < kDecStages - 1 && early < n_tiles && min(k_begin + (early + 1) * kDecTile, k_end) <= pos) ++early;
  return early;
}

// ---- the keys of a block, f16 caches on CUDA ------------------------------------

#ifndef RF_PORTABLE
// The block's keys through DecodeGroupTiles (kDecBulk<HD, KV>): the barriers set
// up, the first tiles' copies started (those of keys before this token's
// even before the wait for the kernels before), q loaded, then per tile:
// wait for the group's rows, start the copies of the tile kDecStages - 1
// on (into the stage this group has just finished with), score, softmax and
// P.V for the group's 8 keys. No block barrier inside the loop.
template <int HD, bool kExt>
__device__ __forceinline__ void decode_keys_bulk(const AttnArgs& a, const DecodeSmem<__half>& sm, int t, int kvh,
                                                 int head0, int group, int pos, int k_begin, int k_end, int n_tiles,
                                                 float& m_h, float& l_h, float (&o)[kPvTiles<HD>][4]) {
  using L = DecodeLayout<HD, __half>;
  const DecodeThread th = decode_thread<HD>();
  // A group's barriers are its own: its first lane sets them up.
  if (th.lane == 0) {
#pragma unroll
    for (int st = 0; st < kDecStages; ++st) mbar_init(sm.bars + th.grp * kDecStages + st, 1);
    mbar_init_fence();
  }
  __syncwarp();

  DecodeGroupTiles<HD, __half> tiles;
  tiles.table = a.block_tables + size_t(a.token_seq[t]) * a.max_blocks_per_seq;
  tiles.lane = th.lane;
  tiles.row = th.lane % kDecKeysPerGroup;
  const bool v_lane = th.lane >= kDecKeysPerGroup;
  tiles.src = static_cast<const __half*>(v_lane ? a.vc : a.kc) + size_t(kvh) * HD;
  tiles.dst = (v_lane ? sm.vs : sm.ks) + size_t(th.grp * kDecKeysPerGroup + tiles.row) * L::kRow;
  tiles.bars = sm.bars + th.grp * kDecStages;
  tiles.first = k_begin + th.grp * kDecKeysPerGroup;
  tiles.k_end = k_end;
  tiles.n_tiles = n_tiles;
  tiles.bs = a.block_size;
  tiles.block_shift = a.block_shift;
  tiles.kv_dim = a.n_kv * HD;

  int first[kDecStages - 1] = {};
#pragma unroll
  for (int st = 0; st < kDecStages - 1; ++st) tiles.fetch(st, first[st]);
  const int early = decode_early_tiles(k_begin, k_end, pos, n_tiles);
#pragma unroll
  for (int st = 0; st < kDecStages - 1; ++st)
    if (st < early) tiles.issue(st, first[st]);
  pdl_wait();
  pdl_trigger();
#pragma unroll
  for (int st = 0; st < kDecStages - 1; ++st)
    if (st >= early && st < n_tiles) tiles.issue(st, first[st]);
  uint4* qf = reinterpret_cast<uint4*>(sm.q);
  decode_load_q<HD>(a.q, a.n_heads, t, head0, group, qf);
  __syncthreads();  // q's fragments (written by the first group) and the first tiles' zeroed rows
  int blk = 0;
  tiles.fetch(kDecStages - 1, blk);
  for (int it = 0; it < n_tiles; ++it) {
    mbar_wait(tiles.bars + it % kDecStages, uint32_t(it / kDecStages) & 1u);
    __syncwarp();  // every lane is done with tile it - 1, whose stage is refilled next
    if (it + kDecStages - 1 < n_tiles) {
      tiles.issue(it + kDecStages - 1, blk);
      tiles.fetch(it + kDecStages, blk);
    }
    const int st = it % kDecStages;
    const int k0 = tiles.first + it * kDecTile;  // this group's first key
    const __half* kt = sm.ks + size_t(st * kDecTile + th.grp * kDecKeysPerGroup) * L::kRow;
    const __half* vt = kt + size_t(kDecStages) * kDecTile * L::kRow;
    decode_tile_mma<HD, kExt, __half>(m_h, l_h, qf, kt, vt, nullptr, nullptr, nullptr, a.scale, a.softcap, k0, k_end,
                                      o);
  }
}
#endif

// ---- the kernels ---------------------------------------------------------------

// Head size 256 stages 107 KB of K/V per block: two blocks per SM.
template <int HD>
constexpr int kDecBlocksPerSM = HD == 256 ? 2 : kDecMinBlocks;

template <int HD, bool kExt, typename KV>
__global__ void __launch_bounds__(kDecThreads, kDecBlocksPerSM<HD>) attention_decode_kernel(AttnArgs a) {
  using L = DecodeLayout<HD, KV>;
  extern __shared__ __align__(16) unsigned char dsmem[];
  const DecodeSmem<KV> sm = decode_smem<HD, KV>(dsmem);

  // Until the wait for the kernels before, only the step's metadata and the
  // K/V of earlier tokens are read (below).
  const int row = blockIdx.x, t = a.tokens ? a.tokens[row] : row, split = blockIdx.z;
  const DecodeThread th = decode_thread<HD>();
  int kvh = blockIdx.y, group = a.n_heads / a.n_kv, head0 = kvh * group;  // this block's query heads
  if constexpr (kExt) {
    kvh = blockIdx.y / a.head_chunks;
    const int chunk = blockIdx.y % a.head_chunks;
    head0 = kvh * group + chunk * kDecMaxHeads;
    group = min(kDecMaxHeads, group - chunk * kDecMaxHeads);
  }
  const int pos = a.positions[t];
  const int split_len = a.split_len_dev ? *a.split_len_dev : a.split_len;
  int k_begin = split * split_len;
  const int k_end = min(pos + 1, k_begin + split_len);
  if constexpr (kExt)
    if (a.window > 0) k_begin = max(k_begin, pos - a.window + 1);
  const int n_tiles = k_end > k_begin ? (k_end - k_begin + kDecTile - 1) / kDecTile : 0;

#ifndef RF_PORTABLE
  float m_h = -INFINITY, l_h = 0.0f;  // softmax state of head gid over this lane's keys
#else
  float m[kDecMaxHeads], l[kDecMaxHeads];  // softmax state of every head over this lane's key
#pragma unroll
  for (int h = 0; h < kDecMaxHeads; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.0f;
  }
#endif
#ifndef RF_PORTABLE
  float o[kPvTiles<HD>][4];  // P.V on tensor cores
#pragma unroll
  for (int i = 0; i < kPvTiles<HD>; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[i][e] = 0.0f;
#else
  float acc[kDecMaxHeads][8];  // P.V on CUDA cores
#pragma unroll
  for (int h = 0; h < kDecMaxHeads; ++h)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[h][e] = 0.0f;
#endif

#ifndef RF_PORTABLE
  if constexpr (kDecBulk<HD, KV>) {
    decode_keys_bulk<HD, kExt>(a, sm, t, kvh, head0, group, pos, k_begin, k_end, n_tiles, m_h, l_h, o);
  } else
#endif
  {
    DecodeTiles<HD, KV> tiles;
    tiles.cc = th.tid % L::kCopyChunks;
    tiles.r0 = th.tid / L::kCopyChunks;
    tiles.table = a.block_tables + size_t(a.token_seq[t]) * a.max_blocks_per_seq;
    tiles.kbase = static_cast<const KV*>(a.kc) + size_t(kvh) * HD + tiles.cc * L::kPerCopy;
    tiles.vbase = static_cast<const KV*>(a.vc) + size_t(kvh) * HD + tiles.cc * L::kPerCopy;
    tiles.ks = sm.ks;
    tiles.vs = sm.vs;
    tiles.kscale = kIsFp8<KV> ? a.k_scale + kvh : nullptr;
    tiles.vscale = kIsFp8<KV> ? a.v_scale + kvh : nullptr;
    tiles.ksc = sm.ksc;
    tiles.vsc = sm.vsc;
    tiles.n_kv = a.n_kv;
    tiles.k_begin = k_begin;
    tiles.k_end = k_end;
    tiles.n_tiles = n_tiles;
    tiles.bs = a.block_size;
    tiles.block_shift = a.block_shift;
    tiles.kv_dim = a.n_kv * HD;

    int blk[L::kPasses];  // block-table entries of the next tile to issue
    {
      int first[kDecStages - 1][L::kPasses];
#pragma unroll
      for (int st = 0; st < kDecStages - 1; ++st) tiles.fetch(st, first[st]);
      const int early = decode_early_tiles(k_begin, k_end, pos, n_tiles);
#pragma unroll
      for (int st = 0; st < kDecStages - 1; ++st) {
        if (st < early) {
          tiles.issue(st, first[st]);
          copy_commit();
        }
      }
      pdl_wait();
      pdl_trigger();
#pragma unroll
      for (int st = 0; st < kDecStages - 1; ++st) {
        if (st < early) continue;
        if (st < n_tiles) tiles.issue(st, first[st]);
        copy_commit();
      }
    }
#ifndef RF_PORTABLE
    uint4* qf = reinterpret_cast<uint4*>(sm.q);
    decode_load_q<HD>(a.q, a.n_heads, t, head0, group, qf);
#else
    float* qs = reinterpret_cast<float*>(sm.q);
    decode_load_q<HD>(a.q, a.n_heads, a.scale, t, head0, group, qs);
#endif
    tiles.fetch(kDecStages - 1, blk);
    for (int it = 0; it < n_tiles; ++it) {
      copy_wait<kDecStages - 2>();
      __syncthreads();  // tile `it` visible to all; tile it - 1 done with (its stage is refilled next)
      if (it + kDecStages - 1 < n_tiles) {
        tiles.issue(it + kDecStages - 1, blk);
        tiles.fetch(it + kDecStages, blk);
      }
      copy_commit();

      const int st = it % kDecStages;
      const int k0 = k_begin + it * kDecTile + th.grp * kDecKeysPerGroup;  // this group's first key
      const int tile_row = st * kDecTile + th.grp * kDecKeysPerGroup;  // the group's first staged row
      const KV* kt = sm.ks + size_t(tile_row) * L::kRow;
      const float* ksc = kIsFp8<KV> ? sm.ksc + tile_row : nullptr;
      const float* vsc = kIsFp8<KV> ? sm.vsc + tile_row : nullptr;
      const KV* vt = kt + size_t(kDecStages) * kDecTile * L::kRow;  // the group's V rows
#ifndef RF_PORTABLE
      __half* vh = sm.vh ? sm.vh + size_t(th.grp) * kDecKeysPerGroup * L::kVhRow : nullptr;
      decode_tile_mma<HD, kExt>(m_h, l_h, qf, kt, vt, ksc, vsc, vh, a.scale, a.softcap, k0, k_end, o);
#else
      float corr[kDecMaxHeads];
      bool rescale = false;
      decode_tile_softmax<HD, kExt>(m, l, qs, kt, ksc, vsc, a.softcap, k0, k_end, group, sm.ps, corr, rescale);
      decode_accumulate_v<HD>(acc, corr, rescale, vt, sm.ps, group);
#endif
    }
  }

  // Merge the four groups through shared memory (the stage buffers, now free).
#ifndef RF_PORTABLE
  decode_publish_ml<HD>(m_h, l_h, group, sm.mls);
#else
  decode_publish_ml<HD>(m, l, group, sm.mls);
#endif
  copy_wait<0>();
  __syncthreads();
#ifndef RF_PORTABLE
  decode_stash_mma<HD>(o, group, sm.merge);
  __syncthreads();
  decode_merge_store<HD, 1>(a, sm.mls, sm.merge, sm.cpart, t, row, head0, split, pos, group);
  if (a.cluster) decode_cluster_combine<HD>(a, sm.cpart, t, head0, pos, group);
#else
  decode_stash_acc<HD>(acc, group, sm.merge);
  __syncthreads();
  decode_merge_store<HD, L::kSub>(a, sm.mls, sm.merge, sm.cpart, t, row, head0, split, pos, group);
#endif
}

// Combines the splits of one (token, head) (combine_splits): one block of
// hd threads or more (with xq: exactly hd).
__global__ void attention_combine_kernel(const float* __restrict__ part_out, const float* __restrict__ part_ml,
                                         const int32_t* __restrict__ positions, const int32_t* __restrict__ tokens,
                                         int n_heads, int hd, int n_splits,
                                         __half* __restrict__ out, int8_t* __restrict__ xq,
                                         float2* __restrict__ xds) {
  extern __shared__ float weight[];  // [combine_weight_floats(n_splits)]
  pdl_wait();
  pdl_trigger();
  const int row = blockIdx.x, t = tokens ? tokens[row] : row, h = blockIdx.y;
  combine_splits(part_out, part_ml, positions[t] >= 0, n_heads, hd, n_splits, row, t, h, out, xq, xds, weight,
                        int(threadIdx.x), int(blockDim.x));
}

template <int HD, bool kExt, typename KV>
void opt_in_decode() {
  constexpr size_t bytes = DecodeLayout<HD, KV>::kBytes;
  const auto kernel = attention_decode_kernel<HD, kExt, KV>;
  if constexpr (bytes > 48 * 1024) {
    RF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
#ifndef RF_PORTABLE
    // Several blocks per SM need the largest shared-memory carveout.
    RF_GPU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      int(cudaSharedmemCarveoutMaxShared)));
#endif
  }
#ifndef RF_PORTABLE
  // Clusters of splits past the portable 8 blocks (kMaxDecodeCluster).
  RF_GPU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
#endif
}

// Head size 256 fits the decode kernel's shared memory on CUDA only (107 KB).
#ifdef RF_PORTABLE
constexpr bool kDecode256 = false;
#else
constexpr bool kDecode256 = true;
#endif

template <typename KV>
void opt_in_decode_all() {
  opt_in_decode<128, false, KV>();
  opt_in_decode<96, false, KV>();
  opt_in_decode<64, false, KV>();
  opt_in_decode<128, true, KV>();
  opt_in_decode<96, true, KV>();
  opt_in_decode<64, true, KV>();
  if constexpr (kDecode256) opt_in_decode<256, true, KV>();
}

template <int HD, bool kExt, typename KV>
void launch_decode(dim3 grid, const AttnArgs& a, const LaunchCtx& ctx) {
  constexpr size_t bytes = DecodeLayout<HD, KV>::kBytes;
  // With a.cluster, a cluster per (token, KV head [chunk]): its splits along z.
  launch_in_clusters(attention_decode_kernel<HD, kExt, KV>, grid, dim3(kDecThreads), bytes, ctx,
                     dim3(1, 1, a.cluster ? grid.z : 1), a);
}

template <typename KV>
void launch_decode_kv(dim3 grid, const AttnArgs& a, bool ext, const LaunchCtx& ctx) {
  if (ext) {
    grid.y *= unsigned(a.head_chunks);
    if (a.hd == 256) {
      if constexpr (kDecode256) launch_decode<256, true, KV>(grid, a, ctx);
    } else if (a.hd == 128) {
      launch_decode<128, true, KV>(grid, a, ctx);
    } else if (a.hd == 96) {
      launch_decode<96, true, KV>(grid, a, ctx);
    } else {
      launch_decode<64, true, KV>(grid, a, ctx);
    }
  } else if (a.hd == 128) {
    launch_decode<128, false, KV>(grid, a, ctx);
  } else if (a.hd == 96) {
    launch_decode<96, false, KV>(grid, a, ctx);
  } else {
    launch_decode<64, false, KV>(grid, a, ctx);
  }
}

}  // namespace

void attention_decode_device_setup() {
  opt_in_decode_all<__half>();
  opt_in_decode_all<Fp8>();
}

bool attention_decode_supported(int head_dim) {
  return head_dim == 64 || head_dim == 96 || head_dim == 128 || (kDecode256 && head_dim == 256);
}

void launch_attention_decode(dim3 grid, const AttnArgs& a, bool ext, bool fp8, const LaunchCtx& ctx) {
  if (fp8)
    launch_decode_kv<Fp8>(grid, a, ext, ctx);
  else
    launch_decode_kv<__half>(grid, a, ext, ctx);
}

void launch_attention_combine(const AttentionScratch& scratch, const int32_t* positions, const int32_t* tokens,
                              int n_rows, int n_heads, int head_dim, int n_splits, void* out, const LaunchCtx& ctx) {
  const int threads = std::min(256, std::max(RF_WARP_SIZE, head_dim));
  // One token whose GEMV reads 8-bit quants: the combine writes them (a
  // thread per dim, whole 32-lane groups).
  const bool q8 = !tokens && n_rows == 1 && head_dim % 32 == 0 && threads == head_dim &&
                  act_q8_fusable(ctx, 1, n_heads * head_dim);
  launch(attention_combine_kernel, dim3(unsigned(n_rows), unsigned(n_heads)), dim3(unsigned(threads)),
         size_t(combine_weight_floats(n_splits)) * sizeof(float), ctx, scratch.partial_out, scratch.partial_ml,
         positions, tokens, n_heads, head_dim, n_splits, static_cast<__half*>(out),
         q8 ? act_q8_quants(ctx.act_q8) : nullptr, q8 ? act_q8_scales(ctx.act_q8) : nullptr);
  if (q8) act_q8_record(ctx, out, n_heads * head_dim);
}

}  // namespace rf::gpu
