// Multi-head latent attention kernels (DeepSeek V2/V3; backend.h
// MlaParams), f16 activations and an f16 compressed cache (one row [c |
// k_rope] per slot):
//  - mla_rope_store: a block per token turns each q head's RoPE dims, and
//    in shared memory RMS-norms the kv row's latent and turns its RoPE key,
//    then writes the row back and into its cache slot (slot -1: none);
//  - mla_absorb: a block per (token, head), a warp per latent row, absorbs
//    the head's no-RoPE query through attn_k_b and appends its RoPE query;
//  - mla_attend: a block per (token, head) runs an online softmax over the
//    sequence's cached rows in tiles of kKeyTile keys (a warp per key's
//    score), accumulating the weighted latents, each thread its own
//    latent dims; a padded token (position -1) gets zeros;
//  - mla_vproj: a block per (token, head), a warp per value row, applies
//    attn_v_b to the weighted latents.
// Scores and sums in f32; the absorbed queries and the weighted latents
// are stored as f16 between the launches. Every kernel reads only its
// arguments and the step's metadata, so the launches are captured in decode
// graphs.
#include "backend/cuda/attention/attention.cuh"
#include "backend/rope_math.h"
#include "core/error.h"

namespace rf::gpu {
namespace {

// The kernels' view of MlaParams (its sizes and scale).
struct MlaDims {
  int n_heads, nope, rope, lora, v;
  float scale;
  __device__ int q_head() const { return nope + rope; }
  __device__ int kv_row() const { return lora + rope; }
};
MlaDims dims_of(const MlaParams& p) { return MlaDims{p.n_heads, p.nope, p.rope, p.lora, p.v, p.scale}; }

constexpr int kThreads = 256;
constexpr int kKeyTile = 32;
constexpr int kMaxLatentPerThread = 4;  // lora <= kThreads * 4

template <typename T>
__device__ __forceinline__ float weight_at(const void* w, size_t i) {
  return to_float(static_cast<const T*>(w)[i]);
}

__global__ void __launch_bounds__(kThreads)
    mla_rope_store_kernel(__half* __restrict__ q, __half* __restrict__ kv, const float* __restrict__ norm_w, float eps,
                          const int32_t* __restrict__ positions, const int32_t* __restrict__ slots, MlaDims p,
                          RopeParams rope, YarnCorrDims corr, __half* __restrict__ cache, int64_t slot_elems) {
  extern __shared__ float row[];  // [lora + rope]
  __shared__ float partial[kThreads / 32 + 1];
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, tid = threadIdx.x, W = p.kv_row(), half = p.rope / 2;
  const int pos = positions[t];
  auto angle = [&](int i, float& c, float& s) {
    rope_cos_sin_at(pos, rope_rate(2 * i, rope, corr), rope_mscale(rope), &c, &s);
  };
  auto pair = [&](int i, int& a, int& b) {
    a = rope.neox ? i : 2 * i;
    b = rope.neox ? i + half : 2 * i + 1;
  };
  // Each q head's RoPE dims, a thread per pair.
  __half* qt = q + size_t(t) * p.n_heads * p.q_head();
  for (int idx = tid; idx < p.n_heads * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    int a, b;
    pair(i, a, b);
    __half* x = qt + size_t(h) * p.q_head() + p.nope;
    float c, s;
    angle(i, c, s);
    const float x0 = __half2float(x[a]), x1 = __half2float(x[b]);
    x[a] = __float2half_rn(x0 * c - x1 * s);
    x[b] = __float2half_rn(x0 * s + x1 * c);
  }
  // The kv row: the latent normed, the key turned.
  __half* kt = kv + size_t(t) * W;
  float ss = 0.0f;
  for (int i = tid; i < W; i += blockDim.x) {
    const float x = __half2float(kt[i]);
    row[i] = x;
    if (i < p.lora) ss += x * x;
  }
  ss = block_sum(ss, partial);  // (its barriers also order the row's loads before the writes below)
  const float inv = rsqrtf(ss / float(p.lora) + eps);
  for (int i = tid; i < p.lora; i += blockDim.x) row[i] = row[i] * inv * norm_w[i];
  for (int i = tid; i < half; i += blockDim.x) {
    int a, b;
    pair(i, a, b);
    float c, s;
    angle(i, c, s);
    const float x0 = row[p.lora + a], x1 = row[p.lora + b];
    row[p.lora + a] = x0 * c - x1 * s;
    row[p.lora + b] = x0 * s + x1 * c;
  }
  __syncthreads();
  const int slot = slots[t];
  for (int i = tid; i < W; i += blockDim.x) {
    const __half h = __float2half_rn(row[i]);
    kt[i] = h;
    if (slot >= 0) cache[size_t(slot) * slot_elems + i] = h;
  }
}

// q_lat[t, h] = [w_kb[h] . q_nope | q_rope].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    mla_absorb_kernel(const __half* __restrict__ q, const void* __restrict__ w_kb, MlaDims p,
                      __half* __restrict__ q_lat) {
  extern __shared__ float qn[];  // [nope]
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int lane = tid % RF_WARP_SIZE, warp = tid / RF_WARP_SIZE, n_warps = blockDim.x / RF_WARP_SIZE;
  const __half* qh = q + (size_t(t) * p.n_heads + h) * p.q_head();
  __half* out = q_lat + (size_t(t) * p.n_heads + h) * p.kv_row();
  for (int d = tid; d < p.nope; d += blockDim.x) qn[d] = __half2float(qh[d]);
  for (int d = tid; d < p.rope; d += blockDim.x) out[p.lora + d] = qh[p.nope + d];
  __syncthreads();
  for (int i = warp; i < p.lora; i += n_warps) {
    const size_t row = (size_t(h) * p.lora + i) * p.nope;
    float s = 0.0f;
    for (int d = lane; d < p.nope; d += RF_WARP_SIZE) s += weight_at<T>(w_kb, row + d) * qn[d];
    s = warp_sum(s);
    if (lane == 0) out[i] = __float2half_rn(s);
  }
}

// o_lat[t, h] = sum_j softmax_j(scale * q_lat[t, h] . K_j) c_j over the
// token's sequence keys [0, position].
__global__ void __launch_bounds__(kThreads)
    mla_attend_kernel(const __half* __restrict__ q_lat, const __half* __restrict__ cache, int64_t slot_elems,
                      const int32_t* __restrict__ positions, const int32_t* __restrict__ token_seq,
                      const int32_t* __restrict__ block_tables, int max_blocks, int block_size, MlaDims p,
                      __half* __restrict__ o_lat) {
  extern __shared__ float qs[];  // [lora + rope], then kKeyTile scores
  float* sc = qs + p.kv_row();
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, h = blockIdx.y, tid = threadIdx.x, W = p.kv_row();
  const int lane = tid % RF_WARP_SIZE, warp = tid / RF_WARP_SIZE, n_warps = blockDim.x / RF_WARP_SIZE;
  const __half* qh = q_lat + (size_t(t) * p.n_heads + h) * W;
  for (int d = tid; d < W; d += blockDim.x) qs[d] = __half2float(qh[d]);
  __syncthreads();
  const int n_ctx = positions[t] + 1;
  const int32_t* table = block_tables + size_t(token_seq[t]) * max_blocks;
  auto key = [&](int j) {
    return cache + (size_t(table[j / block_size]) * block_size + size_t(j % block_size)) * slot_elems;
  };
  float acc[kMaxLatentPerThread] = {};
  float m = -INFINITY, l = 0.0f;
  for (int j0 = 0; j0 < n_ctx; j0 += kKeyTile) {
    const int n_keys = min(kKeyTile, n_ctx - j0);
    for (int u = warp; u < n_keys; u += n_warps) {
      const __half* kr = key(j0 + u);
      float s = 0.0f;
      for (int d = lane; d < W; d += RF_WARP_SIZE) s += qs[d] * __half2float(kr[d]);
      s = warp_sum(s);
      if (lane == 0) sc[u] = s * p.scale;
    }
    __syncthreads();
    float tile_max = -INFINITY;
    for (int u = 0; u < n_keys; ++u) tile_max = fmaxf(tile_max, sc[u]);
    const float m_new = fmaxf(m, tile_max), rescale = expf(m - m_new);
    l *= rescale;
#pragma unroll
    for (int r = 0; r < kMaxLatentPerThread; ++r) acc[r] *= rescale;
    for (int u = 0; u < n_keys; ++u) {
      const float e = expf(sc[u] - m_new);
      l += e;
      const __half* kr = key(j0 + u);
#pragma unroll
      for (int r = 0; r < kMaxLatentPerThread; ++r) {
        const int i = tid + r * kThreads;
        if (i < p.lora) acc[r] += e * __half2float(kr[i]);
      }
    }
    m = m_new;
    __syncthreads();  // (the next tile's scores overwrite sc)
  }
  __half* out = o_lat + (size_t(t) * p.n_heads + h) * p.lora;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int r = 0; r < kMaxLatentPerThread; ++r) {
    const int i = tid + r * kThreads;
    if (i < p.lora) out[i] = __float2half_rn(acc[r] * inv);
  }
}

