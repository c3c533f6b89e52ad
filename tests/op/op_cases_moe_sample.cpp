// Op cases of mixture-of-experts routing (softmax, or sigmoid with a
// choice-only bias) and FFN (with and without expert
// biases and gpt-oss's clamped SwiGLU) and of sampling's greedy rows.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/quant.h"
#include "op/op_cases.h"
#include "op/op_test_util.h"

namespace rf::test {
namespace {

BackendLimits moe_step_limits(int n, int n_expert, int n_used, int ff, int d) {
  BackendLimits lim = step_limits(std::max(n, 16), 4, 4, 1, 1, 1);
  lim.max_weight_elems = int64_t(n_expert) * ff * d;
  lim.n_expert = n_expert;
  lim.n_expert_used = n_used;
  lim.expert_ff = ff;
  lim.n_embd = d;
  return lim;
}

// Router logits spaced at least 0.05 apart in each row (a random order of
// the experts), so that no two experts' probabilities are close enough
// for rounding to reorder them on any backend. Outputs: ids, weights.
// sigmoid: GLM-4.5's routing: sigmoid probabilities, a choice-only bias
// (spaced 0.3 apart, so that it reorders the choice; the biased scores
// then stay at least 1e-3 apart), weights the unbiased sigmoids
// [renormalised], times 2.5.
OpCase route_case(int n, int n_expert, int n_used, bool norm, bool sigmoid = false) {
  OpCase c;
  c.name = std::string(sigmoid ? "moe_route_sigmoid_bias" : "moe_route") + "_n" + std::to_string(n) + "_e" +
           std::to_string(n_expert) + "_k" + std::to_string(n_used) + (norm ? "_norm" : "");
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f.resize(2);
    for (int e = 0; e < n_expert; ++e)  // the choice bias
      in.f[1].push_back(0.3f * float((e * 5) % n_expert) / float(n_expert) - 0.1f);
    for (int t = 0; t < n; ++t) {
      std::vector<int> order(static_cast<size_t>(n_expert));
      std::iota(order.begin(), order.end(), 0);
      std::vector<double> sc;
      double gap = 0;
      do {  // (sigmoid: a new order until the biased scores are 1e-3 apart)
        std::shuffle(order.begin(), order.end(), rng);
        sc.clear();
        for (int e = 0; e < n_expert; ++e)
          sc.push_back(1.0 / (1.0 + std::exp(-(0.25 * order[size_t(e)] - 1.0))) + in.f[1][size_t(e)]);
        std::sort(sc.begin(), sc.end());
        gap = 1.0;
        for (size_t e = 1; e < sc.size(); ++e) gap = std::min(gap, sc[e] - sc[e - 1]);
      } while (sigmoid && gap < 1e-3);
      for (int e = 0; e < n_expert; ++e) in.f[0].push_back(0.25f * float(order[size_t(e)]) - 1.0f);
    }
    return in;
  };
  MoeParams p;
  p.n_expert = n_expert;
  p.n_used = n_used;
  p.norm_weights = norm;
  if (sigmoid) {
    p.gating = MoeGating::Sigmoid;
    p.weights_scale = 2.5f;
  }
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(moe_step_limits(n, n_expert, n_used, 64, 64));
    DeviceBuffers b(be);
    Tensor logits = b.upload(in.f[0], DType::F32, n_expert, n);
    Tensor ids = b.zeros(DType::I32, n_used, n), w = b.zeros(DType::F32, n_used, n);
    MoeParams q = p;
    if (sigmoid) q.choice_bias = b.upload(in.f[1], DType::F32, n_expert, 1);
    be.moe_route(logits, q, ids, w);
    return OpOutputs{b.read(ids), b.read(w)};
  };
  c.reference = [=](const OpInputs& in) {
    RefOutputs out(2);
    for (int t = 0; t < n; ++t) {
      const float* l = in.f[0].data() + size_t(t) * n_expert;
      const double mx = *std::max_element(l, l + n_expert);
      std::vector<double> pr(static_cast<size_t>(n_expert)), score(pr.size());
      double z = 0;
      for (int e = 0; e < n_expert; ++e) {
        pr[size_t(e)] = sigmoid ? 1.0 / (1.0 + std::exp(-double(l[e]))) : std::exp(l[e] - mx);
        z += pr[size_t(e)];
        score[size_t(e)] = pr[size_t(e)] + (sigmoid ? double(in.f[1][size_t(e)]) : 0.0);
      }
      if (sigmoid) z = 1.0;  // (unrenormalised sigmoids are the weights as they are)
      std::vector<int> idx(static_cast<size_t>(n_expert));
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(), [&](int a, int b2) { return score[size_t(a)] > score[size_t(b2)]; });
      double chosen = 0;
      for (int j = 0; j < n_used; ++j) chosen += pr[size_t(idx[size_t(j)])];
      for (int j = 0; j < n_used; ++j) {
        out[0].push_back(idx[size_t(j)]);
        out[1].push_back(pr[size_t(idx[size_t(j)])] / (norm ? chosen : z) * (sigmoid ? 2.5 : 1.0));
      }
    }
    return out;
  };
  // Ids are small integers: one chosen differently is a relative error
  // past 1e-2. The weights are softmax or sigmoid values in f32 (the GPU's expf).
  c.vs_cpu = {Metric::RelL2, 1e-5};
  return c;
}

