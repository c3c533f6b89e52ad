// Prefill attention (several new tokens per sequence) over the paged KV
// cache, causal, with GQA: attention_prefill_kernel and its launcher. A
// block takes a tile of up to kPrefillQ consecutive query tokens of one
// sequence and all query heads of one KV head, four threads per (query,
// head) row each owning HD/4 dims. K/V tiles of kPrefillK keys are staged in
// shared memory once for every head of the group; scores of a key tile go
// through one online-softmax update. kExt: with a sliding window (key tiles
// before the tile's first visible key skipped, keys before it never loaded)
// and logit soft-capping. An e4m3 cache (KV = Fp8) is staged as f16 (its
// rows times their scales), so the rest is the same kernel.
#include "backend/cuda/attention.cuh"
#include "backend/cuda/kv_fp8.cuh"

namespace rf::gpu {
namespace {

constexpr int kPrefillQ = 16, kPrefillK = 32;

template <int HD, bool kExt, typename KV>
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
  constexpr int kPer = 16 / int(sizeof(KV));  // elements per 16-byte load
  constexpr int kChunks = HD / kPer;         // 16-byte loads per key row
  // The first key any row of this tile sees (its first query's window
  // start), and the key tile holding it. Keys before it are not loaded: in a
  // sliding-window KV group their blocks may be released (table entries
  // -1) or reused by another sequence.
  int k_lo = 0;
  if constexpr (kExt)
    if (a.window > 0) k_lo = max(0, a.positions[t0] - a.window + 1);
  const int k_first = k_lo / kPrefillK * kPrefillK;
  for (int k0 = k_first; k0 <= max_pos; k0 += kPrefillK) {
    __syncthreads();
    for (int i = threadIdx.x; i < kPrefillK * kChunks; i += blockDim.x) {
      const int j = i / kChunks, c = i % kChunks, p = k0 + j;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
      float k_sc = 0.0f, v_sc = 0.0f;
      if (p >= k_lo && p <= max_pos) {
        const int64_t slot = int64_t(table[p / a.block_size]) * a.block_size + p % a.block_size;
        kv = reinterpret_cast<const uint4*>(static_cast<const KV*>(a.kc) + slot * kv_dim + kvh * HD)[c];
        vv = reinterpret_cast<const uint4*>(static_cast<const KV*>(a.vc) + slot * kv_dim + kvh * HD)[c];
        if constexpr (kIsFp8<KV>) {
          k_sc = a.k_scale[slot * a.n_kv + kvh];
          v_sc = a.v_scale[slot * a.n_kv + kvh];
        }
      }
      if constexpr (kIsFp8<KV>) {
        e4m3x16_to_half(kv, k_sc, &ks[j][c * kPer]);
        e4m3x16_to_half(vv, v_sc, &vs[j][c * kPer]);
      } else {
        reinterpret_cast<uint4*>(&ks[j][0])[c] = kv;
        reinterpret_cast<uint4*>(&vs[j][0])[c] = vv;
      }
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
      if constexpr (kExt) {
        const bool visible = k0 + j <= pos && (a.window <= 0 || k0 + j > pos - a.window);
        sc[j] = visible ? (a.softcap > 0.0f ? softcap_score(s, a.softcap) : s) : -INFINITY;
      } else {
        sc[j] = (k0 + j <= pos) ? s : -INFINITY;
      }
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


template <typename KV>
void launch_prefill_kv(const AttnArgs& a, const int32_t* tiles, int n_tiles, int heads_per_block, bool ext,
                       const LaunchCtx& ctx) {
  const dim3 grid(unsigned(n_tiles), unsigned(a.n_kv), unsigned(a.n_heads / a.n_kv / heads_per_block));
  const int threads = heads_per_block * kPrefillQ * 4;
  if (a.hd == 256)
    launch(attention_prefill_kernel<256, true, KV>, grid, dim3(threads), 0, ctx, a, tiles, heads_per_block);
  else if (a.hd == 128 && ext)
    launch(attention_prefill_kernel<128, true, KV>, grid, dim3(threads), 0, ctx, a, tiles, heads_per_block);
  else if (a.hd == 128)
    launch(attention_prefill_kernel<128, false, KV>, grid, dim3(threads), 0, ctx, a, tiles, heads_per_block);
  else if (ext)
    launch(attention_prefill_kernel<64, true, KV>, grid, dim3(threads), 0, ctx, a, tiles, heads_per_block);
  else
    launch(attention_prefill_kernel<64, false, KV>, grid, dim3(threads), 0, ctx, a, tiles, heads_per_block);
}

}  // namespace

bool attention_prefill_supported(int head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

void launch_attention_prefill(const AttnArgs& a, const int32_t* tiles, int n_tiles, int heads_per_block, bool ext,
                              bool fp8, const LaunchCtx& ctx) {
  if (fp8)
    launch_prefill_kv<Fp8>(a, tiles, n_tiles, heads_per_block, ext, ctx);
  else
    launch_prefill_kv<__half>(a, tiles, n_tiles, heads_per_block, ext, ctx);
}

}  // namespace rf::gpu