// out[t, h * v + j] = w_vb[h * v + j] . o_lat[t, h].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    mla_vproj_kernel(const __half* __restrict__ o_lat, const void* __restrict__ w_vb, MlaDims p,
                     __half* __restrict__ out) {
  extern __shared__ float o[];  // [lora]
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int lane = tid % RF_WARP_SIZE, warp = tid / RF_WARP_SIZE, n_warps = blockDim.x / RF_WARP_SIZE;
  const __half* oh = o_lat + (size_t(t) * p.n_heads + h) * p.lora;
  for (int i = tid; i < p.lora; i += blockDim.x) o[i] = __half2float(oh[i]);
  __syncthreads();
  for (int j = warp; j < p.v; j += n_warps) {
    const size_t row = (size_t(h) * p.v + j) * p.lora;
    float s = 0.0f;
    for (int i = lane; i < p.lora; i += RF_WARP_SIZE) s += weight_at<T>(w_vb, row + i) * o[i];
    s = warp_sum(s);
    if (lane == 0) out[(size_t(t) * p.n_heads + h) * p.v + j] = __float2half_rn(s);
  }
}

// The kernel of a weight format (f32, f16, bf16).
template <template <typename> class K, typename... Args>
void launch_typed(DType type, dim3 grid, size_t smem, const LaunchCtx& ctx, Args&&... args) {
  switch (type) {
    case DType::F32: return launch(K<float>::kernel, grid, dim3(kThreads), smem, ctx, std::forward<Args>(args)...);
    case DType::F16: return launch(K<__half>::kernel, grid, dim3(kThreads), smem, ctx, std::forward<Args>(args)...);
    case DType::BF16: return launch(K<bf16>::kernel, grid, dim3(kThreads), smem, ctx, std::forward<Args>(args)...);
    default: fail("cuda attention_mla: attn_k_b / attn_v_b of type ", dtype_name(type), " (f32, f16 or bf16 only)");
  }
}
template <typename T>
struct Absorb {
  static constexpr auto kernel = mla_absorb_kernel<T>;
};
template <typename T>
struct VProj {
  static constexpr auto kernel = mla_vproj_kernel<T>;
};

}  // namespace

