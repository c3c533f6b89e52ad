// Op cases of mixture-of-experts routing (softmax, or sigmoid with a
// choice-only bias; group-limited; the fused router + routing of one token)
// and FFN (with and without expert
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

// Routing modes of the cases: plain softmax; GLM-4.5's sigmoid with a
// choice-only bias and weights x2.5; DeepSeek V3's, with the choice limited
// to groups; DeepSeek V2's group-limited softmax.
enum class RouteMode { Softmax, SigmoidBias, SigmoidBiasGroups, SoftmaxGroups };

struct RouteSpec {
  RouteMode mode = RouteMode::Softmax;
  int n_expert = 8, n_used = 2;
  bool norm = true;
  int n_group = 0, n_group_used = 0;
  bool sigmoid() const { return mode == RouteMode::SigmoidBias || mode == RouteMode::SigmoidBiasGroups; }
  bool groups() const { return mode == RouteMode::SigmoidBiasGroups || mode == RouteMode::SoftmaxGroups; }
  std::string name() const {
    static const char* kNames[] = {"", "_sigmoid_bias", "_sigmoid_bias_groups", "_groups"};
    return std::string(kNames[int(mode)]) + "_e" + std::to_string(n_expert) + "_k" + std::to_string(n_used) +
           (groups() ? "_g" + std::to_string(n_group) + "u" + std::to_string(n_group_used) : "") +
           (norm ? "_norm" : "");
  }
  MoeParams params() const {
    MoeParams p;
    p.n_expert = n_expert;
    p.n_used = n_used;
    p.norm_weights = norm;
    if (sigmoid()) {
      p.gating = MoeGating::Sigmoid;
      p.weights_scale = 2.5f;
    }
    if (groups()) p.n_group = n_group, p.n_group_used = n_group_used;
    return p;
  }
};

// The probabilities and choice scores of one row of logits (double).
void route_scores(const RouteSpec& r, const float* l, const std::vector<float>& bias, std::vector<double>& pr,
                  std::vector<double>& score) {
  const int E = r.n_expert;
  const double mx = *std::max_element(l, l + E);
  pr.assign(size_t(E), 0.0);
  score.assign(size_t(E), 0.0);
  double z = 0;
  for (int e = 0; e < E; ++e) z += std::exp(double(l[e]) - mx);
  for (int e = 0; e < E; ++e) {
    pr[size_t(e)] = r.sigmoid() ? 1.0 / (1.0 + std::exp(-double(l[e]))) : std::exp(double(l[e]) - mx) / z;
    score[size_t(e)] = pr[size_t(e)] + (r.sigmoid() ? double(bias[size_t(e)]) : 0.0);
  }
}

// The sums of each group's two best scores.
std::vector<double> group_scores(const RouteSpec& r, const std::vector<double>& score) {
  const int per = r.n_expert / r.n_group;
  std::vector<double> g;
  for (int gi = 0; gi < r.n_group; ++gi) {
    std::vector<double> s(score.begin() + gi * per, score.begin() + (gi + 1) * per);
    std::sort(s.rbegin(), s.rend());
    g.push_back(s[0] + s[1]);
  }
  return g;
}

double min_gap(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double gap = 1.0;
  for (size_t i = 1; i < v.size(); ++i) gap = std::min(gap, v[i] - v[i - 1]);
  return gap;
}

// Router logits: a random order of the experts spaced 0.25 apart in each
// row (4 / n_expert past 16 experts, so that sigmoids stay apart), redrawn
// until the choice scores (and with groups the groups' sums) are at least
// 1e-5 apart (their f32 error is ~1e-7), so that no backend's rounding
// reorders the choice.
// in.f[1]: the choice bias, spaced 0.3 apart (it reorders the choice).
void route_inputs(const RouteSpec& r, int n, std::mt19937& rng, OpInputs& in) {
  const int E = r.n_expert;
  in.f.resize(2);
  for (int e = 0; e < E; ++e) in.f[1].push_back(0.3f * float((e * 5) % E) / float(E) - 0.1f);
  const double want = 1e-5;
  const float step = std::min(0.25f, 4.0f / float(E));
  for (int t = 0; t < n; ++t) {
    std::vector<int> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::vector<float> l(static_cast<size_t>(E));
    std::vector<double> pr, score;
    for (;;) {
      std::shuffle(order.begin(), order.end(), rng);
      for (int e = 0; e < E; ++e) l[size_t(e)] = step * float(order[size_t(e)]) - 1.0f;
      if (r.mode == RouteMode::Softmax) break;  // (the logits themselves rank)
      route_scores(r, l.data(), in.f[1], pr, score);
      if (min_gap(score) >= want && (!r.groups() || min_gap(group_scores(r, score)) >= want)) break;
    }
    in.f[0].insert(in.f[0].end(), l.begin(), l.end());
  }
}

