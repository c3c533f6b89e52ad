// The CPU mixture-of-experts ops against naive double-precision references
// on fresh random inputs. moe_route: softmax over every expert, the top k
// in descending order with ties to the lower index, renormalised or not (one
// expert, all of them, equal logits, huge logits). moe_ffn: expert weights
// in several block formats, SiLU and GeGLU, experts chosen by enough tokens
// to span several row chunks; a token's output is bit-identical alone and in
// a batch (f32 weights); bad ids and a missing or too small scratch are
// errors naming the op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <random>

#include "error_text.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/quant.h"
#include "op/op_test_util.h"

namespace rf {
namespace {

using test::randn;

// The reference routing of one token: softmax in double, experts sorted by
// probability — compared as log-probabilities, which do not underflow to
// equal zeros — stably (equal ones keep the lower index first).
void naive_route(const float* logits, int n_expert, int k, bool norm, std::vector<int32_t>& ids,
                 std::vector<double>& w) {
  double top = -INFINITY, sum = 0;
  for (int e = 0; e < n_expert; ++e) top = std::max(top, double(logits[e]));
  for (int e = 0; e < n_expert; ++e) sum += std::exp(double(logits[e]) - top);
  std::vector<double> logp(static_cast<size_t>(n_expert)), p(static_cast<size_t>(n_expert));
  for (int e = 0; e < n_expert; ++e) {
    logp[size_t(e)] = double(logits[e]) - top - std::log(sum);
    p[size_t(e)] = std::exp(logp[size_t(e)]);
  }
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logp[size_t(a)] > logp[size_t(b)]; });
  ids.assign(order.begin(), order.begin() + k);
  w.clear();
  double chosen = 0;
  for (int32_t e : ids) chosen += p[size_t(e)], w.push_back(p[size_t(e)]);
  if (norm)
    for (double& x : w) x /= chosen;
}

struct RouteResult {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

RouteResult route(CpuBackend& be, std::vector<float>& logits, int n_expert, int k, bool norm) {
  const int64_t n = int64_t(logits.size()) / n_expert;
  RouteResult r{std::vector<int32_t>(size_t(n * k), -1), std::vector<float>(size_t(n * k), NAN)};
  MoeParams p;
  p.n_expert = n_expert;
  p.n_used = k;
  p.norm_weights = norm;
  Tensor tl = make_tensor(logits.data(), DType::F32, n_expert, n), ti = make_tensor(r.ids.data(), DType::I32, k, n),
         tw = make_tensor(r.weights.data(), DType::F32, k, n);
  be.moe_route(tl, p, ti, tw);
  return r;
}

void expect_route_matches(CpuBackend& be, std::vector<float> logits, int n_expert, int k, bool norm,
                          const std::string& what) {
  const RouteResult got = route(be, logits, n_expert, k, norm);
  const size_t n = logits.size() / size_t(n_expert);
  std::vector<int32_t> ids;
  std::vector<double> w;
  for (size_t t = 0; t < n; ++t) {
    naive_route(logits.data() + t * size_t(n_expert), n_expert, k, norm, ids, w);
    for (int j = 0; j < k; ++j) {
      const size_t i = t * size_t(k) + size_t(j);
      ASSERT_EQ(got.ids[i], ids[size_t(j)]) << what << " token " << t << " choice " << j;
      EXPECT_NEAR(got.weights[i], w[size_t(j)], 1e-6 * std::max(1.0, w[size_t(j)])) << what << " token " << t;
    }
  }
}

TEST(CpuMoe, RouteMatchesDoubleReference) {
  CpuBackend be(1);
  std::mt19937 rng(11);
  for (auto [n_expert, k] : {std::pair{4, 2}, std::pair{8, 2}, std::pair{128, 8}, std::pair{6, 1}, std::pair{5, 5}})
    for (bool norm : {true, false})
      expect_route_matches(be, randn(size_t(37 * n_expert), rng, 2.0f), n_expert, k, norm,
                           "E=" + std::to_string(n_expert) + " k=" + std::to_string(k) + (norm ? " norm" : " raw"));
}

TEST(CpuMoe, RouteTiesGoToTheLowerExpert) {
  CpuBackend be(1);
  std::vector<float> l = {1, 3, 3, 0, 3, -1,   // three equal best
                          2, 2, 2, 2, 2, 2,    // all equal
                          -1, 0, 5, 0, 5, 0};  // two equal best, then equal seconds
  for (bool norm : {true, false}) expect_route_matches(be, l, 6, 3, norm, norm ? "ties norm" : "ties raw");
  const RouteResult r = route(be, l, 6, 3, true);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 2, 4, 0, 1, 2, 2, 4, 1}));
  for (int j = 0; j < 6; ++j) EXPECT_FLOAT_EQ(r.weights[size_t(j)], 1.0f / 3.0f);
}

