// GPU sampling, one block per row, following the CPU reference's rules
// (backend/cpu/cpu_sample.cpp): penalties, greedy argmax, or temperature and
// threshold sets for top-k / top-p / min-p found by exact radix selection
// over the float bits, then an inverse-CDF draw in token-id order. Masses
// are summed in 32.32 fixed point, so results do not depend on thread
// timing. Raw log-probabilities (and top alternatives) come from the
// unpenalized logits.
#include "backend/cuda/sample/sample.cuh"
#include "backend/cuda/sample/sample_common.cuh"
#include "core/rng.h"

namespace rf::gpu {
namespace {

constexpr int kThreads = 1024;

// The largest key K such that the weight of elements with key >= K (among
// those with key >= floor) reaches `target`. Weight: 1 per element, or its
// fixed-point mass.
__device__ uint32_t radix_select(const float* x, int n, uint32_t floor, uint64_t target, bool by_mass, float top,
                                 unsigned long long* hist, uint32_t* shared_bin, unsigned long long* shared_rem) {
  uint32_t prefix = 0, mask = 0;
  if (threadIdx.x == 0) *shared_rem = target;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const uint32_t k = order_key(x[i]);
      if (k < floor || (k & mask) != prefix) continue;
      atomicAdd(&hist[(k >> shift) & 255u], by_mass ? (unsigned long long)mass_of(x[i], top) : 1ull);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long rem = *shared_rem, cum = 0;
      int chosen = 0;
      for (int b = 255; b >= 0; --b) {
        if (cum + hist[b] >= rem) {
          chosen = b;
          break;
        }
        cum += hist[b];
      }
      *shared_bin = uint32_t(chosen);
      *shared_rem = rem > cum ? rem - cum : 0;
    }
    __syncthreads();
    prefix |= *shared_bin << shift;
    mask |= 255u << shift;
  }
  return prefix > floor ? prefix : floor;
}

// Plain greedy rows: the wide path of sample_common.cuh (greedy_chunk,
// combine_chunks).
__global__ void greedy_final_kernel(const float* __restrict__ logits, int vocab,
                                    const SampleRowDevice* __restrict__ params, const float* __restrict__ work,
                                    SampleOutDevice* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const int row = blockIdx.x;
  if (!plain_greedy(params[row]) || threadIdx.x != 0) return;
  const RowStats r = combine_chunks(reinterpret_cast<const ChunkStats*>(work + size_t(row) * vocab));
  out[row].token = r.best.i;
  out[row].logprob = logits[size_t(row) * vocab + r.best.i] - (r.max + logf(float(r.sum_exp)));
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* __restrict__ logits, int vocab,
                                                          const SampleRowDevice* __restrict__ params,
                                                          const PenaltyToken* __restrict__ penalties,
                                                          const uint32_t* __restrict__ masks,
                                                          float* __restrict__ work, SampleOutDevice* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  __shared__ float fscratch[32];
  __shared__ ArgMax ascratch[32];
  __shared__ unsigned long long hist[256];
  __shared__ unsigned long long scan[kThreads];
  __shared__ uint32_t shared_bin;
  __shared__ unsigned long long shared_rem;
  __shared__ int chosen_shared;

  const int row = blockIdx.x;
  const SampleRowDevice p = params[row];
  if (plain_greedy(p)) return;  // the wide greedy kernels handle it
  const float* lg = logits + size_t(row) * vocab;
  float* w = work + size_t(row) * vocab;

  adjust_row(w, lg, vocab, 0, p, penalties, masks);

  // Raw log-normalizer.
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) mx = fmaxf(mx, lg[i]);
  mx = block_max(mx, fscratch);
  float se = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) se += __expf(lg[i] - mx);
  se = block_sum(se, fscratch);
  const float log_z = mx + logf(se);

  int chosen;
  if (p.temperature <= 0.0f) {
    chosen = block_argmax(w, vocab, false, ArgMax{0, 0}, ascratch).i;
  } else {
    const float top = scale_by_temperature(w, vocab, p.temperature, fscratch);
    uint32_t floor = 0;
    if (p.top_k > 0 && p.top_k < vocab)
      floor = radix_select(w, vocab, 0, uint64_t(p.top_k), false, top, hist, &shared_bin, &shared_rem);
    if (p.top_p < 1.0f) {
      unsigned long long local = 0;
      for (int i = threadIdx.x; i < vocab; i += blockDim.x)
        if (order_key(w[i]) >= floor) local += mass_of(w[i], top);
      scan[threadIdx.x] = local;
      __syncthreads();
      if (threadIdx.x == 0) {
        unsigned long long total = 0;
        for (int t = 0; t < int(blockDim.x); ++t) total += scan[t];
        shared_rem = (unsigned long long)(double(p.top_p) * double(total));
      }
      __syncthreads();
      const uint64_t target = shared_rem > 0 ? shared_rem : 1;
      __syncthreads();
      floor = radix_select(w, vocab, floor, target, true, top, hist, &shared_bin, &shared_rem);
    }
    if (p.min_p > 0.0f) {
      const uint32_t k = order_key(top + logf(p.min_p));
      floor = floor > k ? floor : k;
    }
    // Inverse CDF in id order: each thread owns a contiguous range of ids.
    const int chunk = (vocab + blockDim.x - 1) / blockDim.x;
    const int begin = min(vocab, int(threadIdx.x) * chunk), end = min(vocab, begin + chunk);
    unsigned long long local = 0;
    for (int i = begin; i < end; ++i)
      if (order_key(w[i]) >= floor) local += mass_of(w[i], top);
    scan[threadIdx.x] = local;
    __syncthreads();
    block_inclusive_scan(scan);
    const unsigned long long total = scan[blockDim.x - 1];
    const unsigned long long u = (unsigned long long)(double(uniform01(p.seed, p.counter)) * double(total));
    if (threadIdx.x == 0) chosen_shared = -1;
    __syncthreads();
    const unsigned long long before = scan[threadIdx.x] - local;
    if (total > 0 && u >= before && u < scan[threadIdx.x]) {
      unsigned long long cum = before;
      for (int i = begin; i < end; ++i) {
        if (order_key(w[i]) < floor) continue;
        cum += mass_of(w[i], top);
        if (u < cum) {
          chosen_shared = i;
          break;
        }
      }
    }
    __syncthreads();
    chosen = chosen_shared;
    if (chosen < 0) chosen = block_argmax(w, vocab, false, ArgMax{0, 0}, ascratch).i;
  }

  if (threadIdx.x == 0) {
    out[row].token = chosen;
    out[row].logprob = lg[chosen] - log_z;
  }
  // Top alternatives by raw logit.
  ArgMax prev{0, 0};
  const int n_top = min(p.top_logprobs, kMaxTopLogprobs);
  for (int j = 0; j < n_top; ++j) {
    prev = block_argmax(lg, vocab, j > 0, prev, ascratch);
    if (threadIdx.x == 0) {
      out[row].top_ids[j] = prev.i;
      out[row].top_logprobs[j] = prev.v - log_z;
    }
  }
}