// The reference routing of n rows of logits: ids then weights.
RefOutputs route_reference(const RouteSpec& r, int n, const float* logits, const std::vector<float>& bias) {
  RefOutputs out(2);
  const int E = r.n_expert;
  for (int t = 0; t < n; ++t) {
    std::vector<double> pr, score;
    route_scores(r, logits + size_t(t) * E, bias, pr, score);
    if (r.groups()) {  // experts of the groups not among the n_group_used best sums are out
      const std::vector<double> g = group_scores(r, score);
      std::vector<int> gi(g.size());
      std::iota(gi.begin(), gi.end(), 0);
      std::stable_sort(gi.begin(), gi.end(), [&](int a, int b) { return g[size_t(a)] > g[size_t(b)]; });
      const int per = E / r.n_group;
      for (int e = 0; e < E; ++e)
        if (std::find(gi.begin(), gi.begin() + r.n_group_used, e / per) == gi.begin() + r.n_group_used)
          score[size_t(e)] = -INFINITY;
    }
    std::vector<int> idx(static_cast<size_t>(E));
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b2) { return score[size_t(a)] > score[size_t(b2)]; });
    double chosen = 0;
    for (int j = 0; j < r.n_used; ++j) chosen += pr[size_t(idx[size_t(j)])];
    for (int j = 0; j < r.n_used; ++j) {
      out[0].push_back(idx[size_t(j)]);
      out[1].push_back(pr[size_t(idx[size_t(j)])] / (r.norm ? chosen : 1.0) * (r.sigmoid() ? 2.5 : 1.0));
    }
  }
  return out;
}

// moe_route on n rows. Outputs: ids, weights.
OpCase route_case(int n, RouteSpec r) {
  OpCase c;
  c.name = "moe_route" + r.name() + "_n" + std::to_string(n);
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    route_inputs(r, n, rng, in);
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(moe_step_limits(n, r.n_expert, r.n_used, 64, 64));
    DeviceBuffers b(be);
    Tensor logits = b.upload(in.f[0], DType::F32, r.n_expert, n);
    Tensor ids = b.zeros(DType::I32, r.n_used, n), w = b.zeros(DType::F32, r.n_used, n);
    MoeParams q = r.params();
    if (r.sigmoid()) q.choice_bias = b.upload(in.f[1], DType::F32, r.n_expert, 1);
    be.moe_route(logits, q, ids, w);
    return OpOutputs{b.read(ids), b.read(w)};
  };
  c.reference = [=](const OpInputs& in) { return route_reference(r, n, in.f[0].data(), in.f[1]); };
  // Ids are small integers: one chosen differently is a relative error
  // past 1e-2. The weights are softmax or sigmoid values in f32 (the GPU's expf).
  c.vs_cpu = {Metric::RelL2, 1e-5};
  return c;
}

// moe_router_route for one token (the GPU's fused router + routing
// launch): x [64] of the activation type, f32 router rows, whose logits are
// exact in f32 (x is 1 on its first 4 columns and 0 elsewhere; each row's
// first 4 entries are a quarter of the wanted logit, multiples of 1/16;
// the rest random), so every backend routes the same logits. With
// router_bias (gpt-oss) the rows make the wanted logit minus a bias of
// multiples of 1/16, which the op adds back (still exact). Outputs:
// logits, ids, weights.
OpCase router_route_case(RouteSpec r, bool router_bias = false) {
  constexpr int d = 64;
  OpCase c;
  c.name = "moe_router_route" + r.name() + (router_bias ? "_router_bias" : "") + "_d" + std::to_string(d);
  const auto bias_of = [](int e) { return float((e * 7) % 17 - 8) / 16.0f; };
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    route_inputs(r, 1, rng, in);
    std::vector<float> x(d, 0.0f), w = randn(size_t(r.n_expert) * d, rng);
    for (int i = 0; i < 4; ++i) x[size_t(i)] = 1.0f;
    for (int e = 0; e < r.n_expert; ++e)
      for (int i = 0; i < 4; ++i)
        w[size_t(e) * d + i] = (in.f[0][size_t(e)] - (router_bias ? bias_of(e) : 0.0f)) / 4.0f;
    in.f.push_back(x);  // f[2]
    in.f.push_back(w);  // f[3]
    std::vector<float> rb;
    for (int e = 0; e < r.n_expert; ++e) rb.push_back(bias_of(e));
    in.f.push_back(rb);  // f[4]
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(moe_step_limits(1, r.n_expert, r.n_used, 64, d));
    DeviceBuffers b(be);
    Tensor x = b.upload(in.f[2], be.activation_type(), d, 1), w = b.f32(in.f[3], d, r.n_expert);
    Tensor logits = b.zeros(DType::F32, r.n_expert, 1);
    Tensor ids = b.zeros(DType::I32, r.n_used, 1), wt = b.zeros(DType::F32, r.n_used, 1);
    MoeParams q = r.params();
    if (r.sigmoid()) q.choice_bias = b.upload(in.f[1], DType::F32, r.n_expert, 1);
    if (router_bias) q.router_bias = b.upload(in.f[4], DType::F32, r.n_expert, 1);
    be.moe_router_route(x, w, q, logits, ids, wt);
    return OpOutputs{b.read(logits), b.read(ids), b.read(wt)};
  };
  c.reference = [=](const OpInputs& in) {
    RefOutputs out = route_reference(r, 1, in.f[0].data(), in.f[1]);
    out.insert(out.begin(), std::vector<double>(in.f[0].begin(), in.f[0].end()));
    return out;
  };
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

