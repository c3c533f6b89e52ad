// RoPE fused with the paged KV store. f16 cache: one thread per rotated
// pair of q, per rotated pair of k (written to the activations and the
// cache), and per pair of v elements (copied to the cache); grid.x is the
// token, so every token is spread over many blocks. e4m3 cache: one warp
// per head row of q, k or v, since a stored row needs its largest magnitude
// for its scale (core/fp8.h). Angles in f32 as llama.cpp computes them.
// Slot -1 (padding) stores nothing.
#include "backend/cuda/kernels.h"
#include "backend/rope_math.h"
#include "core/fp8.h"

namespace rf::gpu {
namespace {

constexpr int kThreads = 128;

// The elements of rotated pair i of a head: (2i, 2i+1), or (i, i + n_rot/2)
// in the NeoX layout; dimensions past n_rot pass through, a pair at a time.
__device__ __forceinline__ void rope_pair(int i, const RopeParams& rope, int& a, int& b) {
  const int half_rot = rope.n_rot / 2;
  if (i < half_rot) {
    a = rope.neox ? i : 2 * i;
    b = rope.neox ? i + half_rot : 2 * i + 1;
  } else {
    a = rope.n_rot + 2 * (i - half_rot);
    b = a + 1;
  }
}

// Rotates pair i (i < n_rot / 2) of a head at position pos.
__device__ __forceinline__ void rope_rotate(int i, int pos, const RopeParams& rope, const YarnCorrDims& corr,
                                            float& x0, float& x1) {
  const int i0 = 2 * i;
  float theta = float(pos) * powf(rope.freq_base, -float(i0) / float(rope.n_rot));
  if (rope.freq_factors) theta /= rope.freq_factors[i];
  float c, sn;
  rope_cos_sin<float>(theta, i0, rope, corr, &c, &sn);
  const float r0 = x0 * c - x1 * sn, r1 = x0 * sn + x1 * c;
  x0 = r0;
  x1 = r1;
}

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
  int a, b;
  rope_pair(i, rope, a, b);
  float x0 = __half2float(base[a]), x1 = __half2float(base[b]);
  if (i < rope.n_rot / 2) {
    rope_rotate(i, positions[t], rope, corr, x0, x1);
    base[a] = __float2half_rn(x0);
    base[b] = __float2half_rn(x1);
  }
  if (!is_q && store) {
    kc[slot * kv_dim + head * hd + a] = __float2half_rn(x0);
    kc[slot * kv_dim + head * hd + b] = __float2half_rn(x1);
  }
}

constexpr int kFp8RowsPerBlock = 4;
constexpr int kFp8MaxPairsPerLane = 256 / 2 / 32;  // head_dim <= 256

// e4m3 cache: warp w of block (t, y) takes row y * kFp8RowsPerBlock + w of
// token t: q heads (rotated in place), then k heads (rotated in place and
// stored), then v heads (stored). A stored row: its largest magnitude gives
// the scale, each element goes in as e4m3(x / scale) (core/fp8.h).
__global__ void rope_store_kv_fp8_kernel(__half* __restrict__ q, __half* __restrict__ k, const __half* __restrict__ v,
                                         const int32_t* __restrict__ positions, const int32_t* __restrict__ slots,
                                         int n_heads, int n_kv, int hd, RopeParams rope, YarnCorrDims corr,
                                         uint8_t* __restrict__ kc, uint8_t* __restrict__ vc,
                                         float* __restrict__ k_scale, float* __restrict__ v_scale, int64_t n_slots) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, lane = threadIdx.x % RF_WARP_SIZE;
  const int row = blockIdx.y * kFp8RowsPerBlock + threadIdx.x / RF_WARP_SIZE;
  if (row >= n_heads + 2 * n_kv) return;
  const int64_t slot = slots[t];
  const bool store = slot >= 0 && slot < n_slots;
  const int kind = row < n_heads ? 0 : row < n_heads + n_kv ? 1 : 2;  // q, k, v
  if (kind == 2 && !store) return;
  const int head = kind == 0 ? row : kind == 1 ? row - n_heads : row - n_heads - n_kv;
  const int kv_dim = n_kv * hd;
  __half* base = kind == 0 ? q + (size_t(t) * n_heads + head) * hd : k + size_t(t) * kv_dim + size_t(head) * hd;
  const __half* src = kind == 2 ? v + size_t(t) * kv_dim + size_t(head) * hd : base;
  const int pos = positions[t];
  float x0[kFp8MaxPairsPerLane], x1[kFp8MaxPairsPerLane];
  int ia[kFp8MaxPairsPerLane], ib[kFp8MaxPairsPerLane];
  float amax = 0.0f;
  bool nan = false;  // a NaN row keeps its NaNs (e4m3_row_scale)
#pragma unroll
  for (int j = 0; j < kFp8MaxPairsPerLane; ++j) {
    const int i = lane + j * RF_WARP_SIZE;
    ia[j] = ib[j] = -1;
    if (i >= hd / 2) continue;
    if (kind == 2) {
      ia[j] = 2 * i;
      ib[j] = 2 * i + 1;
    } else {
      rope_pair(i, rope, ia[j], ib[j]);
    }
    x0[j] = __half2float(src[ia[j]]);
    x1[j] = __half2float(src[ib[j]]);
    if (kind < 2 && i < rope.n_rot / 2) {
      rope_rotate(i, pos, rope, corr, x0[j], x1[j]);
      base[ia[j]] = __float2half_rn(x0[j]);
      base[ib[j]] = __float2half_rn(x1[j]);
    }
    amax = fmaxf(amax, fmaxf(fabsf(x0[j]), fabsf(x1[j])));
    nan |= isnan(x0[j]) || isnan(x1[j]);
  }
  if (kind == 0 || !store) return;
  const float scale = e4m3_row_scale(warp_max(nan ? 1.0f : 0.0f) > 0.0f ? NAN : warp_max(amax));
  uint8_t* dst = (kind == 1 ? kc : vc) + slot * kv_dim + size_t(head) * hd;
#pragma unroll
  for (int j = 0; j < kFp8MaxPairsPerLane; ++j)
    if (ia[j] >= 0) {
      dst[ia[j]] = e4m3_from_float(x0[j] / scale);
      dst[ib[j]] = e4m3_from_float(x1[j] / scale);
    }
  if (lane == 0) (kind == 1 ? k_scale : v_scale)[slot * n_kv + head] = scale;
}

}  // namespace