TEST(CpuMoe, RouteHugeLogitsStayFinite) {
  CpuBackend be(1);
  std::vector<float> l = {1000, 999.5f, -1000, 3e4f, -3e4f, 0, 1e-30f, 2e4f};
  for (bool norm : {true, false}) expect_route_matches(be, l, 8, 3, norm, "huge");
  const RouteResult r = route(be, l, 8, 3, false);
  for (float w : r.weights) EXPECT_TRUE(std::isfinite(w));
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 7, 0}));
  EXPECT_FLOAT_EQ(r.weights[0], 1.0f);
}

// Experts of one layer in `type`: each matrix stacked along rows, and the
// same values dequantized (what the reference multiplies by).
struct Experts {
  std::vector<uint8_t> gate, up, down;
  std::vector<float> gate_f, up_f, down_f;
  std::vector<float> gate_b, up_b, down_b;  // per-expert biases, or empty
  ExpertWeights w;
};

std::vector<uint8_t> quantize(DType type, const std::vector<float>& v, int64_t cols, std::vector<float>& deq) {
  const size_t rb = row_bytes(type, uint64_t(cols)), rows = v.size() / size_t(cols);
  std::vector<uint8_t> q(rb * rows);
  deq.resize(v.size());
  for (size_t r = 0; r < rows; ++r) {
    quantize_row(type, v.data() + r * size_t(cols), q.data() + r * rb, size_t(cols));
    dequantize_row(type, q.data() + r * rb, deq.data() + r * size_t(cols), size_t(cols));
  }
  return q;
}

std::unique_ptr<Experts> make_experts(DType type, int n_expert, int d, int ff, std::mt19937& rng) {
  auto e = std::make_unique<Experts>();
  e->gate = quantize(type, randn(size_t(n_expert * ff * d), rng, 1.0f / std::sqrt(float(d))), d, e->gate_f);
  e->up = quantize(type, randn(size_t(n_expert * ff * d), rng, 1.0f / std::sqrt(float(d))), d, e->up_f);
  e->down = quantize(type, randn(size_t(n_expert * d * ff), rng, 1.0f / std::sqrt(float(ff))), ff, e->down_f);
  e->w.n_expert = n_expert;
  e->w.gate = make_tensor(e->gate.data(), type, d, int64_t(n_expert) * ff);
  e->w.up = make_tensor(e->up.data(), type, d, int64_t(n_expert) * ff);
  e->w.down = make_tensor(e->down.data(), type, ff, int64_t(n_expert) * d);
  return e;
}

// Gives the experts biases (gpt-oss's), f32 [n_expert rows, ff / d].
void add_biases(Experts& e, int n_expert, int d, int ff, std::mt19937& rng) {
  e.gate_b = randn(size_t(n_expert * ff), rng, 0.5f);
  e.up_b = randn(size_t(n_expert * ff), rng, 0.5f);
  e.down_b = randn(size_t(n_expert * d), rng, 0.5f);
  e.w.gate_bias = make_tensor(e.gate_b.data(), DType::F32, ff, n_expert);
  e.w.up_bias = make_tensor(e.up_b.data(), DType::F32, ff, n_expert);
  e.w.down_bias = make_tensor(e.down_b.data(), DType::F32, d, n_expert);
}

