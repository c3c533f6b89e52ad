// Paged attention over the f16 KV cache, causal, with GQA. One block per
// (token, KV head, split): its warps take the query heads that share the KV
// head, K/V tiles are staged in shared memory, and an online softmax keeps
// one pass over the keys. With several splits (flash-decoding for long
// contexts) each block covers a slice of the keys and a second kernel
// combines the slices. Tokens with a negative position (padding) output 0.
#include <algorithm>

#include "backend/cuda/kernels.h"

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

// Combines the splits of one (token, head): one block of hd threads or more.
__global__ void attention_combine_kernel(const float* __restrict__ part_out, const float* __restrict__ part_ml,
                                         const int32_t* __restrict__ positions, int n_heads, int hd, int n_splits,
                                         __half* __restrict__ out) {
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

}  // namespace

void attention(const void* q, const KVLayer& cache, const StepMeta& m, int n_tokens, const AttentionParams& p,
               int n_splits, const AttentionScratch& scratch, void* out, gpuStream_t s) {
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
      attention_prefill_kernel<128><<<grid, threads, 0, s>>>(a, m.q_tiles, heads_per_block);
    else
      attention_prefill_kernel<64><<<grid, threads, 0, s>>>(a, m.q_tiles, heads_per_block);
    RF_GPU_CHECK_LAUNCH();
    return;
  }
  if (smem > 48 * 1024) RF_GPU_CHECK(gpuFuncSetAttribute(attention_kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  attention_kernel<<<dim3(n_tokens, p.n_kv_heads, n_splits), threads, smem, s>>>(a);
  RF_GPU_CHECK_LAUNCH();
  if (n_splits > 1) {
    attention_combine_kernel<<<dim3(n_tokens, p.n_heads), std::min(256, std::max(32, p.head_dim)), 0, s>>>(
        scratch.partial_out, scratch.partial_ml, m.positions, p.n_heads, p.head_dim, n_splits,
        static_cast<__half*>(out));
    RF_GPU_CHECK_LAUNCH();
  }
}

}  // namespace rf::gpu