void rope_store_kv(void* q, void* k, const void* v, const StepMeta& m, int n_tokens, int n_heads,
                   const RopeParams& rope, const KVLayer& cache, const LaunchCtx& ctx) {
  if (n_tokens == 0) return;
  RF_CHECK(cache.type == DType::F16 || (cache.type == DType::F8_E4M3 && cache.k_scale && cache.v_scale),
           "cuda KV cache must be f16 or f8_e4m3 with row scales, not ", dtype_name(cache.type));
  RF_CHECK(rope.n_rot > 0 && rope.n_rot <= cache.head_dim && rope.n_rot % 2 == 0 && cache.head_dim % 2 == 0,
           "cuda rope: bad n_rot ", rope.n_rot);
  const YarnCorrDims corr = yarn_corr_dims(rope.n_rot, rope.n_ctx_orig, rope.freq_base, rope.beta_fast, rope.beta_slow);
  if (cache.type == DType::F8_E4M3) {
    RF_CHECK(cache.head_dim <= 2 * kFp8MaxPairsPerLane * ctx.warp_size, "cuda fp8 KV store: head_dim ",
             cache.head_dim, " > ", 2 * kFp8MaxPairsPerLane * ctx.warp_size);
    const int rows = n_heads + 2 * cache.n_kv_heads;
    const dim3 grid(unsigned(n_tokens), unsigned((rows + kFp8RowsPerBlock - 1) / kFp8RowsPerBlock));
    launch(rope_store_kv_fp8_kernel, grid, dim3(unsigned(kFp8RowsPerBlock * ctx.warp_size)), 0, ctx,
           static_cast<__half*>(q), static_cast<__half*>(k), static_cast<const __half*>(v), m.positions,
           m.slot_mapping, n_heads, cache.n_kv_heads, cache.head_dim, rope, corr, static_cast<uint8_t*>(cache.k),
           static_cast<uint8_t*>(cache.v), cache.k_scale, cache.v_scale,
           int64_t(cache.num_blocks) * cache.block_size);
    RF_GPU_CHECK_LAUNCH();
    return;
  }
  const int items = (n_heads + 2 * cache.n_kv_heads) * (cache.head_dim / 2);
  const dim3 grid(unsigned(n_tokens), unsigned((items + kThreads - 1) / kThreads));
  launch(rope_store_kv_kernel, grid, kThreads, 0, ctx, 
      static_cast<__half*>(q), static_cast<__half*>(k), static_cast<const __half*>(v), m.positions, m.slot_mapping,
      n_heads, cache.n_kv_heads, cache.head_dim, rope, corr, static_cast<__half*>(cache.k),
      static_cast<__half*>(cache.v), int64_t(cache.num_blocks) * cache.block_size);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
