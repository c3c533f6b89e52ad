// Device helpers shared by the sampling kernels (sample.cu: one GPU's
// whole vocabulary; sample_shard.cu: a tensor-parallel rank's range of it):
// the order-preserving float key, fixed-point masses, block argmax, and the
// per-row logit adjustments.
#pragma once

#include "backend/cuda/sample/sample.cuh"

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

// Plain greedy rows (temperature 0, no penalties, no alternatives; an
// allowed-token mask is fine: the argmax skips masked tokens) take a wide
// path in both samplers: kGreedySplits blocks per row reduce chunks of the
// row (greedy_chunk), one thread combines them (combine_chunks). Chunk
// results live in the row's own slice of the work buffer.
constexpr int kGreedySplits = 32;
struct ChunkStats {
  float max, sum_exp, best_v;  // raw maximum, sum of exp(raw - max), best allowed value
  int best_i;                  // its index in the row (0x7fffffff: none allowed)
};

__device__ __forceinline__ bool plain_greedy(const SampleRowDevice& p) {
  return p.temperature <= 0.0f && p.penalty_count == 0 && p.top_logprobs == 0;
}

// This block's chunk `split` of the n logits of a row (lg); mask: the
// allowed-token bits by global id (first + index), or null. To thread 0.
__device__ inline ChunkStats greedy_chunk(const float* lg, int n, int split, int first, const uint32_t* mask,
                                          float* fscratch, ArgMax* ascratch) {
  const int chunk = (n + kGreedySplits - 1) / kGreedySplits;
  const int begin = min(n, split * chunk), end = min(n, begin + chunk);
  float mx = -INFINITY;
  ArgMax best{-INFINITY, 0x7fffffff};
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float v = lg[i];
    mx = fmaxf(mx, v);  // the normalizer is the raw distribution's
    const int id = first + i;
    if (!mask || ((mask[id >> 5] >> (id & 31)) & 1u)) best = better(best, ArgMax{v, i});
  }
  mx = block_max(mx, fscratch);
  float se = 0.0f;
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) se += __expf(lg[i] - mx);
  se = block_sum(se, fscratch);
  HwLanes lanes;
  wave::argmax<RF_WARP_SIZE>(best.v, best.i, lanes);  // better() over the warp
  const int lane = threadIdx.x % RF_WARP_SIZE, warp = threadIdx.x / RF_WARP_SIZE;
  if (lane == 0) ascratch[warp] = best;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < int(blockDim.x / RF_WARP_SIZE); ++w) best = better(best, ascratch[w]);
  return ChunkStats{mx, se, best.v, best.i};
}

// The row's raw maximum, sum of exp(raw - maximum) and best allowed entry
// from its kGreedySplits chunks.
struct RowStats {
  float max;
  double sum_exp;
  ArgMax best;
};
__device__ inline RowStats combine_chunks(const ChunkStats* c) {
  RowStats r{-INFINITY, 0.0, ArgMax{-INFINITY, 0x7fffffff}};
  for (int s = 0; s < kGreedySplits; ++s) {
    r.max = fmaxf(r.max, c[s].max);
    if (c[s].best_i != 0x7fffffff) r.best = better(r.best, ArgMax{c[s].best_v, c[s].best_i});
  }
  for (int s = 0; s < kGreedySplits; ++s)
    if (c[s].max > -INFINITY) r.sum_exp += double(c[s].sum_exp) * double(__expf(c[s].max - r.max));
  return r;
}

}  // namespace rf::gpu
