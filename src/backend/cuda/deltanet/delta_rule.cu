// The gated delta rule of Gated DeltaNet layers (backend.h
// gated_delta_net), token by token over each sequence's state: a block per
// (sequence, value head, kRows rows of S^T), each warp owning kRowsPerWarp
// rows (value components j), each lane kPer key components of a row. A
// row's update needs only the token's q, k, v_j, decay and beta:
//   S_j <- e^g S_j;  d = b (v_j - S_j . k);  S_j <- S_j + d k;  o_j = S_j . q
// so rows are independent: the rows stay in registers across the step's
// tokens (read once before the first, written once after the last), and
// one butterfly per row and token gives both S_j . k and S_j . q (o_j =
// e^g (S_j . q) + d (k . q), with S_j before the token's update). q and k
// are L2-normalised by each warp for itself (the same sums in every warp).
// Decode is the one-token case of the same loop; in a prefill, each
// token's inputs load while the token before it computes.
#include "backend/cuda/deltanet/deltanet.cuh"
#include "core/error.h"

namespace rf::gpu {
namespace {

constexpr int kWarps = 4, kRowsPerWarp = 4, kRows = kWarps * kRowsPerWarp;

struct DeltaDims {
  int C, Hk, Hv, dk, dv, n_rows;
  int64_t row_stride;
  float q_scale, l2_eps;
};

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// One token's inputs to a warp: its lanes' q and k components (raw), the
// value components of the warp's rows, alpha and beta of head h.
template <int kPer>
struct TokenIn {
  float q[kPer], k[kPer], v[kRowsPerWarp], alpha, beta;
  __device__ __forceinline__ void load(const __half* __restrict__ qkv, const float* __restrict__ alpha_in,
                                       const float* __restrict__ beta_in, int t, int lane, int h, int kh, int j0,
                                       const DeltaDims& d) {
    const __half* x = qkv + int64_t(t) * d.C;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int i = lane + e * RF_WARP_SIZE;
      q[e] = i < d.dk ? __half2float(x[kh * d.dk + i]) : 0.0f;
      k[e] = i < d.dk ? __half2float(x[(d.Hk + kh) * d.dk + i]) : 0.0f;
    }
    const __half* vr = x + 2 * d.Hk * d.dk + h * d.dv;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) v[r] = j0 + r < d.dv ? __half2float(vr[j0 + r]) : 0.0f;
    alpha = alpha_in[int64_t(t) * d.Hv + h];
    beta = beta_in[int64_t(t) * d.Hv + h];
  }
};

template <int kPer>
__global__ void __launch_bounds__(kWarps * RF_WARP_SIZE)
    delta_rule_kernel(const __half* __restrict__ qkv, const float* __restrict__ alpha,
                      const float* __restrict__ beta, const float* __restrict__ dt_bias,
                      const float* __restrict__ a, RecurrentSeqs seqs, DeltaDims d, float* __restrict__ ssm,
                      float* __restrict__ out) {
  constexpr int W = RF_WARP_SIZE;
  pdl_wait();
  pdl_trigger();
  const int lane = int(threadIdx.x) % W, warp = int(threadIdx.x) / W;
  const int s = int(blockIdx.z), h = int(blockIdx.y), kh = h % d.Hk;
  const int j0 = int(blockIdx.x) * kRows + warp * kRowsPerWarp;
  if (j0 >= d.dv) return;  // (the warp as a whole; nothing below syncs the block)
  const int first = seqs.seq_starts[s], n = seqs.seq_starts[s + 1] - first;
  if (n <= 0) return;
  const int pos0 = seqs.positions[first], row = seqs.state_slots[s];
  if (pos0 < 0 || row < 0 || row >= d.n_rows) return;  // padding (the host validated real rows)
  float* S = ssm + int64_t(row) * d.row_stride + int64_t(h) * d.dv * d.dk;  // [dv][dk]: S^T
  float st[kRowsPerWarp][kPer];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int j = j0 + r, i = lane + e * W;
      st[r][e] = pos0 > 0 && j < d.dv && i < d.dk ? S[int64_t(j) * d.dk + i] : 0.0f;
    }
  const float dtb = dt_bias[h], ah = a[h];
  const int64_t out_cols = int64_t(d.Hv) * d.dv;
  // Each token's inputs are loaded while the token before it computes.
  TokenIn<kPer> next;
  next.load(qkv, alpha, beta, first, lane, h, kh, j0, d);
  for (int t = first; t < first + n; ++t) {
    TokenIn<kPer> in = next;
    if (t + 1 < first + n) next.load(qkv, alpha, beta, t + 1, lane, h, kh, j0, d);
    float sq = 0.0f, sk = 0.0f, qk = 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      sq = fmaf(in.q[e], in.q[e], sq);
      sk = fmaf(in.k[e], in.k[e], sk);
      qk = fmaf(in.q[e], in.k[e], qk);
    }
    sq = warp_sum(sq);
    sk = warp_sum(sk);
    qk = warp_sum(qk);
    const float qs = d.q_scale / fmaxf(sqrtf(sq), d.l2_eps), ks = 1.0f / fmaxf(sqrtf(sk), d.l2_eps);
    float q[kPer], k[kPer];
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      q[e] = in.q[e] * qs;
      k[e] = in.k[e] * ks;
    }
    const float kq = qk * qs * ks;
    const float decay = expf(softplus(in.alpha + dtb) * ah);
    const float b = sigmoid(in.beta);
    float o_mine = 0.0f;  // lane r keeps row j0 + r's output
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      float s_k = 0.0f, s_q = 0.0f;
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        s_k = fmaf(st[r][e], k[e], s_k);
        s_q = fmaf(st[r][e], q[e], s_q);
      }
      s_k = warp_sum(s_k);
      s_q = warp_sum(s_q);
      const float delta = b * (in.v[r] - decay * s_k);
