// Decode attention's steps as device functions, for attention_decode.cu
// only (its header comment says how the kernel works): q into registers
// or shared memory, the scores of a group's keys and their online-softmax
// update, P.V (tensor cores on CUDA, f32 lanes in the portable kernels),
// and the merge of the block's four groups into the output or this split's
// partial result. Built on attention_decode.cuh's block shape and tiles.
#pragma once

#include "backend/cuda/attention/attention_decode.cuh"

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
      const float inv = pos >= 0 ? softmax_out_scale(mx, lsum, sink_logit(a.sinks, hq)) : 0.0f;
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

}  // namespace
}  // namespace rf::gpu