// moe_scale_weights: routing weights times their experts' scales (Gemma 4's
// ffn_down_exps.scale), ids as a router chose them (distinct per row).
OpCase scale_weights_case(int n, int n_expert, int k) {
  OpCase c;
  c.name = "moe_scale_weights_n" + std::to_string(n) + "_e" + std::to_string(n_expert) + "_k" + std::to_string(k);
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {randn(size_t(n) * k, rng), randn(size_t(n_expert), rng)};
    in.i = {std::vector<int32_t>(size_t(n) * k)};
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < k; ++j) in.i[0][size_t(t) * k + j] = int32_t((t * 5 + j * 3 + int(rng() % 2)) % n_expert);
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, 1, 1, 1, 1));
    DeviceBuffers b(be);
    Tensor ids = b.upload_i32(in.i[0], k, n), w = b.upload(in.f[0], DType::F32, k, n), s = b.f32(in.f[1], n_expert);
    be.moe_scale_weights(ids, s, w);
    return OpOutputs{b.read(w)};
  };
  c.reference = [=](const OpInputs& in) {
    std::vector<double> out(in.f[0].size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = double(in.f[0][i]) * in.f[1][size_t(in.i[0][i])];
    return RefOutputs{out};
  };
  c.vs_reference = tol_f32();
  c.vs_cpu = tol_f32();  // one f32 product each
  return c;
}

void add_moe_sample_cases(std::vector<OpCase>& cases) {
  cases.push_back(route_case(5, {RouteMode::Softmax, 8, 2, true}));
  cases.push_back(route_case(3, {RouteMode::Softmax, 32, 4, false}));
  cases.push_back(route_case(5, {RouteMode::SigmoidBias, 8, 2, true}));
  cases.push_back(route_case(3, {RouteMode::SigmoidBias, 16, 4, false}));
  // DeepSeek V3's shape of groups (8 of 32 experts, 4 used) at 64 experts,
  // the tiny model's (4 of 4, 2 used), and V2's softmax groups.
  cases.push_back(route_case(5, {RouteMode::SigmoidBiasGroups, 64, 8, true, 8, 4}));
  cases.push_back(route_case(3, {RouteMode::SigmoidBiasGroups, 16, 4, true, 4, 2}));
  cases.push_back(route_case(4, {RouteMode::SoftmaxGroups, 32, 6, false, 8, 3}));
  cases.push_back(router_route_case({RouteMode::Softmax, 16, 4, true}));
  cases.push_back(router_route_case({RouteMode::Softmax, 32, 4, true}, true));
  cases.push_back(router_route_case({RouteMode::SigmoidBias, 16, 4, true}));
  cases.push_back(router_route_case({RouteMode::SigmoidBiasGroups, 16, 4, true, 4, 2}));
  for (int n : {1, 5}) {
    cases.push_back(moe_ffn_case(DType::Q8_0, Activation::SiLU, false, n));
    cases.push_back(moe_ffn_case(DType::Q4_K, Activation::SiLU, false, n));
  }
  cases.push_back(moe_ffn_case(DType::Q8_0, Activation::SiLUClampedOai, true, 3));
  cases.push_back(greedy_case(3, 256));
  cases.push_back(scale_weights_case(1, 8, 2));
  cases.push_back(scale_weights_case(37, 128, 8));
}

}  // namespace rf::test
