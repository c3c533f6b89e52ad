// CPU Gated DeltaNet ops (the recurrent layers of hybrid models, backend.h):
// the causal depthwise conv1d with its per-sequence state and SiLU, the
// gated delta rule as the plain per-token recurrence (the reference every
// chunked or parallel form must match), the gated RMSNorm, and sigmoid
// gating. State rows are f32 (RecurrentLayer); sums run in double. Work is
// split over sequences and heads (channels for the conv), never over a
// sequence's tokens, so a sequence's results do not depend on what else the
// step holds or on how its tokens were split into steps.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace rf::cpu {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

struct SeqSpan {
  int32_t first, n, pos0, row;  // tokens [first, first + n), position of the first, state row
};

// The step's non-padding sequences.
std::vector<SeqSpan> sequences(const StepMeta& m, const RecurrentLayer& st) {
  RF_CHECK(m.state_slots, "recurrent op: the step has no state slots");
  std::vector<SeqSpan> out;
  for (int32_t s = 0; s < m.n_seqs; ++s) {
    const int32_t first = m.seq_starts[s], n = m.seq_starts[s + 1] - first;
    if (n <= 0 || m.positions[first] < 0) continue;  // padding
    const int32_t row = m.state_slots[s];
    RF_CHECK(row >= 0 && row < st.n_rows, "recurrent op: sequence ", s, " has state row ", row, " of ", st.n_rows);
    out.push_back({first, n, m.positions[first], row});
  }
  return out;
}

void check_layer(const RecurrentLayer& st) {
  RF_CHECK(st.conv && st.ssm && st.conv_kernel >= 2 && st.n_k_heads > 0 && st.n_v_heads % st.n_k_heads == 0 &&
               st.conv_channels == 2 * st.n_k_heads * st.head_k_dim + st.n_v_heads * st.head_v_dim,
           "recurrent op: bad state layer (kernel ", st.conv_kernel, ", ", st.n_k_heads, " q/k heads, ", st.n_v_heads,
           " value heads, channels ", st.conv_channels, ")");
}

// x scaled to unit L2 norm, as ggml_l2_norm: x / max(|x|, eps).
void l2_normalize(const float* x, int n, float eps, float extra_scale, float* out) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float scale = 1.0f / std::max(float(std::sqrt(ss)), eps) * extra_scale;
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale;
}

}  // namespace

void conv1d_silu_state(ThreadPool& pool, const Tensor& x, const Tensor& w, const StepMeta& m, const RecurrentLayer& st,
                       Tensor& out) {
  check_layer(st);
  const int64_t C = st.conv_channels;
  const int K = st.conv_kernel, km1 = K - 1;
  RF_CHECK(x.type == DType::F32 && out.type == DType::F32 && w.type == DType::F32 && x.cols() == C &&
               out.cols() == C && w.cols() == K && w.rows() == C && x.rows() >= m.n_tokens && out.rows() >= m.n_tokens,
           "cpu conv1d_silu_state: bad shapes");
  const std::vector<SeqSpan> seqs = sequences(m, st);
  const float* wp = w.ptr<float>();
  pool.parallel_for(seqs.size() * size_t(C), 64, [&](size_t i0, size_t i1) {
    std::vector<float> old(static_cast<size_t>(km1));
    for (size_t i = i0; i < i1; ++i) {
      const SeqSpan& sp = seqs[i / size_t(C)];
      const int64_t c = int64_t(i % size_t(C));
      float* state = st.conv + int64_t(sp.row) * st.row_stride;  // [km1, C]
      // The inputs of relative position j (0: the step's first token).
      for (int p = 0; p < km1; ++p) old[size_t(p)] = sp.pos0 > 0 ? state[int64_t(p) * C + c] : 0.0f;
      auto input = [&](int32_t j) {
        return j >= 0 ? x.ptr<float>()[int64_t(sp.first + j) * C + c] : old[size_t(j + km1)];
      };
      const float* wc = wp + c * K;
      for (int32_t t = 0; t < sp.n; ++t) {
        double acc = 0;
        for (int k = 0; k < K; ++k) acc += double(wc[k]) * input(t - km1 + k);
        out.ptr<float>()[int64_t(sp.first + t) * C + c] = silu(float(acc));
      }
      for (int p = 0; p < km1; ++p) state[int64_t(p) * C + c] = input(sp.n - km1 + p);
    }
  });
}