__global__ void __launch_bounds__(256) greedy_partial_kernel(const float* __restrict__ logits, int n, int first,
                                                              const SampleRowDevice* __restrict__ params,
                                                              const uint32_t* __restrict__ masks,
                                                              float* __restrict__ work) {
  pdl_wait();
  pdl_trigger();
  __shared__ float fscratch[32];
  __shared__ ArgMax ascratch[32];
  const int row = blockIdx.x, split = blockIdx.y;
  const SampleRowDevice& p = params[row];
  if (!plain_greedy(p)) return;
  const ChunkStats c = greedy_chunk(logits + size_t(row) * n, n, split, first,
                                    p.mask_offset >= 0 ? masks + p.mask_offset : nullptr, fscratch, ascratch);
  if (threadIdx.x == 0) reinterpret_cast<ChunkStats*>(work + size_t(row) * n)[split] = c;
}

}  // namespace

void greedy_chunks(const float* logits, int rows, int n, int first, const SampleRowDevice* params,
                   const uint32_t* masks, float* work, const LaunchCtx& ctx) {
  RF_CHECK(size_t(n) * sizeof(float) >= kGreedySplits * sizeof(ChunkStats), "cuda sample: ", n,
           " logits a row are too few for the greedy chunks");
  launch(greedy_partial_kernel, dim3(unsigned(rows), kGreedySplits), 256, 0, ctx, logits, n, first, params, masks,
         work);
  RF_GPU_CHECK_LAUNCH();
}

void sample(const float* logits, int rows, int vocab, const SampleRowDevice* params, const PenaltyToken* penalties,
            const uint32_t* masks, float* work, SampleOutDevice* out, const LaunchCtx& ctx) {
  if (rows == 0) return;
  greedy_chunks(logits, rows, vocab, 0, params, masks, work, ctx);
  launch(greedy_final_kernel, rows, 32, 0, ctx, logits, vocab, params, work, out);
  RF_GPU_CHECK_LAUNCH();
  launch(sample_kernel, rows, kThreads, 0, ctx, logits, vocab, params, penalties, masks, work, out);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
