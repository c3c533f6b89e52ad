// Device helpers shared by the sampling kernels (sample.cu: one GPU's
// whole vocabulary; sample_shard.cu: a tensor-parallel rank's range of it):
// the order-preserving float key, fixed-point masses, block argmax, and the
// per-row logit adjustments.
#pragma once

#include "backend/cuda/kernels.h"

namespace rf::gpu {

__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ uint64_t mass_of(float x, float top) {
  return uint64_t(__expf(x - top) * 4294967296.0f);
}

struct ArgMax {
  float v;
  int i;
};
__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}

// Block-wide argmax over x, skipping entries not strictly "after" `prev` in
// the order (value desc, id asc) when `exclude` is set.
__device__ inline ArgMax block_argmax(const float* x, int n, bool exclude, ArgMax prev, ArgMax* scratch) {
  ArgMax best{-INFINITY, 0x7fffffff};
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[i];
    if (exclude && (v > prev.v || (v == prev.v && i <= prev.i))) continue;
    best = better(best, ArgMax{v, i});
  }
  HwLanes lanes;
  wave::argmax<RF_WARP_SIZE>(best.v, best.i, lanes);  // better() over the warp
  const int lane = threadIdx.x % RF_WARP_SIZE, warp = threadIdx.x / RF_WARP_SIZE;
  __syncthreads();
  if (lane == 0) scratch[warp] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x / RF_WARP_SIZE); ++w) best = better(best, scratch[w]);
    scratch[0] = best;
  }
  __syncthreads();
  best = scratch[0];
  __syncthreads();
  return best;
}

// The largest of x[0, n), to every thread of the block.
__device__ inline float block_max_of(const float* x, int n, float* scratch) {
  float m = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, x[i]);
  return block_max(m, scratch);
}

// x[0, n) /= temperature, then the largest of them, to every thread.
__device__ inline float scale_by_temperature(float* x, int n, float temperature, float* scratch) {
  const float inv_t = 1.0f / temperature;
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= inv_t;
  __syncthreads();
  return block_max_of(x, n, scratch);
}

// scan[t] = scan[0] + ... + scan[t] for the block's threads t (each has set
// its entry and the block has synchronized).
__device__ inline void block_inclusive_scan(unsigned long long* scan) {
  for (int off = 1; off < int(blockDim.x); off <<= 1) {
    const unsigned long long add = threadIdx.x >= unsigned(off) ? scan[threadIdx.x - off] : 0ull;
    __syncthreads();
    scan[threadIdx.x] += add;
    __syncthreads();
  }
}

// w[0, n) = lg[0, n), then the row's biases, penalties and bans (one pass
// each: a token may have an entry in each) and its allowed-token mask, for
// token ids [first, first + n): entries of other ids are skipped.
__device__ inline void adjust_row(float* w, const float* lg, int n, int first, const SampleRowDevice& p,
                                  const PenaltyToken* penalties, const uint32_t* masks) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) w[i] = lg[i];
  __syncthreads();
  const PenaltyToken* pen = penalties + p.penalty_offset;
  auto local = [&](int token) { return token - first; };
  for (int e = threadIdx.x; e < p.penalty_count; e += blockDim.x) {
    const int t = local(pen[e].token);
    if (!pen[e].banned && pen[e].bias != 0.0f && t >= 0 && t < n) w[t] += pen[e].bias;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < p.penalty_count; e += blockDim.x) {
    const PenaltyToken tok = pen[e];
    const int t = local(tok.token);
    if (!tok.penalized() || t < 0 || t >= n) continue;
    float l = w[t];
    if (tok.in_context && p.repetition_penalty != 1.0f) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    if (tok.output_count > 0) l -= p.presence_penalty + p.frequency_penalty * float(tok.output_count);
    w[t] = l;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < p.penalty_count; e += blockDim.x) {
    const int t = local(pen[e].token);
    if (pen[e].banned && t >= 0 && t < n) w[t] = -INFINITY;
  }
  if (p.mask_offset >= 0) {  // structured output: only the allowed tokens (bits by global id)
    const uint32_t* m = masks + p.mask_offset;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const int id = first + i;
      if (!((m[id >> 5] >> (id & 31)) & 1u)) w[i] = -INFINITY;
    }
  }
  __syncthreads();
}

}  // namespace rf::gpu
