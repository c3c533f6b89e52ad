// The causal depthwise conv1d of Gated DeltaNet layers with SiLU, over each
// sequence's cached inputs (the state row's conv part) and its new tokens,
// updating the cache. A thread per (sequence, channel, chunk of kChunk
// tokens): a token's output needs only the K - 1 inputs before it, so the
// chunks run in parallel; chunk 0's thread alone reads the old cached
// inputs (later chunks start past them) and writes the new ones after
// reading, so no thread reads what another writes.
#include "backend/cuda/deltanet/deltanet.cuh"
#include "core/error.h"

namespace rf::gpu {
namespace {

constexpr int kThreads = 128;
constexpr int kChunk = 16;  // tokens per thread
static_assert(kChunk >= kMaxConvKernel - 1, "a later chunk must start past the cached inputs");

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

template <int K>
__global__ void __launch_bounds__(kThreads) conv1d_silu_kernel(const __half* __restrict__ x,
                                                               const float* __restrict__ w, RecurrentSeqs seqs,
                                                               float* __restrict__ conv, int64_t row_stride,
                                                               int n_rows, int C, __half* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const int c = int(blockIdx.x) * kThreads + int(threadIdx.x), s = int(blockIdx.z);
  if (c >= C) return;
  const int first = seqs.seq_starts[s], n = seqs.seq_starts[s + 1] - first;
  if (n <= 0) return;
  const int pos0 = seqs.positions[first], row = seqs.state_slots[s];
  if (pos0 < 0 || row < 0 || row >= n_rows) return;  // padding (the host validated real rows)
  const int t0 = int(blockIdx.y) * kChunk;
  if (t0 >= n) return;
  const int t1 = min(n, t0 + kChunk);
  float* state = conv + int64_t(row) * row_stride;  // [K - 1, C]: oldest first
  // Input of the sequence's relative position j (negative: cached, zero
  // before position 0).
  auto input = [&](int j) -> float {
    if (j >= 0) return __half2float(x[int64_t(first + j) * C + c]);
    return pos0 > 0 ? state[int64_t(j + K - 1) * C + c] : 0.0f;
  };
  float wk[K], win[K];
#pragma unroll
  for (int k = 0; k < K; ++k) wk[k] = w[int64_t(c) * K + k];
#pragma unroll
  for (int p = 0; p < K - 1; ++p) win[p] = input(t0 - (K - 1) + p);
  for (int t = t0; t < t1; ++t) {
    win[K - 1] = __half2float(x[int64_t(first + t) * C + c]);
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) acc = fmaf(wk[k], win[k], acc);
    out[int64_t(first + t) * C + c] = __float2half_rn(silu(acc));
#pragma unroll
    for (int k = 0; k < K - 1; ++k) win[k] = win[k + 1];
  }
  if (blockIdx.y != 0) return;
  float last[K - 1];
#pragma unroll
  for (int p = 0; p < K - 1; ++p) last[p] = input(n - (K - 1) + p);
#pragma unroll
  for (int p = 0; p < K - 1; ++p) state[int64_t(p) * C + c] = last[p];
}

template <int K>
void launch_conv(const void* x, const float* w, const RecurrentSeqs& seqs, const RecurrentLayer& st, void* out,
                 const LaunchCtx& ctx) {
  const dim3 grid(unsigned((st.conv_channels + kThreads - 1) / kThreads),
                  unsigned((seqs.max_new_tokens + kChunk - 1) / kChunk), unsigned(seqs.n_seqs));
  launch(conv1d_silu_kernel<K>, grid, kThreads, 0, ctx, static_cast<const __half*>(x), w, seqs, st.conv,
         st.row_stride, st.n_rows, st.conv_channels, static_cast<__half*>(out));
}

}  // namespace

void conv1d_silu_state(const void* x, const float* w, const RecurrentSeqs& seqs, const RecurrentLayer& st, void* out,
                       const LaunchCtx& ctx) {
  if (seqs.n_seqs == 0 || seqs.max_new_tokens <= 0) return;
  switch (st.conv_kernel) {
    case 2: return launch_conv<2>(x, w, seqs, st, out, ctx);
    case 3: return launch_conv<3>(x, w, seqs, st, out, ctx);
    case 4: return launch_conv<4>(x, w, seqs, st, out, ctx);
    case 5: return launch_conv<5>(x, w, seqs, st, out, ctx);
    case 6: return launch_conv<6>(x, w, seqs, st, out, ctx);
    case 7: return launch_conv<7>(x, w, seqs, st, out, ctx);
    case 8: return launch_conv<8>(x, w, seqs, st, out, ctx);
    default: RF_CHECK(false, "cuda conv1d_silu_state: conv kernel of ", st.conv_kernel, " taps (2 to ",
                      kMaxConvKernel, " supported)");
  }
}

}  // namespace rf::gpu
