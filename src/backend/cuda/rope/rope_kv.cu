// RoPE fused with the paged KV store. f16 cache, decode steps: one thread
// per rotated pair of q, per rotated pair of k (written to the activations
// and the cache), and per pair of v elements (copied to the cache); grid.x
// is the token, so every token is spread over many blocks (past
// kMaxTokenBlocks tokens each block loops over every gridDim.x-th one).
// Prompts: a block per token, a thread per four pairs of several rows, its
// rotations worked out once a token, 16-byte loads and stores. e4m3 cache:
// also a thread per pair, rows kept whole in a block, since a stored row
// needs its largest magnitude for its scale (core/fp8.h). Angles in f32 as
// llama.cpp computes them. With per-head q/k RMSNorms before the rotation
// (Qwen3, Gemma 3; f16 cache): rows of a head kept whole in a block, as for
// e4m3, for the row's sum of squares.
// The f16 decode kernels read the step's metadata (positions, slots) and
// work out their rotation before their PDL wait: only the q/k/v loads
// follow it.
// Slot -1 (padding) stores nothing. A layer narrower than the cache's
// widest (Gemma 4) stores its rows the widest one's stride apart
// (KVLayer::slot_stride). rope_q turns q alone (the f16 kernels with no
// KV heads: Gemma 4's shared-KV layers).
//
#include <algorithm>

#include "backend/cuda/rope/rope.cuh"
#include "backend/rope_math.h"
#include "core/fp8.h"