#pragma unroll
      for (int e = 0; e < kPer; ++e) st[r][e] = fmaf(k[e], delta, st[r][e] * decay);
      if (lane == r) o_mine = fmaf(decay, s_q, delta * kq);
    }
    if (lane < kRowsPerWarp && j0 + lane < d.dv)
      out[int64_t(t) * out_cols + int64_t(h) * d.dv + j0 + lane] = o_mine;
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int j = j0 + r, i = lane + e * W;
      if (j < d.dv && i < d.dk) S[int64_t(j) * d.dk + i] = st[r][e];
    }
}

template <int kPer>
void launch_rule(const void* qkv, const void* alpha, const void* beta, const float* dt_bias, const float* a,
                 const RecurrentSeqs& seqs, const DeltaDims& d, float* ssm, void* out, const LaunchCtx& ctx) {
  const dim3 grid(unsigned((d.dv + kRows - 1) / kRows), unsigned(d.Hv), unsigned(seqs.n_seqs));
  launch(delta_rule_kernel<kPer>, grid, unsigned(kWarps * ctx.warp_size), 0, ctx, static_cast<const __half*>(qkv),
         static_cast<const float*>(alpha), static_cast<const float*>(beta), dt_bias, a, seqs, d, ssm,
         static_cast<float*>(out));
}

}  // namespace

void gated_delta_net(const void* qkv, const void* alpha, const void* beta, const float* dt_bias, const float* a,
                     const RecurrentSeqs& seqs, const RecurrentLayer& st, float l2_eps, void* out,
                     const LaunchCtx& ctx) {
  if (seqs.n_seqs == 0 || seqs.max_new_tokens <= 0) return;
  static_assert(kRowsPerWarp <= 32, "lane r writes row r's output");
  const DeltaDims d{st.conv_channels, st.n_k_heads, st.n_v_heads, st.head_k_dim, st.head_v_dim, st.n_rows,
                    st.row_stride, 1.0f / sqrtf(float(st.head_k_dim)), l2_eps};
  const int per = (d.dk + ctx.warp_size - 1) / ctx.warp_size;
  if (per <= 1) return launch_rule<1>(qkv, alpha, beta, dt_bias, a, seqs, d, st.ssm, out, ctx);
  if (per <= 2) return launch_rule<2>(qkv, alpha, beta, dt_bias, a, seqs, d, st.ssm, out, ctx);
  if (per <= 4) return launch_rule<4>(qkv, alpha, beta, dt_bias, a, seqs, d, st.ssm, out, ctx);
  RF_CHECK(per <= 8, "cuda gated_delta_net: key heads of ", d.dk, " (at most ", 8 * ctx.warp_size, ")");
  launch_rule<8>(qkv, alpha, beta, dt_bias, a, seqs, d, st.ssm, out, ctx);
}

}  // namespace rf::gpu