double act_glu(Activation act, double g, double u) {
  switch (act) {
    case Activation::SiLU: return g / (1.0 + std::exp(-g)) * u;
    case Activation::GeluTanh: return double(gelu_tanh_f16(float(g))) * u;
    case Activation::SiLUClampedOai: {
      const double gc = std::min(g, 7.0), uc = std::clamp(u, -7.0, 7.0);
      return gc / (1.0 + std::exp(-1.702 * gc)) * (uc + 1.0);
    }
  }
  return 0;
}

// out[t] = sum_j w[t, j] * down_e . (act(gate_e . x) * (up_e . x)) in
// double; GeGLU's gelu is the documented f16-rounded approximation.
std::vector<double> naive_ffn(const Experts& ex, const std::vector<float>& x, const std::vector<int32_t>& ids,
                              const std::vector<float>& weights, int k, int d, int ff, Activation act) {
  const size_t n = x.size() / size_t(d);
  std::vector<double> out(n * size_t(d), 0.0), h(static_cast<size_t>(ff));
  for (size_t t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      const size_t e = size_t(ids[t * size_t(k) + size_t(j)]);
      for (int r = 0; r < ff; ++r) {
        double g = 0, u = 0;
        const size_t row = (e * size_t(ff) + size_t(r)) * size_t(d);
        for (int c = 0; c < d; ++c) {
          g += double(x[t * size_t(d) + size_t(c)]) * ex.gate_f[row + size_t(c)];
          u += double(x[t * size_t(d) + size_t(c)]) * ex.up_f[row + size_t(c)];
        }
        if (!ex.gate_b.empty()) g += ex.gate_b[e * size_t(ff) + size_t(r)], u += ex.up_b[e * size_t(ff) + size_t(r)];
        h[size_t(r)] = act_glu(act, g, u);
      }
      for (int o = 0; o < d; ++o) {
        double y = ex.down_b.empty() ? 0.0 : ex.down_b[e * size_t(d) + size_t(o)];
        const size_t row = (e * size_t(d) + size_t(o)) * size_t(ff);
        for (int r = 0; r < ff; ++r) y += h[size_t(r)] * ex.down_f[row + size_t(r)];
        out[t * size_t(d) + size_t(o)] += double(weights[t * size_t(k) + size_t(j)]) * y;
      }
    }
  return out;
}

double rel_err(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

BackendLimits moe_limits(int max_tokens, int n_expert, int k, int ff, int d) {
  BackendLimits lim;
  lim.max_tokens = max_tokens;
  lim.n_expert = n_expert;
  lim.n_expert_used = k;
  lim.expert_ff = ff;
  lim.n_embd = d;
  return lim;
}

MoeParams moe_params(int n_expert, int k, int ff, Activation act) {
  MoeParams p;
  p.n_expert = n_expert;
  p.n_used = k;
  p.n_ff = ff;
  p.act = act;
  return p;
}

// Distinct experts per token, random weights; with `skew`, every token
// picks from the first k + 1 experts (so each is chosen by most tokens).
void random_choices(std::mt19937& rng, int n, int n_expert, int k, bool skew, std::vector<int32_t>& ids,
                    std::vector<float>& weights) {
  ids.clear();
  weights.clear();
  std::vector<int32_t> all(static_cast<size_t>(skew ? k + 1 : n_expert));
  for (int t = 0; t < n; ++t) {
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + k);
    for (int j = 0; j < k; ++j) weights.push_back(std::uniform_real_distribution<float>(0.1f, 1.0f)(rng));
  }
}

struct FfnCase {
  DType type;
  Activation act;
  bool biases = false;
};

class CpuMoeFfn : public ::testing::TestWithParam<FfnCase> {};