namespace rf::gpu {
namespace {

constexpr int kThreads = 128;
// Blocks along the tokens at most (the f16 kernels): more tokens loop. The
// RoPE + KV store: a 2,048-token prompt chunk in one pass.
constexpr int kMaxTokenBlocks = 512, kMaxRopeTokenBlocks = 2048;
// Steps of at least this many tokens take rope_store_kv_rows_kernel (its
// blocks of one token run few threads: decode steps take the per-pair one).
constexpr int kRopeRowsMinTokens = 256;

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

// The rotation of pair i (i < n_rot / 2) of a head at position pos: its
// cosine and sine. It depends on the step's metadata and constants only,
// so the kernels work it out before their PDL wait.
struct RopeAngle {
  float c = 1.0f, s = 0.0f;
};
// Pair i's angle per position (rope_math.h's rope_rate, in double), the
// same for every position; the rotation at pos, scaled by mscale
// (rope_mscale, once a kernel).
__device__ __forceinline__ double rope_freq(int i, const RopeParams& rope, const YarnCorrDims& corr) {
  return rope_rate(2 * i, rope, corr);
}
__device__ __forceinline__ RopeAngle rope_angle(int pos, double freq, float mscale) {
  RopeAngle r;
  rope_cos_sin_at(pos, freq, mscale, &r.c, &r.s);
  return r;
}

// Rotates a pair by an angle.
__device__ __forceinline__ void rope_rotate(const RopeAngle& r, float& x0, float& x1) {
  const float r0 = x0 * r.c - x1 * r.s, r1 = x0 * r.s + x1 * r.c;
  x0 = r0;
  x1 = r1;
}

// N consecutive halves at p into h, and back: one access of 2N bytes (p
// aligned to it).
template <int N>
__device__ __forceinline__ void load_halves(const __half* p, __half (&h)[N]) {
  static_assert(N == 1 || N == 2 || N == 4 || N == 8, "1, 2, 4 or 8 halves");
  if constexpr (N == 1) h[0] = *p;
  else if constexpr (N == 2) memcpy(h, reinterpret_cast<const __half2*>(p), 4);
  else if constexpr (N == 4) { const uint2 u = *reinterpret_cast<const uint2*>(p); memcpy(h, &u, 8); }
  else { const uint4 u = *reinterpret_cast<const uint4*>(p); memcpy(h, &u, 16); }
}
template <int N>
__device__ __forceinline__ void store_halves(__half* p, const __half (&h)[N]) {
  if constexpr (N == 1) *p = h[0];
  else if constexpr (N == 2) memcpy(reinterpret_cast<__half2*>(p), h, 4);
  else if constexpr (N == 4) { uint2 u; memcpy(&u, h, 8); *reinterpret_cast<uint2*>(p) = u; }
  else { uint4 u; memcpy(&u, h, 16); *reinterpret_cast<uint4*>(p) = u; }
}

// P consecutive pairs (i0 .. i0 + P - 1) of a head row at `row`: where they
// lie (rope_pair) — (x0, x1) interleaved from `at` (2i, 2i+1 pairs and the
// dims past n_rot), or with `split` the x0s from `at` and the x1s from
// `at` + n_rot / 2 (NeoX).
template <int P>
struct PairSpan {
  int at = 0;
  bool split = false;
  __device__ void load(const __half* row, int half_rot, float (&x0)[P], float (&x1)[P]) const {
    if (split) {
      __half a[P], b[P];
      load_halves(row + at, a);
      load_halves(row + at + half_rot, b);
#pragma unroll
      for (int j = 0; j < P; ++j) x0[j] = __half2float(a[j]), x1[j] = __half2float(b[j]);
    } else {
      __half h[2 * P];
      load_halves(row + at, h);
#pragma unroll
      for (int j = 0; j < P; ++j) x0[j] = __half2float(h[2 * j]), x1[j] = __half2float(h[2 * j + 1]);
    }
  }
  __device__ void store(__half* row, int half_rot, const float (&x0)[P], const float (&x1)[P]) const {
    if (split) {
      __half a[P], b[P];
#pragma unroll
      for (int j = 0; j < P; ++j) a[j] = __float2half_rn(x0[j]), b[j] = __float2half_rn(x1[j]);
      store_halves(row + at, a);
      store_halves(row + at + half_rot, b);
    } else {
      __half h[2 * P];
#pragma unroll
      for (int j = 0; j < P; ++j) h[2 * j] = __float2half_rn(x0[j]), h[2 * j + 1] = __float2half_rn(x1[j]);
      store_halves(row + at, h);
    }
  }
};

// One token's group of P pairs (from pair i0) of one row: of q head or k
// head `head` (kind 0, 1), rotated in place where `rotated`, a k row's also
// stored at `slot`; or of v head `head` (kind 2), copied to `slot`. Slots
// out of range (padding) store nothing. (The tensors' pointers stay
// parameters, __restrict__ as the kernels' own, so that the compiler may
// reorder one row's loads before another's stores.)
template <int P>
__device__ __forceinline__ void rope_store_group(__half* __restrict__ q, __half* __restrict__ k,
                                                 const __half* __restrict__ v, __half* __restrict__ kc,
                                                 __half* __restrict__ vc, int n_heads, int n_kv, int hd,
                                                 int kv_stride, int64_t n_slots, int t, int64_t slot, int kind,
                                                 int head, int i0,
                                                 const PairSpan<P>& span, int half_rot, bool rotated,
                                                 const RopeAngle (&angle)[P]) {
  const bool store = slot >= 0 && slot < n_slots;
  const int kv_dim = n_kv * hd;
  if (kind == 2) {
    if (store) {
      const size_t at = size_t(head) * hd + size_t(2 * i0);
      __half h[2 * P];
      load_halves(v + size_t(t) * kv_dim + at, h);
      store_halves(vc + slot * kv_stride + at, h);
    }
    return;
  }
  __half* row = kind == 0 ? q + (size_t(t) * n_heads + head) * hd : k + size_t(t) * kv_dim + size_t(head) * hd;
  float x0[P], x1[P];
  span.load(row, half_rot, x0, x1);
  if (rotated) {
#pragma unroll
    for (int j = 0; j < P; ++j) rope_rotate(angle[j], x0[j], x1[j]);
    span.store(row, half_rot, x0, x1);
  }
  if (kind == 1 && store) span.store(kc + slot * kv_stride + size_t(head) * hd, half_rot, x0, x1);
}

// Decode steps: a thread per pair of a row (q head, k head, v head) of a
// token, each working out its own rotation.
__global__ void rope_store_kv_kernel(__half* __restrict__ q, __half* __restrict__ k, const __half* __restrict__ v,
                                     const int32_t* __restrict__ positions, const int32_t* __restrict__ slots,
                                     int n_tokens, int n_heads, int n_kv, int hd, RopeParams rope, YarnCorrDims corr,
                                     __half* __restrict__ kc, __half* __restrict__ vc, int kv_stride,
                                     int64_t n_slots, bool trigger_first) {
  constexpr int P = 1;  // pairs a thread
  const int item = blockIdx.y * blockDim.x + threadIdx.x;
  const int groups = hd / (2 * P);  // groups of P pairs a row
  const int q_items = n_heads * groups, kv_items = n_kv * groups, half_rot = rope.n_rot / 2;
  if (item >= q_items + 2 * kv_items) return;
  const int kind = item < q_items ? 0 : item < q_items + kv_items ? 1 : 2;
  const int it = item - (kind == 0 ? 0 : kind == 1 ? q_items : q_items + kv_items);
  const int head = it / groups, i0 = (it % groups) * P;  // the group's first pair within the head
  const bool rotated = kind < 2 && i0 < half_rot;
  PairSpan<P> span;
  int a = 0, b = 0;
  rope_pair(i0, rope, a, b);
  span.at = a;
  span.split = b != a + 1;
  // Before the wait: the first token's metadata (uploaded before the step's
  // kernels) and the rotations it gives.
  int t = blockIdx.x;
  int64_t slot = slots[t];
  double freq[P];
  RopeAngle angle[P];
  const float mscale = rope_mscale(rope);
#pragma unroll
  for (int j = 0; j < P; ++j) {
    freq[j] = rotated ? rope_freq(i0 + j, rope, corr) : 0.0;
    if (rotated) angle[j] = rope_angle(positions[t], freq[j], mscale);
  }
  pdl_wait_trigger(trigger_first);
  // Long prompts: each block takes every gridDim.x-th token.
  for (;;) {
    rope_store_group(q, k, v, kc, vc, n_heads, n_kv, hd, kv_stride, n_slots, t, slot, kind, head, i0, span,
                     half_rot, rotated, angle);
    t += gridDim.x;
    if (t >= n_tokens) return;
    slot = slots[t];
    if (rotated)
#pragma unroll
      for (int j = 0; j < P; ++j) angle[j] = rope_angle(positions[t], freq[j], mscale);
  }
}

// Prompts: a block per token (every gridDim.x-th), a thread per group of P
// consecutive pairs (P = 4: 16-byte loads and stores; head_dim and n_rot
// multiples of 8, so a group is all rotated or all past n_rot) and slice of
// the token's rows (q heads, k heads, v heads: every r_step-th from r0). A
// thread works out its rotations once a token for all its q and k rows (per
// pair and thread, they cost more than the bytes: one rotation per row of
// every head made this kernel slower than its ~50 MB a 2,048-token step).
template <int P>
__global__ void rope_store_kv_rows_kernel(__half* __restrict__ q, __half* __restrict__ k, const __half* __restrict__ v,
                                          const int32_t* __restrict__ positions, const int32_t* __restrict__ slots,
                                          int n_tokens, int n_heads, int n_kv, int hd, RopeParams rope,
                                          YarnCorrDims corr, __half* __restrict__ kc, __half* __restrict__ vc,
                                          int kv_stride, int64_t n_slots, bool trigger_first) {
  const int groups = hd / (2 * P), r_step = blockDim.x / groups;
  const int g = threadIdx.x % groups, r0 = threadIdx.x / groups;
  if (r0 >= r_step) return;
  const int rows = n_heads + 2 * n_kv, i0 = g * P, half_rot = rope.n_rot / 2;
  const bool rotated = i0 < half_rot;
  PairSpan<P> span;  // where the group lies in a q or k row
  int a = 0, b = 0;
  rope_pair(i0, rope, a, b);
  span.at = a;
  span.split = b != a + 1;
  double freq[P];
  const float mscale = rope_mscale(rope);
#pragma unroll
  for (int j = 0; j < P; ++j) freq[j] = rotated ? rope_freq(i0 + j, rope, corr) : 0.0;
  pdl_wait_trigger(trigger_first);
  for (int t = blockIdx.x; t < n_tokens; t += gridDim.x) {
    const int64_t slot = slots[t];
    RopeAngle angle[P];
    if (rotated)
#pragma unroll
      for (int j = 0; j < P; ++j) angle[j] = rope_angle(positions[t], freq[j], mscale);
#pragma unroll 2
    for (int r = r0; r < rows; r += r_step) {
      const int kind = r < n_heads ? 0 : r < n_heads + n_kv ? 1 : 2;
      const int head = r - (kind == 0 ? 0 : kind == 1 ? n_heads : n_heads + n_kv);
      rope_store_group(q, k, v, kc, vc, n_heads, n_kv, hd, kv_stride, n_slots, t, slot, kind, head, i0, span,
                       half_rot, rotated && kind < 2, angle);
    }
  }
}

constexpr int kFp8BlockThreads = 256;  // a row of head size 512 a block, at most
constexpr int kFp8MaxRows = kFp8BlockThreads;  // rows per block, at most (head_dim 2)

// e4m3 cache: like the f16 kernel, a thread per pair of a row (rows of
// head_dim / 2 threads, `rows` of them per block: q heads, rotated in place,
// then k heads, rotated in place and stored, then v heads, stored); a
// stored row's largest magnitude, its scale, comes from a shared-memory
// maximum (non-negative floats order as their bits; a NaN, above every
// finite value, makes the scale NaN: core/fp8.h). Every element then goes
// in as e4m3(x / scale).
__global__ void __launch_bounds__(kFp8BlockThreads)
    rope_store_kv_fp8_kernel(__half* __restrict__ q, __half* __restrict__ k, const __half* __restrict__ v,
                             const int32_t* __restrict__ positions, const int32_t* __restrict__ slots, int n_heads,
                             int n_kv, int hd, int rows, RopeParams rope, YarnCorrDims corr, uint8_t* __restrict__ kc,
                             uint8_t* __restrict__ vc, float* __restrict__ k_scale, float* __restrict__ v_scale,
                             int kv_stride, int scale_stride, int64_t n_slots) {
  __shared__ int row_max[kFp8MaxRows];
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x, half_hd = hd / 2;
  const int r = threadIdx.x / half_hd, i = threadIdx.x % half_hd;  // row of the block, pair of the row
  const int row = blockIdx.y * rows + r;
  if (threadIdx.x < rows) row_max[threadIdx.x] = 0;
  __syncthreads();
  const int64_t slot = slots[t];
  const bool store = slot >= 0 && slot < n_slots;
  const bool active = r < rows && row < n_heads + 2 * n_kv;
  const int kind = !active ? 0 : row < n_heads ? 0 : row < n_heads + n_kv ? 1 : 2;  // q, k, v
  const int head = kind == 0 ? row : kind == 1 ? row - n_heads : row - n_heads - n_kv;
  const int kv_dim = n_kv * hd;
  int a = 2 * i, b = 2 * i + 1;
  float x0 = 0.0f, x1 = 0.0f;
  if (active) {
    __half* base = kind == 0 ? q + (size_t(t) * n_heads + head) * hd : k + size_t(t) * kv_dim + size_t(head) * hd;
    const __half* src = kind == 2 ? v + size_t(t) * kv_dim + size_t(head) * hd : base;
    if (kind < 2) rope_pair(i, rope, a, b);
    x0 = __half2float(src[a]);
    x1 = __half2float(src[b]);
    if (kind < 2 && i < rope.n_rot / 2) {
      rope_rotate(rope_angle(positions[t], rope_freq(i, rope, corr), rope_mscale(rope)), x0, x1);
      base[a] = __float2half_rn(x0);
      base[b] = __float2half_rn(x1);
    }
    if (kind > 0 && store) atomicMax(&row_max[r], __float_as_int(fmaxf(fabsf(x0), fabsf(x1))) |
                                                       (isnan(x0) || isnan(x1) ? 0x7fc00000 : 0));
  }
  __syncthreads();
  if (!active || kind == 0 || !store) return;
  const float scale = e4m3_row_scale(__int_as_float(row_max[r]));
  uint8_t* dst = (kind == 1 ? kc : vc) + slot * kv_stride + size_t(head) * hd;
  dst[a] = e4m3_from_float(x0 / scale);
  dst[b] = e4m3_from_float(x1 / scale);
  if (i == 0) (kind == 1 ? k_scale : v_scale)[slot * scale_stride + head] = scale;
}

constexpr int kNormRopeThreads = 128;

// Per-head RMSNorms, then RoPE and the f16 KV store: rows of head_dim / 2
// threads (a whole number of warps), `rows` per block, a thread per pair as
// in rope_store_kv_kernel, reading q_raw / k_raw and writing q / k. A row's
// sum of squares: its warps' sums, added in order. The normed values are
// rounded to f16 before the rotation, as rms_norm_pair stores them.
__global__ void __launch_bounds__(kNormRopeThreads)
    qk_norm_rope_store_kv_kernel(const __half* __restrict__ q_raw, const float* __restrict__ wq,
                                 const __half* __restrict__ k_raw, const float* __restrict__ wk, float eps,
                                 __half* __restrict__ q, __half* __restrict__ k, const __half* __restrict__ v,
                                 const int32_t* __restrict__ positions, const int32_t* __restrict__ slots,
                                 int n_tokens, int n_heads, int n_kv, int hd, int rows, RopeParams rope,
                                 YarnCorrDims corr, __half* __restrict__ kc, __half* __restrict__ vc, int kv_stride,
                                 int64_t n_slots, bool trigger_first) {
  __shared__ float warp_ss[kNormRopeThreads / 32];
  const int half_hd = hd / 2;
  const int r = threadIdx.x / half_hd, i = threadIdx.x % half_hd;  // row of the block, pair of the row
  const int row = blockIdx.y * rows + r;
  const bool active = r < rows && row < n_heads + 2 * n_kv;
  const int kind = !active ? 0 : row < n_heads ? 0 : row < n_heads + n_kv ? 1 : 2;  // q, k, v
  const int head = kind == 0 ? row : kind == 1 ? row - n_heads : row - n_heads - n_kv;
  const bool rotated = active && kind < 2 && i < rope.n_rot / 2;
  int a = 2 * i, b = 2 * i + 1;
  if (kind < 2) rope_pair(i, rope, a, b);
  // Before the wait: the norm weights (constant) and the first token's
  // metadata (uploaded before the step's kernels) with the rotation it gives.
  float wa = 0.0f, wb = 0.0f;
  if (active && kind < 2) {
    const float* w = kind == 0 ? wq : wk;
    wa = w[a];
    wb = w[b];
  }
  int t = blockIdx.x;
  const double freq = rotated ? rope_freq(i, rope, corr) : 0.0;
  const float mscale = rope_mscale(rope);
  RopeAngle angle = rotated ? rope_angle(positions[t], freq, mscale) : RopeAngle{};
  int64_t slot = active ? slots[t] : -1;
  pdl_wait_trigger(trigger_first);
  const int kv_dim = n_kv * hd;
  const int warp = threadIdx.x / RF_WARP_SIZE, row_warps = half_hd / RF_WARP_SIZE;
  // Long prompts: each block takes every gridDim.x-th token.
  for (;;) {
    const size_t off = kind == 0 ? (size_t(t) * n_heads + head) * hd : size_t(t) * kv_dim + size_t(head) * hd;
    float x0 = 0.0f, x1 = 0.0f;
    if (active) {
      const __half* src = (kind == 0 ? q_raw : kind == 1 ? k_raw : v) + off;
      x0 = __half2float(src[a]);
      x1 = __half2float(src[b]);
    }
    const float ss = warp_sum(x0 * x0 + x1 * x1);
    if (threadIdx.x % RF_WARP_SIZE == 0) warp_ss[warp] = ss;
    __syncthreads();
    const bool store = slot >= 0 && slot < n_slots;
    if (active && kind == 2) {  // v: copied as it is
      if (store) {
        vc[slot * kv_stride + size_t(head) * hd + a] = __float2half_rn(x0);
        vc[slot * kv_stride + size_t(head) * hd + b] = __float2half_rn(x1);
      }
    } else if (active) {
      float sum = 0.0f;
      for (int w = 0; w < row_warps; ++w) sum += warp_ss[r * row_warps + w];
      const float scale = rsqrtf(sum / float(hd) + eps);
      x0 = __half2float(__float2half_rn(x0 * scale * wa));
      x1 = __half2float(__float2half_rn(x1 * scale * wb));
      if (rotated) rope_rotate(angle, x0, x1);
      __half* dst = (kind == 0 ? q : k) + off;
      dst[a] = __float2half_rn(x0);
      dst[b] = __float2half_rn(x1);
      if (kind == 1 && store) {
        kc[slot * kv_stride + size_t(head) * hd + a] = __float2half_rn(x0);
        kc[slot * kv_stride + size_t(head) * hd + b] = __float2half_rn(x1);
      }
    }
    t += gridDim.x;
    if (t >= n_tokens) return;
    __syncthreads();  // every row's sums read before the next token's
    if (active) slot = slots[t];
    if (rotated) angle = rope_angle(positions[t], freq, mscale);
  }
}

// The f16 kernels' launch (rope_store_kv; rope_q with n_kv 0): the
// per-pair kernel for decode steps, the rows kernel for long prompts.
void rope_f16(__half* q, __half* k, const __half* v, const StepMeta& m, int n_tokens, int n_heads, int n_kv, int hd,
              const RopeParams& rope, const YarnCorrDims& corr, __half* kc, __half* vc, int kv_stride,
              int64_t n_slots, const LaunchCtx& ctx) {
  const auto go = [&](auto* kernel, dim3 grid, int threads) {
    launch(kernel, grid, threads, 0, ctx, q, k, v, m.positions, m.slot_mapping, n_tokens, n_heads, n_kv, hd, rope,
           corr, kc, vc, kv_stride, n_slots, ctx.tuning.pdl_early_rope);
  };
  constexpr int kRowsPairs = 4;
  const int groups = hd / (2 * kRowsPairs);
  if (n_tokens >= kRopeRowsMinTokens && hd % 8 == 0 && rope.n_rot % 8 == 0 && groups <= kThreads) {
    go(rope_store_kv_rows_kernel<kRowsPairs>, dim3(unsigned(std::min(n_tokens, kMaxRopeTokenBlocks))),
       groups * (kThreads / groups));
  } else {
    const int items = (n_heads + 2 * n_kv) * (hd / 2);
    go(rope_store_kv_kernel,
       dim3(unsigned(std::min(n_tokens, kMaxTokenBlocks)), unsigned((items + kThreads - 1) / kThreads)), kThreads);
  }
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace

bool qk_norm_rope_fusable(int head_dim, int warp_size) {
  const int half_hd = head_dim / 2;
  return head_dim % 2 == 0 && half_hd % warp_size == 0 && half_hd <= kNormRopeThreads;
}

void qk_norm_rope_store_kv(const void* q_raw, const float* wq, const void* k_raw, const float* wk, float eps, void* q,
                           void* k, const void* v, const StepMeta& m, int n_tokens, int n_heads,
                           const RopeParams& rope, const KVLayer& cache, const LaunchCtx& ctx) {
  if (n_tokens == 0) return;
  RF_CHECK(cache.type == DType::F16 && qk_norm_rope_fusable(cache.head_dim, ctx.warp_size),
           "cuda q/k norm + rope: f16 cache and head_dim / 2 a multiple of the warp, at most ", kNormRopeThreads);
  RF_CHECK(rope.n_rot > 0 && rope.n_rot <= cache.head_dim && rope.n_rot % 2 == 0, "cuda rope: bad n_rot ",
           rope.n_rot);
  const YarnCorrDims corr = yarn_corr_dims(rope.n_rot, rope.n_ctx_orig, rope.freq_base, rope.beta_fast, rope.beta_slow);
  const int half_hd = cache.head_dim / 2, rows_per_block = kNormRopeThreads / half_hd;
  const int rows = n_heads + 2 * cache.n_kv_heads;
  const dim3 grid(unsigned(std::min(n_tokens, kMaxTokenBlocks)), unsigned((rows + rows_per_block - 1) / rows_per_block));
  launch(qk_norm_rope_store_kv_kernel, grid, dim3(unsigned(rows_per_block * half_hd)), 0, ctx,
         static_cast<const __half*>(q_raw), wq, static_cast<const __half*>(k_raw), wk, eps, static_cast<__half*>(q),
         static_cast<__half*>(k), static_cast<const __half*>(v), m.positions, m.slot_mapping, n_tokens, n_heads,
         cache.n_kv_heads, cache.head_dim, rows_per_block, rope, corr, static_cast<__half*>(cache.k),
         static_cast<__half*>(cache.v), int(cache.slot_elems()), int64_t(cache.num_blocks) * cache.block_size,
         ctx.tuning.pdl_early_rope);
  RF_GPU_CHECK_LAUNCH();
}

void rope_store_kv(void* q, void* k, const void* v, const StepMeta& m, int n_tokens, int n_heads,
                   const RopeParams& rope, const KVLayer& cache, const LaunchCtx& ctx) {
  if (n_tokens == 0) return;
  RF_CHECK(cache.type == DType::F16 || (cache.type == DType::F8_E4M3 && cache.k_scale && cache.v_scale),
           "cuda KV cache must be f16 or f8_e4m3 with row scales, not ", dtype_name(cache.type));
  RF_CHECK(rope.n_rot > 0 && rope.n_rot <= cache.head_dim && rope.n_rot % 2 == 0 && cache.head_dim % 2 == 0,
           "cuda rope: bad n_rot ", rope.n_rot);
  const YarnCorrDims corr = yarn_corr_dims(rope.n_rot, rope.n_ctx_orig, rope.freq_base, rope.beta_fast, rope.beta_slow);
  if (cache.type == DType::F8_E4M3) {
    const int half_hd = cache.head_dim / 2;
    RF_CHECK(half_hd <= kFp8BlockThreads, "cuda fp8 KV store: head_dim ", cache.head_dim, " > ",
             2 * kFp8BlockThreads);
    const int rows_per_block = kFp8BlockThreads / half_hd;
    const int rows = n_heads + 2 * cache.n_kv_heads;
    const dim3 grid(unsigned(n_tokens), unsigned((rows + rows_per_block - 1) / rows_per_block));
    launch(rope_store_kv_fp8_kernel, grid, dim3(unsigned(rows_per_block * half_hd)), 0, ctx,
           static_cast<__half*>(q), static_cast<__half*>(k), static_cast<const __half*>(v), m.positions,
           m.slot_mapping, n_heads, cache.n_kv_heads, cache.head_dim, rows_per_block, rope, corr,
           static_cast<uint8_t*>(cache.k), static_cast<uint8_t*>(cache.v), cache.k_scale, cache.v_scale,
           int(cache.slot_elems()), int(cache.slot_scales()), int64_t(cache.num_blocks) * cache.block_size);
    RF_GPU_CHECK_LAUNCH();
    return;
  }
  rope_f16(static_cast<__half*>(q), static_cast<__half*>(k), static_cast<const __half*>(v), m, n_tokens, n_heads,
           cache.n_kv_heads, cache.head_dim, rope, corr, static_cast<__half*>(cache.k), static_cast<__half*>(cache.v),
           int(cache.slot_elems()), int64_t(cache.num_blocks) * cache.block_size, ctx);
}

void rope_q(void* q, const StepMeta& m, int n_tokens, int n_heads, int head_dim, const RopeParams& rope,
            const LaunchCtx& ctx) {
  if (n_tokens == 0) return;
  RF_CHECK(rope.n_rot > 0 && rope.n_rot <= head_dim && rope.n_rot % 2 == 0 && head_dim % 2 == 0,
           "cuda rope: bad n_rot ", rope.n_rot);
  const YarnCorrDims corr = yarn_corr_dims(rope.n_rot, rope.n_ctx_orig, rope.freq_base, rope.beta_fast, rope.beta_slow);
  // The f16 kernels without KV heads: q's rows turned, nothing stored.
  rope_f16(static_cast<__half*>(q), nullptr, nullptr, m, n_tokens, n_heads, 0, head_dim, rope, corr, nullptr,
           nullptr, 0, 0, ctx);
}

}  // namespace rf::gpu
