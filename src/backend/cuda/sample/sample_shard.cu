// Vocabulary-parallel sampling on a GPU rank: the per-rank primitives of
// backend/vocab_parallel_sample.h as kernels, one block per row over the
// rank's range of the vocabulary. The host side (cuda_sample_parallel.cpp)
// runs the protocol and exchanges the per-row results between ranks.
#include "backend/cuda/sample/sample.cuh"
#include "backend/cuda/sample/sample_common.cuh"

namespace rf::gpu {
namespace {

constexpr int kThreads = 512;
constexpr double kFixedOne = 4294967296.0;  // mass_of's unit: 32.32 fixed point

__device__ double block_sum_f64(double v, double* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int s = int(blockDim.x) / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
    __syncthreads();
  }
  const double r = scratch[0];
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kThreads) prepare_kernel(const float* __restrict__ logits, int local, int first,
                                                           const SampleRowDevice* __restrict__ params,
                                                           const PenaltyToken* __restrict__ penalties,
                                                           const uint32_t* __restrict__ masks, float* __restrict__ work,
                                                           ShardPrepDevice* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  __shared__ float fscratch[32];
  __shared__ ArgMax ascratch[32];
  const int row = blockIdx.x;
  const SampleRowDevice p = params[row];
  if (plain_greedy(p)) return;  // the wide greedy kernels below summarize it
  const float* lg = logits + size_t(row) * local;
  float* w = work + size_t(row) * local;
  adjust_row(w, lg, local, first, p, penalties, masks);
  const float mx = block_max_of(lg, local, fscratch);
  const ArgMax best = block_argmax(w, local, false, ArgMax{0, 0}, ascratch);
  const float top = p.temperature > 0.0f ? scale_by_temperature(w, local, p.temperature, fscratch)
                                         : block_max_of(w, local, fscratch);
  __shared__ double dscratch[kThreads];
  double s = 0.0;
  for (int i = threadIdx.x; i < local; i += blockDim.x) s += double(__expf(lg[i] - mx));
  s = block_sum_f64(s, dscratch);
  ShardPrepDevice& o = out[row];
  if (threadIdx.x == 0) {
    o.raw_sum = s;
    o.raw_max = mx;
    o.top = top;
    o.best_v = best.v;
    o.best_raw = lg[best.i];
    o.best_i = best.i + first;
  }
  const int n_top = min(min(p.top_logprobs, kMaxTopLogprobs), local);
  ArgMax prev{0, 0};
  for (int j = 0; j < kMaxTopLogprobs; ++j) {
    if (j < n_top) prev = block_argmax(lg, local, j > 0, prev, ascratch);
    if (threadIdx.x == 0) {
      o.top_v[j] = j < n_top ? prev.v : -INFINITY;
      o.top_i[j] = j < n_top ? prev.i + first : -1;
    }
  }
}

// Plain greedy rows: greedy_chunks (sample.cu) over the shard, then one
// thread per row writes the summary (no top logprobs; work holds the chunk
// results, not the adjusted row, which only sampled rows read).
__global__ void greedy_prepare_final_kernel(const float* __restrict__ logits, int local, int first,
                                            const SampleRowDevice* __restrict__ params, const float* __restrict__ work,
                                            ShardPrepDevice* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const int row = blockIdx.x;
  if (!plain_greedy(params[row]) || threadIdx.x != 0) return;
  const RowStats r = combine_chunks(reinterpret_cast<const ChunkStats*>(work + size_t(row) * local));
  ShardPrepDevice& o = out[row];
  o.raw_sum = r.sum_exp;
  o.raw_max = r.max;
  o.top = r.best.v;  // the largest adjusted value: the best allowed raw logit
  o.best_v = r.best.v;
  const int best = r.best.i != 0x7fffffff ? r.best.i : 0;  // every token banned: id 0, as block_argmax gives
  o.best_raw = logits[size_t(row) * local + best];
  o.best_i = best + first;
  for (int j = 0; j < kMaxTopLogprobs; ++j) {
    o.top_v[j] = -INFINITY;
    o.top_i[j] = -1;
  }
}

__global__ void __launch_bounds__(kThreads) histogram_kernel(const float* __restrict__ work, int local,
                                                             const ShardRowDevice* __restrict__ in, uint32_t mask,
                                                             int shift, bool by_mass, double* __restrict__ hist) {
  pdl_wait();
  pdl_trigger();
  __shared__ unsigned long long h[256];
  const int row = blockIdx.x;
  const ShardRowDevice r = in[row];
  if (!r.want) return;
  const float* w = work + size_t(row) * local;
  for (int b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < local; i += blockDim.x) {
    const uint32_t k = order_key(w[i]);
    if (k < r.floor || (k & mask) != r.prefix) continue;
    atomicAdd(&h[(k >> shift) & 255u], by_mass ? (unsigned long long)mass_of(w[i], r.top) : 1ull);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x)
    hist[size_t(row) * 256 + b] = by_mass ? double(h[b]) / kFixedOne : double(h[b]);
}

__global__ void __launch_bounds__(kThreads) kept_mass_kernel(const float* __restrict__ work, int local,
                                                             const ShardRowDevice* __restrict__ in,
                                                             double* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  __shared__ unsigned long long total;
  const int row = blockIdx.x;
  const ShardRowDevice r = in[row];
  if (!r.want) return;
  const float* w = work + size_t(row) * local;
  if (threadIdx.x == 0) total = 0;
  __syncthreads();
  unsigned long long mine = 0;
  for (int i = threadIdx.x; i < local; i += blockDim.x)
    if (order_key(w[i]) >= r.floor) mine += mass_of(w[i], r.top);
  atomicAdd(&total, mine);
  __syncthreads();
  if (threadIdx.x == 0) out[row] = double(total) / kFixedOne;
}

__global__ void __launch_bounds__(kThreads) pick_kernel(const float* __restrict__ logits,
                                                        const float* __restrict__ work, int local, int first,
                                                        const ShardRowDevice* __restrict__ in,
                                                        ShardPickDevice* __restrict__ picks) {
  pdl_wait();
  pdl_trigger();
  __shared__ unsigned long long scan[kThreads];
  __shared__ int chosen, last;
  const int row = blockIdx.x;
  const ShardRowDevice r = in[row];
  if (!r.want) return;
  const float* w = work + size_t(row) * local;
  // Each thread owns a contiguous range of ids; masses scanned in id order.
  const int chunk = (local + blockDim.x - 1) / blockDim.x;
  const int begin = min(local, int(threadIdx.x) * chunk), end = min(local, begin + chunk);
  unsigned long long mine = 0;
  int my_last = -1;
  for (int i = begin; i < end; ++i)
    if (order_key(w[i]) >= r.floor) {
      mine += mass_of(w[i], r.top);
      my_last = i;
    }
  scan[threadIdx.x] = mine;
  if (threadIdx.x == 0) chosen = -1, last = -1;
  __syncthreads();
  block_inclusive_scan(scan);
  atomicMax(&last, my_last);
  if (r.owner && r.u >= r.before) {
    // u's place within this rank's share, in fixed point.
    const unsigned long long target = (unsigned long long)((r.u - r.before) * kFixedOne);
    const unsigned long long before_me = scan[threadIdx.x] - mine;
    if (target >= before_me && target < scan[threadIdx.x]) {
      unsigned long long cum = before_me;
      for (int i = begin; i < end; ++i) {
        if (order_key(w[i]) < r.floor) continue;
        cum += mass_of(w[i], r.top);
        if (target < cum) {
          chosen = i;
          break;
        }
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const float* lg = logits + size_t(row) * local;
    const int pick = chosen >= 0 ? chosen : (r.owner ? last : -1);
    picks[2 * row] = pick >= 0 ? ShardPickDevice{lg[pick], pick + first} : ShardPickDevice{-INFINITY, -1};
    picks[2 * row + 1] = last >= 0 ? ShardPickDevice{lg[last], last + first} : ShardPickDevice{-INFINITY, -1};
  }
}

}  // namespace

void shard_prepare(const float* logits, int rows, int local, int first, const SampleRowDevice* params,
                   const PenaltyToken* penalties, const uint32_t* masks, float* work, ShardPrepDevice* out,
                   const LaunchCtx& ctx) {
  if (rows == 0) return;
  launch(prepare_kernel, rows, kThreads, 0, ctx, logits, local, first, params, penalties, masks, work, out);
  greedy_chunks(logits, rows, local, first, params, masks, work, ctx);
  launch(greedy_prepare_final_kernel, rows, 32, 0, ctx, logits, local, first, params, work, out);
  RF_GPU_CHECK_LAUNCH();
}

void shard_histogram(const float* work, int rows, int local, const ShardRowDevice* in, uint32_t mask, int shift,
                     bool by_mass, double* hist, const LaunchCtx& ctx) {
  if (rows == 0) return;
  launch(histogram_kernel, rows, kThreads, 0, ctx, work, local, in, mask, shift, by_mass, hist);
  RF_GPU_CHECK_LAUNCH();
}

void shard_kept_mass(const float* work, int rows, int local, const ShardRowDevice* in, double* out,
                     const LaunchCtx& ctx) {
  if (rows == 0) return;
  launch(kept_mass_kernel, rows, kThreads, 0, ctx, work, local, in, out);
  RF_GPU_CHECK_LAUNCH();
}

void shard_pick(const float* logits, const float* work, int rows, int local, int first, const ShardRowDevice* in,
                ShardPickDevice* picks, const LaunchCtx& ctx) {
  if (rows == 0) return;
  launch(pick_kernel, rows, kThreads, 0, ctx, logits, work, local, first, in, picks);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