TEST_P(CpuMoeFfn, MatchesDoubleOverDequantizedExperts) {
  const FfnCase fc = GetParam();
  const int n_expert = 4, k = 2, d = 256, ff = 256, n = 150;  // ~75 and ~100 rows per expert: several chunks
  std::mt19937 rng(77 + int(fc.type));
  const auto ex = make_experts(fc.type, n_expert, d, ff, rng);
  if (fc.biases) add_biases(*ex, n_expert, d, ff, rng);
  CpuBackend be(2), fast(2, CpuMatmul::Fast);
  be.reserve(moe_limits(n, n_expert, k, ff, d));
  fast.reserve(moe_limits(n, n_expert, k, ff, d));
  const MoeParams p = moe_params(n_expert, k, ff, fc.act);
  for (bool skew : {false, true}) {
    std::vector<int32_t> ids;
    std::vector<float> weights;
    random_choices(rng, n, n_expert, k, skew, ids, weights);
    auto x = randn(size_t(n * d), rng);
    std::vector<float> out(size_t(n * d), NAN);
    Tensor tx = make_tensor(x.data(), DType::F32, d, n), ti = make_tensor(ids.data(), DType::I32, k, n),
           tw = make_tensor(weights.data(), DType::F32, k, n), to = make_tensor(out.data(), DType::F32, d, n);
    be.moe_ffn(tx, ti, tw, ex->w, p, to);
    // SiLU: f32 rounding of the products (the matmul test's 2e-6). GeGLU's
    // gate is rounded to f16 before gelu; a gate that lands on the other
    // side of an f16 rounding boundary than the double reference's moves
    // that element by 2^-11 relative.
    const double tol = fc.act == Activation::GeluTanh ? 1e-4 : 2e-6;
    const double err = rel_err(out, naive_ffn(*ex, x, ids, weights, k, d, ff, fc.act));
    std::printf("[ moe      ] %-5s %s %s: relative L2 error %.2e (tolerance %.0e)\n", dtype_name(fc.type),
                fc.act == Activation::SiLU ? "silu" : fc.act == Activation::GeluTanh ? "gelu" : "oai", skew ? "skewed" : "spread", err, tol);
    EXPECT_LT(err, tol) << dtype_name(fc.type) << (skew ? " skewed" : " spread");
    // The fast matmul quantizes the activations of each of the three
    // matmuls of a quantized expert to 8 bits (cpu_qdot.h): ~1.2 % (blocks
    // of 32) and ~1.9 % (blocks of 256) relative L2 here; a wrong expert or
    // weight is off by tens of percent. Float experts keep f32 activations.
    std::vector<float> out_fast(size_t(n * d), NAN);
    Tensor tf = make_tensor(out_fast.data(), DType::F32, d, n);
    fast.moe_ffn(tx, ti, tw, ex->w, p, tf);
    const bool f32_act = fc.type == DType::F32 || fc.type == DType::F16 || fc.type == DType::BF16;
    EXPECT_LT(rel_err(out_fast, naive_ffn(*ex, x, ids, weights, k, d, ff, fc.act)), f32_act ? tol : 3e-2)
        << "fast matmul, " << dtype_name(fc.type) << (skew ? " skewed" : " spread");
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CpuMoeFfn,
                         ::testing::Values(FfnCase{DType::F32, Activation::SiLU}, FfnCase{DType::F16, Activation::SiLU},
                                           FfnCase{DType::BF16, Activation::SiLU},
                                           FfnCase{DType::Q8_0, Activation::SiLU},
                                           FfnCase{DType::Q5_0, Activation::SiLU},
                                           FfnCase{DType::Q4_K, Activation::SiLU},
                                           FfnCase{DType::Q6_K, Activation::SiLU},
                                           FfnCase{DType::F32, Activation::GeluTanh},
                                           FfnCase{DType::MXFP4, Activation::SiLUClampedOai, true},
                                           FfnCase{DType::F32, Activation::SiLUClampedOai, true},
                                           FfnCase{DType::IQ4_XS, Activation::SiLU}),
                         [](const auto& info) {
                           const Activation a = info.param.act;
                           return std::string(dtype_name(info.param.type)) +
                                  (a == Activation::SiLU ? "_silu" : a == Activation::GeluTanh ? "_gelu" : "_oai") +
                                  (info.param.biases ? "_biases" : "");
                         });

// A token's output depends only on its own row and choices: alone (one row
// per expert) it is bit-identical to the same token among 150 (f32 weights,
// whose single- and multi-row products are the same dot products).
void expect_token_alone_equals_in_batch(DType type, CpuMatmul mode) {
  const int n_expert = 8, k = 3, d = 64, ff = 96, n = 150;
  std::mt19937 rng(5);
  const auto ex = make_experts(type, n_expert, d, ff, rng);
  CpuBackend be(2, mode);
  be.reserve(moe_limits(n, n_expert, k, ff, d));
  const MoeParams p = moe_params(n_expert, k, ff, Activation::SiLU);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  random_choices(rng, n, n_expert, k, false, ids, weights);
  auto x = randn(size_t(n * d), rng);
  std::vector<float> out(size_t(n * d));
  Tensor tx = make_tensor(x.data(), DType::F32, d, n), ti = make_tensor(ids.data(), DType::I32, k, n),
         tw = make_tensor(weights.data(), DType::F32, k, n), to = make_tensor(out.data(), DType::F32, d, n);
  be.moe_ffn(tx, ti, tw, ex->w, p, to);
  for (int t : {0, 71, 149}) {
    std::vector<float> one(static_cast<size_t>(d));
    Tensor ox = tx.slice_rows(t, 1), oi = ti.slice_rows(t, 1), ow = tw.slice_rows(t, 1);
    Tensor oo = make_tensor(one.data(), DType::F32, d, 1);
    be.moe_ffn(ox, oi, ow, ex->w, p, oo);
    EXPECT_EQ(one, std::vector<float>(out.begin() + t * d, out.begin() + (t + 1) * d)) << "token " << t;
  }
}

// Also with the fast matmul's 8-bit activations (quantized per row).
TEST(CpuMoe, FfnTokenAloneEqualsInBatch) {
  expect_token_alone_equals_in_batch(DType::F32, CpuMatmul::Reference);
  expect_token_alone_equals_in_batch(DType::Q8_0, CpuMatmul::Fast);
}

using test::error_of;

TEST(CpuMoe, BadInputsAreErrors) {
  const int n_expert = 4, k = 2, d = 32, ff = 32, n = 8;
  std::mt19937 rng(3);
  const auto ex = make_experts(DType::F32, n_expert, d, ff, rng);
  const MoeParams p = moe_params(n_expert, k, ff, Activation::SiLU);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  random_choices(rng, n, n_expert, k, false, ids, weights);
  auto x = randn(size_t(n * d), rng);
  std::vector<float> out(size_t(n * d));
  Tensor tx = make_tensor(x.data(), DType::F32, d, n), ti = make_tensor(ids.data(), DType::I32, k, n),
         tw = make_tensor(weights.data(), DType::F32, k, n), to = make_tensor(out.data(), DType::F32, d, n);
  CpuBackend be(1);
  // No reservation, then one for fewer tokens.
  EXPECT_NE(error_of([&] { be.moe_ffn(tx, ti, tw, ex->w, p, to); }).find("reserve"), std::string::npos);
  be.reserve(moe_limits(n / 2, n_expert, k, ff, d));
  EXPECT_NE(error_of([&] { be.moe_ffn(tx, ti, tw, ex->w, p, to); }).find("moe_ffn: 8 tokens x 2 experts"),
            std::string::npos);
  be.reserve(moe_limits(n, n_expert, k, ff, d));
  be.moe_ffn(tx, ti, tw, ex->w, p, to);
  ids[5] = 4;
  EXPECT_NE(error_of([&] { be.moe_ffn(tx, ti, tw, ex->w, p, to); }).find("chose expert 4 of 4"), std::string::npos);
  // Routing: logits of the wrong width, top-k beyond the experts.
  std::vector<float> logits(size_t(n * 5));
  std::vector<int32_t> rid(size_t(n * k));
  std::vector<float> rw(size_t(n * k));
  Tensor tl = make_tensor(logits.data(), DType::F32, 5, n), tri = make_tensor(rid.data(), DType::I32, k, n),
         trw = make_tensor(rw.data(), DType::F32, k, n);
  EXPECT_NE(error_of([&] { be.moe_route(tl, p, tri, trw); }).find("moe_route: router logits"), std::string::npos);
  MoeParams too_many = p;
  too_many.n_used = 5;
  EXPECT_NE(error_of([&] { be.moe_route(tl, too_many, tri, trw); }).find("moe_route: n_used 5"), std::string::npos);
}

}  // namespace
}  // namespace rf