void gated_delta_net(ThreadPool& pool, const Tensor& qkv, const Tensor& alpha, const Tensor& beta,
                     const Tensor& dt_bias, const Tensor& a, const StepMeta& m, const RecurrentLayer& st, float l2_eps,
                     Tensor& out) {
  check_layer(st);
  const int Hk = st.n_k_heads, Hv = st.n_v_heads, dk = st.head_k_dim, dv = st.head_v_dim;
  const int64_t C = st.conv_channels;
  RF_CHECK(qkv.type == DType::F32 && qkv.cols() == C && alpha.type == DType::F32 && beta.type == DType::F32 &&
               alpha.cols() == Hv && beta.cols() == Hv && dt_bias.numel() == Hv && a.numel() == Hv &&
               out.type == DType::F32 && out.cols() == int64_t(Hv) * dv && qkv.rows() >= m.n_tokens &&
               alpha.rows() >= m.n_tokens && beta.rows() >= m.n_tokens && out.rows() >= m.n_tokens,
           "cpu gated_delta_net: bad shapes");
  const std::vector<SeqSpan> seqs = sequences(m, st);
  const float q_scale = 1.0f / std::sqrt(float(dk));
  pool.parallel_for(seqs.size() * size_t(Hv), 1, [&](size_t i0, size_t i1) {
    std::vector<float> q(static_cast<size_t>(dk)), k(static_cast<size_t>(dk));
    
    for (size_t i = i0; i < i1; ++i) {
      const SeqSpan& sp = seqs[i / size_t(Hv)];
      const int h = int(i % size_t(Hv)), kh = h % Hk;
      float* S = st.ssm + int64_t(sp.row) * st.row_stride + int64_t(h) * dv * dk;  // [dv][dk]: S^T
      if (sp.pos0 == 0) std::fill(S, S + int64_t(dv) * dk, 0.0f);
      for (int32_t t = sp.first; t < sp.first + sp.n; ++t) {
        const float* row = qkv.ptr<float>() + int64_t(t) * C;
        l2_normalize(row + kh * dk, dk, l2_eps, q_scale, q.data());
        l2_normalize(row + int64_t(Hk) * dk + kh * dk, dk, l2_eps, 1.0f, k.data());
        const float* v = row + 2 * int64_t(Hk) * dk + int64_t(h) * dv;
        const float g = softplus(alpha.ptr<float>()[int64_t(t) * Hv + h] + dt_bias.ptr<float>()[h]) * a.ptr<float>()[h];
        const float decay = std::exp(g);
        const float b = sigmoid(beta.ptr<float>()[int64_t(t) * Hv + h]);
        float* o = out.ptr<float>() + int64_t(t) * out.cols() + int64_t(h) * dv;
        for (int j = 0; j < dv; ++j) {
          float* Sj = S + int64_t(j) * dk;
          double acc = 0;
          for (int c = 0; c < dk; ++c) {
            Sj[c] *= decay;
            acc += double(Sj[c]) * k[size_t(c)];
          }
          const float d = b * (v[j] - float(acc));
          double oj = 0;
          for (int c = 0; c < dk; ++c) {
            Sj[c] += k[size_t(c)] * d;
            oj += double(Sj[c]) * q[size_t(c)];
          }
          o[j] = float(oj);
        }
      }
    }
  });
}

void gated_rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& out) {
  const int64_t hw = w.numel();
  RF_CHECK(x.type == DType::F32 && z.type == DType::F32 && out.type == DType::F32 && w.type == DType::F32 && hw > 0 &&
               x.cols() % hw == 0 && z.cols() == x.cols() && out.cols() == x.cols() && z.rows() >= x.rows() &&
               out.rows() >= x.rows(),
           "cpu gated_rms_norm: bad shapes");
  const int64_t segs = x.rows() * (x.cols() / hw);
  pool.parallel_for(size_t(segs), 16, [&](size_t s0, size_t s1) {
    for (size_t s = s0; s < s1; ++s) {
      const float* xs = x.ptr<float>() + int64_t(s) * hw;
      const float* zs = z.ptr<float>() + int64_t(s) * hw;
      float* o = out.ptr<float>() + int64_t(s) * hw;
      double ss = 0;
      for (int64_t i = 0; i < hw; ++i) ss += double(xs[i]) * xs[i];
      const float scale = float(1.0 / std::sqrt(ss / double(hw) + double(eps)));
      for (int64_t i = 0; i < hw; ++i) o[i] = xs[i] * scale * w.ptr<float>()[i] * silu(zs[i]);
    }
  });
}

void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) {
  const int64_t n = x.cols();
  const bool per_row = gate.cols() == 1 && n != 1;
  RF_CHECK(x.type == DType::F32 && gate.type == DType::F32 && out.type == DType::F32 && out.cols() == n &&
               (per_row || gate.cols() == n) && gate.rows() >= x.rows() && out.rows() >= x.rows(),
           "cpu sigmoid_mul: bad shapes");
  for (int64_t r = 0; r < x.rows(); ++r) {
    const float* xr = x.ptr<float>() + r * n;
    const float* gr = gate.ptr<float>() + r * gate.cols();
    float* o = out.ptr<float>() + r * n;
    for (int64_t i = 0; i < n; ++i) o[i] = xr[i] * sigmoid(per_row ? gr[0] : gr[i]);
  }
}

}  // namespace rf::cpu

namespace rf {

void CpuBackend::conv1d_silu_state(const Tensor& x, const Tensor& w, const StepMeta& m, const RecurrentLayer& st,
                                   Tensor& out) {
  cpu::conv1d_silu_state(pool_, x, w, m, st, out);
}

void CpuBackend::gated_delta_net(const Tensor& qkv, const Tensor& alpha, const Tensor& beta, const Tensor& dt_bias,
                                 const Tensor& a, const StepMeta& m, const RecurrentLayer& st, float l2_eps,
                                 Tensor& out) {
  cpu::gated_delta_net(pool_, qkv, alpha, beta, dt_bias, a, m, st, l2_eps, out);
}

void CpuBackend::gated_rms_norm(const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& out) {
  cpu::gated_rms_norm(pool_, x, w, z, eps, out);
}

void CpuBackend::sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) { cpu::sigmoid_mul(x, gate, out); }

void CpuBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (dst != src) std::memmove(dst, src, bytes);
}

}  // namespace rf