// out[t] = sum_j w[t, j] * down_e (act(gate_e x) * (up_e x)) over the
// chosen experts e = ids[t, j] (distinct per token), plus expert biases.
OpCase moe_ffn_case(DType type, Activation act, bool biases, int n) {
  const int n_expert = 4, n_used = 2, ff = 256, d = 256;  // ff: whole 256-wide K-quant blocks of the down rows
  OpCase c;
  c.name = std::string("moe_ffn_") + (act == Activation::SiLUClampedOai ? "oai_" : "") + (biases ? "bias_" : "") +
           param_name(dtype_name(type)) + "_n" + std::to_string(n);
  for (char& ch : c.name) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {round_f16(randn(size_t(n) * d, rng)), {}, randn(size_t(n_expert) * ff, rng, 0.2f),
            randn(size_t(n_expert) * ff, rng, 0.2f), randn(size_t(n_expert) * d, rng, 0.2f)};
    in.i.emplace_back();
    for (int t = 0; t < n; ++t) {
      const int e0 = int(rng() % n_expert), e1 = (e0 + 1 + int(rng() % (n_expert - 1))) % n_expert;
      in.i[0].insert(in.i[0].end(), {e0, e1});
      const float w0 = 0.2f + 0.6f * float(rng() % 1000) / 1000.0f;
      in.f[1].insert(in.f[1].end(), {w0, 1.0f - w0});
    }
    in.w = {random_weight(type, n_expert * ff, d, rng, 0.1f), random_weight(type, n_expert * ff, d, rng, 0.1f),
            random_weight(type, n_expert * d, ff, rng, 0.1f)};
    return in;
  };
  MoeParams p;
  p.n_expert = n_expert;
  p.n_used = n_used;
  p.n_ff = ff;
  p.act = act;
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(moe_step_limits(n, n_expert, n_used, ff, d));
    DeviceBuffers b(be);
    const DType a = be.activation_type();
    ExpertWeights w;
    w.n_expert = n_expert;
    w.gate = b.weight(in.w[0], type, d, int64_t(n_expert) * ff);
    w.up = b.weight(in.w[1], type, d, int64_t(n_expert) * ff);
    w.down = b.weight(in.w[2], type, ff, int64_t(n_expert) * d);
    if (biases) {
      w.gate_bias = b.f32(in.f[2], ff, n_expert);
      w.up_bias = b.f32(in.f[3], ff, n_expert);
      w.down_bias = b.f32(in.f[4], d, n_expert);
    }
    Tensor x = b.upload(in.f[0], a, d, n), ids = b.upload_i32(in.i[0], n_used, n);
    Tensor wt = b.upload(in.f[1], DType::F32, n_used, n), out = b.zeros(a, d, n);
    be.moe_ffn(x, ids, wt, w, p, out);
    return OpOutputs{b.read(out)};
  };
  c.reference = [=](const OpInputs& in) {
    std::vector<float> g(size_t(n_expert) * ff * d), u(g.size()), dn(g.size());
    for (int r = 0; r < n_expert * ff; ++r) {
      dequantize_row(type, in.w[0].data() + r * row_bytes(type, d), g.data() + size_t(r) * d, d);
      dequantize_row(type, in.w[1].data() + r * row_bytes(type, d), u.data() + size_t(r) * d, d);
    }
    for (int r = 0; r < n_expert * d; ++r)
      dequantize_row(type, in.w[2].data() + r * row_bytes(type, ff), dn.data() + size_t(r) * ff, ff);
    std::vector<double> out(size_t(n) * d, 0.0);
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < n_used; ++j) {
        const int e = in.i[0][size_t(t) * n_used + j];
        std::vector<double> h(static_cast<size_t>(ff));
        for (int f = 0; f < ff; ++f) {
          double gs = 0, us = 0;
          for (int i = 0; i < d; ++i) {
            const double xv = in.f[0][size_t(t) * d + i];
            gs += xv * g[(size_t(e) * ff + f) * d + i];
            us += xv * u[(size_t(e) * ff + f) * d + i];
          }
          if (biases) gs += in.f[2][size_t(e) * ff + f], us += in.f[3][size_t(e) * ff + f];
          h[size_t(f)] = glu_reference(act, gs, us);
        }
        for (int o = 0; o < d; ++o) {
          double s = biases ? double(in.f[4][size_t(e) * d + o]) : 0.0;
          for (int f = 0; f < ff; ++f) s += h[size_t(f)] * dn[(size_t(e) * d + o) * ff + f];
          out[size_t(t) * d + o] += in.f[1][size_t(t) * n_used + j] * s;
        }
      }
    return RefOutputs{out};
  };
  // The CPU rounds the expert products to f32 between the three matmuls.
  c.vs_reference = {Metric::RelL2, 1e-5};
  // The fast matmul quantizes the activations of each of the three matmuls
  // to 8 bits: an NMSE of ~1.5e-4 (blocks of 32) to ~3.5e-4 (blocks of 256).
  c.vs_reference_fast = {Metric::Nmse, 1e-3};
  c.vs_cpu = tol_quant_matmul();
  return c;
}

