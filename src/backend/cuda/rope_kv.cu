// RoPE fused with the paged KV store: one block per token rotates its q and
// k heads in place (f16) and writes k and v into the cache slot the batch
// assigns (slot -1: padding, not stored). Angles in f32, as llama.cpp does.
#include "backend/cuda/kernels.h"
#include "backend/rope_math.h"

namespace rf::gpu {
namespace {

__global__ void rope_store_kv_kernel(__half* __restrict__ q, __half* __restrict__ k, const __half* __restrict__ v,
                                     const int32_t* __restrict__ positions, const int32_t* __restrict__ slots,
                                     int n_heads, int n_kv, int hd, RopeParams rope, YarnCorrDims corr,
                                     __half* __restrict__ kc, __half* __restrict__ vc, int64_t n_slots) {
  const int t = blockIdx.x;
  const int pos = positions[t];
  const int half_rot = rope.n_rot / 2;
  const int q_pairs = n_heads * half_rot, k_pairs = n_kv * half_rot;
  __half* qt = q + size_t(t) * n_heads * hd;
  __half* kt = k + size_t(t) * n_kv * hd;
  for (int p = threadIdx.x; p < q_pairs + k_pairs; p += blockDim.x) {
    const bool is_q = p < q_pairs;
    const int pp = is_q ? p : p - q_pairs;
    const int head = pp / half_rot, i = pp % half_rot, i0 = 2 * i;
    float theta = float(pos) * powf(rope.freq_base, -float(i0) / float(rope.n_rot));
    if (rope.freq_factors) theta /= rope.freq_factors[i];
    float c, sn;
    rope_cos_sin<float>(theta, i0, rope, corr, &c, &sn);
    __half* base = (is_q ? qt : kt) + size_t(head) * hd;
    const int a = rope.neox ? i : i0, b = rope.neox ? i + half_rot : i0 + 1;
    const float x0 = __half2float(base[a]), x1 = __half2float(base[b]);
    base[a] = __float2half_rn(x0 * c - x1 * sn);
    base[b] = __float2half_rn(x0 * sn + x1 * c);
  }
  __syncthreads();
  const int64_t slot = slots[t];
  if (slot < 0 || slot >= n_slots) return;
  const int kv_dim = n_kv * hd;
  const __half* vt = v + size_t(t) * kv_dim;
  for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    kc[slot * kv_dim + i] = kt[i];
    vc[slot * kv_dim + i] = vt[i];
  }
}

}  // namespace

void rope_store_kv(void* q, void* k, const void* v, const StepMeta& m, int n_tokens, int n_heads,
                   const RopeParams& rope, const KVLayer& cache, gpuStream_t s) {
  if (n_tokens == 0) return;
  RF_CHECK(cache.type == DType::F16, "cuda KV cache must be f16");
  RF_CHECK(rope.n_rot > 0 && rope.n_rot <= cache.head_dim && rope.n_rot % 2 == 0, "cuda rope: bad n_rot ", rope.n_rot);
  const YarnCorrDims corr = yarn_corr_dims(rope.n_rot, rope.n_ctx_orig, rope.freq_base, rope.beta_fast, rope.beta_slow);
  rope_store_kv_kernel<<<n_tokens, 128, 0, s>>>(
      static_cast<__half*>(q), static_cast<__half*>(k), static_cast<const __half*>(v), m.positions, m.slot_mapping,
      n_heads, cache.n_kv_heads, cache.head_dim, rope, corr, static_cast<__half*>(cache.k),
      static_cast<__half*>(cache.v), int64_t(cache.num_blocks) * cache.block_size);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
