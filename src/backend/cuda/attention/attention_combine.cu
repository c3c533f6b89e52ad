// The sum of decode attention's split-K slices by a kernel of its own
// (attention_combine_kernel and its launcher), where the slices' blocks do
// not sum them as one thread-block cluster (attention_decode.cu): each
// (token, head) weighs its splits by their softmax statistics and sums
// their partial outputs in split order, the head's sink logit (if any) in
// the softmax's denominator (softmax_sink.h). For one token it may also write the
// output row's 8-bit quants for the GEMV after it (Fusions::act_q8).
#include <algorithm>

#include "backend/cuda/attention/attention_args.cuh"

namespace rf::gpu {
namespace {

// ---- summing the splits ----------------------------------------------------

__host__ __device__ constexpr int combine_weight_floats(int n_splits) { return (n_splits + 7) / 8 * 8 + 8; }

// Sums the splits of one (partial row `row`, head h) into token t's output,
// every thread of the block (tid < n) calling it (a barrier inside). The
// first warp weighs the splits (each lane its own: max, exp, the softmax sum by shuffles) into
// `weight` (shared, combine_weight_floats(n_splits) floats); then each
// thread sums its dims over the splits with those weights, the loads
// independent of one another (each thread walking every split's
// statistics in turn would keep its loads in one chain). The weights are
// padded with zeros to a multiple of 8 and 8 more: the unrolled sum's loads
// may be merged into 16-byte reads past the last split.
//
// With xq (one token, hd a multiple of 32, whole warps on dims): the
// output row's 8-bit quants and scales too (act_q8's layout;
// Fusions::act_q8), for the quantized GEMV after it.
__device__ __forceinline__ void combine_splits(const float* part_out, const float* part_ml, bool valid_pos,
                                               float sink, int n_heads, int hd, int n_splits, int row, int t, int h,
                                               __half* out, int8_t* xq, float2* xds, float* weight, int tid, int n) {
  const size_t base = (size_t(row) * n_heads + h) * n_splits;
  if (tid < RF_WARP_SIZE) {
    const int lane = tid;
    float mx = -INFINITY;
    for (int s = lane; s < n_splits; s += RF_WARP_SIZE) mx = fmaxf(mx, part_ml[(base + s) * 2]);
    mx = sink_max(warp_max(mx), sink);
    float denom = 0.0f;
    for (int s = lane; s < n_splits; s += RF_WARP_SIZE) {
      const float ms = part_ml[(base + s) * 2];
      const float e = ms > -INFINITY ? __expf(ms - mx) : 0.0f;
      weight[s] = e;
      denom += e * part_ml[(base + s) * 2 + 1];
    }
    denom = warp_sum(denom) + sink_term(sink, mx);
    const bool valid = valid_pos && denom > 0.0f;
    for (int s = lane; s < n_splits; s += RF_WARP_SIZE) weight[s] = valid ? weight[s] / denom : 0.0f;
    for (int s = n_splits + lane; s < combine_weight_floats(n_splits); s += RF_WARP_SIZE) weight[s] = 0.0f;
  }
  __syncthreads();
  for (int d = tid; d < hd; d += n) {
    float v = 0.0f;
#pragma unroll 8
    for (int s = 0; s < n_splits; ++s)
      if (weight[s] != 0.0f) v += weight[s] * part_out[(base + s) * hd + d];
    const __half hv = __float2half_rn(v);
    out[(size_t(t) * n_heads + h) * hd + d] = hv;
    if (xq) quantize32_q8(__half2float(hv), h * hd + d, xq, xds);
  }
}

// Combines the splits of one (token, head) (combine_splits): one block of
// hd threads or more (with xq: exactly hd).
__global__ void attention_combine_kernel(const float* __restrict__ part_out, const float* __restrict__ part_ml,
                                         const int32_t* __restrict__ positions, const int32_t* __restrict__ tokens,
                                         const float* __restrict__ sinks, int n_heads, int hd, int n_splits,
                                         __half* __restrict__ out, int8_t* __restrict__ xq,
                                         float2* __restrict__ xds) {
  extern __shared__ float weight[];  // [combine_weight_floats(n_splits)]
  pdl_wait();
  pdl_trigger();
  const int row = blockIdx.x, t = tokens ? tokens[row] : row, h = blockIdx.y;
  combine_splits(part_out, part_ml, positions[t] >= 0, sink_logit(sinks, h), n_heads, hd, n_splits, row, t, h, out, xq, xds, weight,
                        int(threadIdx.x), int(blockDim.x));
}

}  // namespace

void launch_attention_combine(const AttentionScratch& scratch, const int32_t* positions, const int32_t* tokens,
                              const float* sinks, int n_rows, int n_heads, int head_dim, int n_splits, void* out,
                              const LaunchCtx& ctx) {
  const int threads = std::min(256, std::max(RF_WARP_SIZE, head_dim));
  // One token whose GEMV reads 8-bit quants: the combine writes them (a
  // thread per dim, whole 32-lane groups).
  const bool q8 = !tokens && n_rows == 1 && head_dim % 32 == 0 && threads == head_dim &&
                  act_q8_fusable(ctx, 1, n_heads * head_dim);
  launch(attention_combine_kernel, dim3(unsigned(n_rows), unsigned(n_heads)), dim3(unsigned(threads)),
         size_t(combine_weight_floats(n_splits)) * sizeof(float), ctx, scratch.partial_out, scratch.partial_ml,
         positions, tokens, sinks, n_heads, head_dim, n_splits, static_cast<__half*>(out),
         q8 ? act_q8_quants(ctx.act_q8) : nullptr, q8 ? act_q8_scales(ctx.act_q8) : nullptr);
  if (q8) act_q8_record(ctx, out, n_heads * head_dim);
}

}  // namespace rf::gpu