bool mla_supported(const MlaParams& p) {
  return p.n_heads > 0 && p.nope > 0 && p.rope > 0 && p.rope % 2 == 0 && p.v > 0 && p.lora > 0 &&
         p.lora <= kThreads * kMaxLatentPerThread;
}

void mla_rope_store_kv(void* q, void* kv, const float* norm_w, float eps, const StepMeta& m, int n_tokens,
                       const MlaParams& p, const RopeParams& rope, const KVLayer& cache, const LaunchCtx& ctx) {
  RF_CHECK(mla_supported(p) && rope.n_rot == p.rope, "cuda mla_rope_store_kv: unsupported shape");
  if (n_tokens <= 0) return;
  const YarnCorrDims corr = yarn_corr_dims(rope.n_rot, rope.n_ctx_orig, rope.freq_base, rope.beta_fast, rope.beta_slow);
  launch(mla_rope_store_kernel, dim3(unsigned(n_tokens)), dim3(kThreads), size_t(p.kv_row()) * 4, ctx,
         static_cast<__half*>(q), static_cast<__half*>(kv), norm_w, eps, m.positions, m.slot_mapping, dims_of(p), rope, corr,
         static_cast<__half*>(cache.k), cache.slot_elems());
}

void attention_mla(const void* q, const KVLayer& cache, const StepMeta& m, int n_tokens, const MlaParams& p,
                   void* q_lat, void* o_lat, void* out, const LaunchCtx& ctx) {
  RF_CHECK(mla_supported(p), "cuda attention_mla: unsupported shape (", p.n_heads, " heads of ", p.nope, "+", p.rope,
           ", latent ", p.lora, " > ", kThreads * kMaxLatentPerThread, "?)");
  if (n_tokens <= 0) return;
  const dim3 grid(unsigned(n_tokens), unsigned(p.n_heads));
  launch_typed<Absorb>(p.w_kb.type, grid, size_t(p.nope) * 4, ctx, static_cast<const __half*>(q),
                       static_cast<const void*>(p.w_kb.data), dims_of(p), static_cast<__half*>(q_lat));
  launch(mla_attend_kernel, grid, dim3(kThreads), size_t(p.kv_row() + kKeyTile) * 4, ctx,
         static_cast<const __half*>(q_lat), static_cast<const __half*>(cache.k), cache.slot_elems(), m.positions,
         m.token_seq, m.block_tables, m.max_blocks_per_seq, m.block_size, dims_of(p), static_cast<__half*>(o_lat));
  launch_typed<VProj>(p.w_vb.type, grid, size_t(p.lora) * 4, ctx, static_cast<const __half*>(o_lat),
                      static_cast<const void*>(p.w_vb.data), dims_of(p), static_cast<__half*>(out));
}

}  // namespace rf::gpu