// Greedy rows (temperature 0): the argmax of each row of f32 logits, and
// its log-softmax. Logits spaced 0.01 apart per row (no near ties).
OpCase greedy_case(int rows, int vocab) {
  OpCase c;
  c.name = "sample_greedy_r" + std::to_string(rows) + "_v" + std::to_string(vocab);
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f.emplace_back();
    for (int r = 0; r < rows; ++r) {
      std::vector<int> order(static_cast<size_t>(vocab));
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      for (int v = 0; v < vocab; ++v) in.f[0].push_back(0.01f * float(order[size_t(v)]) - 1.0f);
    }
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    BackendLimits lim = step_limits(16, rows, 1, 1, 1, 1);
    lim.vocab = lim.vocab_total = vocab;
    be.reserve(lim);
    DeviceBuffers b(be);
    Tensor logits = b.upload(in.f[0], DType::F32, vocab, rows);
    std::vector<SampleRow> srows(static_cast<size_t>(rows));
    for (auto& s : srows) s.params.temperature = 0.0f;
    std::vector<SampleResult> res;
    be.sample(logits, srows, {}, res);
    OpOutputs out(1);
    for (const auto& r : res) out[0].push_back(float(r.token));
    return out;
  };
  c.reference = [=](const OpInputs& in) {
    RefOutputs out(1);
    for (int r = 0; r < rows; ++r) {
      const float* l = in.f[0].data() + size_t(r) * vocab;
      out[0].push_back(double(std::max_element(l, l + vocab) - l));
    }
    return out;
  };
  c.vs_reference = c.vs_cpu = tol_exact();
  return c;
}

}  // namespace

void add_moe_sample_cases(std::vector<OpCase>& cases) {
  cases.push_back(route_case(5, 8, 2, true));
  cases.push_back(route_case(3, 32, 4, false));
  cases.push_back(route_case(5, 8, 2, true, true));
  cases.push_back(route_case(3, 16, 4, false, true));
  for (int n : {1, 5}) {
    cases.push_back(moe_ffn_case(DType::Q8_0, Activation::SiLU, false, n));
    cases.push_back(moe_ffn_case(DType::Q4_K, Activation::SiLU, false, n));
  }
  cases.push_back(moe_ffn_case(DType::Q8_0, Activation::SiLUClampedOai, true, 3));
  cases.push_back(greedy_case(3, 256));
}

}  // namespace rf::test
