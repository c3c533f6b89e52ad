// RoPE fused with the paged KV store. One thread per rotated pair of q, per
// rotated pair of k (written to the activations and the cache), and per pair
// of v elements (copied to the cache); grid.x is the token, so every token
// is spread over many blocks. Angles in f32 as llama.cpp computes them.
// Slot -1 (padding) stores nothing.
#include "backend/cuda/kernels.h"
#include "backend/rope_math.h"

namespace rf::gpu {
namespace {

constexpr int kThreads = 128;

__global__ void rope_store_kv_kernel(__half* __restrict__ q, __half* __restrict__ k, const __half* __restrict__ v,
                                     const int32_t* __restrict__ positions, const int32_t* __restrict__ slots,
                                     int n_heads, int n_kv, int hd, RopeParams rope, YarnCorrDims corr,
                                     __half* __restrict__ kc, __half* __restrict__ vc, int64_t n_slots) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x;
  const int item = blockIdx.y * blockDim.x + threadIdx.x;
  const int half_hd = hd / 2;
  const int q_items = n_heads * half_hd, k_items = n_kv * half_hd, v_items = n_kv * half_hd;
  if (item >= q_items + k_items + v_items) return;
  const int kv_dim = n_kv * hd;
  const int64_t slot = slots[t];
  const bool store = slot >= 0 && slot < n_slots;
  if (item >= q_items + k_items) {  // v: copy a pair
    if (!store) return;
    const int e = 2 * (item - q_items - k_items);
    const __half2 pair = *reinterpret_cast<const __half2*>(v + size_t(t) * kv_dim + e);
    *reinterpret_cast<__half2*>(vc + slot * kv_dim + e) = pair;
    return;
  }
  const bool is_q = item < q_items;
  const int it = is_q ? item : item - q_items;
  const int head = it / half_hd, i = it % half_hd;  // pair index within the head
  __half* base = (is_q ? q + size_t(t) * n_heads * hd : k + size_t(t) * kv_dim) + size_t(head) * hd;
  const int half_rot = rope.n_rot / 2;
  // Rotated pairs: (2i, 2i+1), or (i, i + n_rot/2) in the NeoX layout;
  // dimensions past n_rot pass through, a pair at a time.
  int a, b;
  if (i < half_rot) {
    a = rope.neox ? i : 2 * i;
    b = rope.neox ? i + half_rot : 2 * i + 1;
  } else {
    a = rope.n_rot + 2 * (i - half_rot);
    b = a + 1;
  }
  float x0 = __half2float(base[a]), x1 = __half2float(base[b]);
  if (i < half_rot) {
    const int pos = positions[t];
    const int i0 = 2 * i;
    float theta = float(pos) * powf(rope.freq_base, -float(i0) / float(rope.n_rot));
    if (rope.freq_factors) theta /= rope.freq_factors[i];
    float c, sn;
    rope_cos_sin<float>(theta, i0, rope, corr, &c, &sn);
    const float r0 = x0 * c - x1 * sn, r1 = x0 * sn + x1 * c;
    x0 = r0;
    x1 = r1;
    base[a] = __float2half_rn(x0);
    base[b] = __float2half_rn(x1);
  }
  if (!is_q && store) {
    kc[slot * kv_dim + head * hd + a] = __float2half_rn(x0);
    kc[slot * kv_dim + head * hd + b] = __float2half_rn(x1);
  }
}

}  // namespace

void rope_store_kv(void* q, void* k, const void* v, const StepMeta& m, int n_tokens, int n_heads,
                   const RopeParams& rope, const KVLayer& cache, const LaunchCtx& ctx) {
  if (n_tokens == 0) return;
  RF_CHECK(cache.type == DType::F16, "cuda KV cache must be f16");
  RF_CHECK(rope.n_rot > 0 && rope.n_rot <= cache.head_dim && rope.n_rot % 2 == 0 && cache.head_dim % 2 == 0,
           "cuda rope: bad n_rot ", rope.n_rot);
  const YarnCorrDims corr = yarn_corr_dims(rope.n_rot, rope.n_ctx_orig, rope.freq_base, rope.beta_fast, rope.beta_slow);
  const int items = (n_heads + 2 * cache.n_kv_heads) * (cache.head_dim / 2);
  const dim3 grid(unsigned(n_tokens), unsigned((items + kThreads - 1) / kThreads));
  launch(rope_store_kv_kernel, grid, kThreads, 0, ctx, 
      static_cast<__half*>(q), static_cast<__half*>(k), static_cast<const __half*>(v), m.positions, m.slot_mapping,
      n_heads, cache.n_kv_heads, cache.head_dim, rope, corr, static_cast<__half*>(cache.k),
      static_cast<__half*>(cache.v), int64_t(cache.num_blocks) * cache.block_size);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
