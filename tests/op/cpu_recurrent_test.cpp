// The CPU Gated DeltaNet ops (backend.h) against a naive double-precision
// reference of their definitions on fresh random inputs: the causal conv1d
// with SiLU over a sequence's whole history, the gated delta rule with the
// state S as a plain [head_k_dim, head_v_dim] matrix, the gated RMSNorm and
// sigmoid gating. Sequences run through the state rows as the engine runs
// them: a whole prompt in one step, the same prompt split into chunks of
// every size (fewer tokens than the conv's kernel included) across steps,
// and several sequences of different lengths batched in one step with a
// padding sequence — every token's output equal to the reference, and the
// rows of sequences not in a step left untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "op/op_test_util.h"

namespace rf {
namespace {

using test::randn;

// Hybrid-layer shapes: 2 q/k heads, 6 value heads (head j on q/k head j % 2).
constexpr int kHk = 2, kHv = 6, kDk = 16, kDv = 8, kK = 4;
constexpr int kC = 2 * kHk * kDk + kHv * kDv;

double sigmoid_d(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu_d(double x) { return x * sigmoid_d(x); }

// One sequence's inputs over all its positions and the reference outputs.
struct SeqData {
  int n = 0;
  std::vector<float> x, alpha, beta;  // [n, kC], [n, kHv], [n, kHv]
  std::vector<double> conv_out;       // [n, kC]
  std::vector<double> out;            // [n, kHv * kDv]
};

struct Params {
  std::vector<float> w, dt_bias, a;  // [kC, kK], [kHv], [kHv]
};

// The reference, in double, straight from the definitions.
void reference(const Params& p, SeqData& s, double l2_eps) {
  s.conv_out.assign(size_t(s.n) * kC, 0.0);
  for (int t = 0; t < s.n; ++t)
    for (int c = 0; c < kC; ++c) {
      double acc = 0;
      for (int k = 0; k < kK; ++k) {
        const int pos = t - (kK - 1) + k;
        if (pos >= 0) acc += double(p.w[size_t(c * kK + k)]) * s.x[size_t(pos * kC + c)];
      }
      s.conv_out[size_t(t * kC + c)] = silu_d(acc);
    }
  s.out.assign(size_t(s.n) * kHv * kDv, 0.0);
  for (int h = 0; h < kHv; ++h) {
    std::vector<double> S(size_t(kDk) * kDv, 0.0);  // S[i][j]: key i, value j
    const int kh = h % kHk;
    for (int t = 0; t < s.n; ++t) {
      const double* row = s.conv_out.data() + size_t(t) * kC;
      std::vector<double> q(row + kh * kDk, row + kh * kDk + kDk);
      std::vector<double> k(row + kHk * kDk + kh * kDk, row + kHk * kDk + kh * kDk + kDk);
      const double* v = row + 2 * kHk * kDk + h * kDv;
      for (auto* u : {&q, &k}) {
        double nn = 0;
        for (double e : *u) nn += e * e;
        const double d = std::max(std::sqrt(nn), l2_eps);
        for (double& e : *u) e /= d;
      }
      for (double& e : q) e /= std::sqrt(double(kDk));
      const double x = double(s.alpha[size_t(t * kHv + h)]) + p.dt_bias[size_t(h)];
      const double g = (x > 20 ? x : std::log1p(std::exp(x))) * p.a[size_t(h)];
      const double b = sigmoid_d(s.beta[size_t(t * kHv + h)]);
      for (double& e : S) e *= std::exp(g);
      for (int j = 0; j < kDv; ++j) {
        double skj = 0;
        for (int i = 0; i < kDk; ++i) skj += S[size_t(i * kDv + j)] * k[size_t(i)];
        const double dj = b * (v[j] - skj);
        for (int i = 0; i < kDk; ++i) S[size_t(i * kDv + j)] += k[size_t(i)] * dj;
      }
      for (int j = 0; j < kDv; ++j) {
        double o = 0;
        for (int i = 0; i < kDk; ++i) o += S[size_t(i * kDv + j)] * q[size_t(i)];
        s.out[size_t(t * kHv * kDv + h * kDv + j)] = o;
      }
    }
  }
}

SeqData make_seq(int n, std::mt19937& rng) {
  SeqData s;
  s.n = n;
  s.x = randn(size_t(n) * kC, rng);
  s.alpha = randn(size_t(n) * kHv, rng);
  s.beta = randn(size_t(n) * kHv, rng, 2.0f);
  return s;
}

Params make_params(std::mt19937& rng) {
  Params p;
  p.w = randn(size_t(kC) * kK, rng, 0.5f);
  p.dt_bias = randn(kHv, rng);
  p.a = randn(kHv, rng);
  for (float& v : p.a) v = -std::exp(v);  // -exp(A_log)
  p.a[0] = -30.0f;                        // strong decay
  return p;
}

// State rows for `rows` sequences, laid out as the state cache lays them
// (conv then ssm in each row, rows interleaved) with a gap between rows.
struct States {
  explicit States(int rows) {
    RecurrentLayer l;
    l.conv_kernel = kK, l.conv_channels = kC, l.n_k_heads = kHk, l.n_v_heads = kHv, l.head_k_dim = kDk,
    l.head_v_dim = kDv;
    row_stride = l.conv_floats() + l.ssm_floats() + 7;
    mem.assign(size_t(row_stride) * size_t(rows), NAN);  // a row a step should not read stays NaN
    l.conv = mem.data();
    l.ssm = mem.data() + l.conv_floats();
    l.row_stride = row_stride;
    l.n_rows = rows;
    layer = l;
  }
  std::vector<float> mem;
  int64_t row_stride;
  RecurrentLayer layer;
};

// One step's part of a sequence: tokens [start, start + n) into state `row`.
struct Part {
  SeqData* seq;
  int start, n, row;
};

// Runs one step of the three ops (conv, delta rule) and checks every
// token's outputs against the reference.
void run_step(CpuBackend& be, const Params& p, States& st, const std::vector<Part>& parts, bool pad,
              double* max_err) {
  Batch b;
  b.reset(64, 1);
  const std::vector<int32_t> blocks = {0};
  std::vector<float> x, alpha, beta;
  for (const Part& part : parts) {
    std::vector<int32_t> toks(size_t(part.n), 1);
    b.add_sequence(toks, part.start, blocks, true, part.row);
    const SeqData& s = *part.seq;
    x.insert(x.end(), s.x.begin() + part.start * kC, s.x.begin() + (part.start + part.n) * kC);
    alpha.insert(alpha.end(), s.alpha.begin() + part.start * kHv, s.alpha.begin() + (part.start + part.n) * kHv);
    beta.insert(beta.end(), s.beta.begin() + part.start * kHv, s.beta.begin() + (part.start + part.n) * kHv);
  }
  if (pad) {
    b.pad_to(b.n_seqs() + 1);
    x.resize(x.size() + kC, 100.0f);
    alpha.resize(alpha.size() + kHv, 0.0f);
    beta.resize(beta.size() + kHv, 0.0f);
  }
  b.validate(1, std::vector<int32_t>{0}, st.layer.n_rows);
  const StepMeta m = be.upload_step(b);
  const int n = b.n_tokens();
  std::vector<float> conv(size_t(n) * kC, NAN), out(size_t(n) * kHv * kDv, NAN);
  Tensor tx = make_tensor(x.data(), DType::F32, kC, n), tw = make_tensor(const_cast<float*>(p.w.data()), DType::F32, kK, kC);
  Tensor tc = make_tensor(conv.data(), DType::F32, kC, n), to = make_tensor(out.data(), DType::F32, kHv * kDv, n);
  Tensor ta = make_tensor(alpha.data(), DType::F32, kHv, n), tb = make_tensor(beta.data(), DType::F32, kHv, n);
  Tensor tdt = make_tensor(const_cast<float*>(p.dt_bias.data()), DType::F32, kHv);
  Tensor tA = make_tensor(const_cast<float*>(p.a.data()), DType::F32, kHv);
  be.conv1d_silu_state(tx, tw, m, st.layer, tc);
  be.gated_delta_net(tc, ta, tb, tdt, tA, m, st.layer, 1e-6f, to);
  int row = 0;
  for (const Part& part : parts)
    for (int i = 0; i < part.n; ++i, ++row) {
      const int t = part.start + i;
      for (int c = 0; c < kC; ++c) {
        const double want = part.seq->conv_out[size_t(t * kC + c)];
        *max_err = std::max(*max_err, std::abs(conv[size_t(row * kC + c)] - want) / std::max(1.0, std::abs(want)));
      }
      for (int j = 0; j < kHv * kDv; ++j) {
        const double want = part.seq->out[size_t(t * kHv * kDv + j)];
        const double got = out[size_t(row * kHv * kDv + j)];
        ASSERT_TRUE(std::isfinite(got)) << "token " << t << " output " << j;
        *max_err = std::max(*max_err, std::abs(got - want) / std::max(1.0, std::abs(want)));
      }
    }
}

TEST(CpuRecurrentOps, WholeChunkedAndBatchedSequencesMatchTheReference) {
  std::mt19937 rng(60);
  CpuBackend be(2);
  const Params p = make_params(rng);
  SeqData a = make_seq(40, rng), b = make_seq(9, rng), c = make_seq(2, rng);
  for (SeqData* s : {&a, &b, &c}) reference(p, *s, 1e-6);
  double err = 0;
  {  // whole
    States st(3);
    run_step(be, p, st, {{&a, 0, 40, 1}}, false, &err);
  }
  // Chunks of every size from 1 to 7, then the rest (a fresh row each size).
  for (int chunk = 1; chunk <= 7; ++chunk) {
    States st(2);
    for (int start = 0; start < a.n; start += chunk) run_step(be, p, st, {{&a, start, std::min(chunk, a.n - start), 0}}, false, &err);
  }
  {  // batched: three sequences at different positions, with a padding one; row 1 never used
    States st(4);
    run_step(be, p, st, {{&a, 0, 5, 3}, {&b, 0, 1, 0}}, true, &err);
    run_step(be, p, st, {{&b, 1, 2, 0}, {&a, 5, 1, 3}, {&c, 0, 2, 2}}, true, &err);
    run_step(be, p, st, {{&a, 6, 34, 3}, {&b, 3, 6, 0}}, false, &err);
    for (int64_t i = 0; i < st.row_stride; ++i) EXPECT_TRUE(std::isnan(st.mem[size_t(st.row_stride + i)])) << i;
  }
  std::printf("[ recurrent] max relative error vs the double reference: %.3e\n", err);
  EXPECT_LT(err, 2e-5);
}

// Sequences restarting at position 0 in a row another sequence used start
// from the zero state: the row's old contents do not leak in.
TEST(CpuRecurrentOps, PositionZeroStartsFromTheZeroState) {
  std::mt19937 rng(61);
  CpuBackend be(1);
  const Params p = make_params(rng);
  SeqData a = make_seq(12, rng), b = make_seq(6, rng);
  reference(p, a, 1e-6);
  reference(p, b, 1e-6);
  States st(1);
  double err = 0;
  run_step(be, p, st, {{&a, 0, 12, 0}}, false, &err);
  run_step(be, p, st, {{&b, 0, 3, 0}}, false, &err);
  run_step(be, p, st, {{&b, 3, 3, 0}}, false, &err);
  EXPECT_LT(err, 2e-5);
}

TEST(CpuRecurrentOps, GatedRmsNormAndSigmoidMul) {
  std::mt19937 rng(62);
  CpuBackend be(2);
  const int rows = 5, hw = 16, heads = 3, n = hw * heads;
  auto x = randn(size_t(rows) * n, rng, 3.0f), z = randn(size_t(rows) * n, rng), w = randn(hw, rng);
  std::vector<float> out(x.size());
  Tensor tx = make_tensor(x.data(), DType::F32, n, rows), tz = make_tensor(z.data(), DType::F32, n, rows);
  Tensor tw = make_tensor(w.data(), DType::F32, hw), to = make_tensor(out.data(), DType::F32, n, rows);
  be.gated_rms_norm(tx, tw, tz, 1e-6f, to);
  double err = 0;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h) {
      double ss = 0;
      for (int i = 0; i < hw; ++i) ss += double(x[size_t(r * n + h * hw + i)]) * x[size_t(r * n + h * hw + i)];
      const double scale = 1.0 / std::sqrt(ss / hw + 1e-6);
      for (int i = 0; i < hw; ++i) {
        const size_t at = size_t(r * n + h * hw + i);
        const double want = x[at] * scale * w[size_t(i)] * silu_d(z[at]);
        err = std::max(err, std::abs(out[at] - want) / std::max(1.0, std::abs(want)));
      }
    }
  EXPECT_LT(err, 1e-6);
  // In place, as the model runs it.
  std::vector<float> y = x;
  Tensor ty = make_tensor(y.data(), DType::F32, n, rows);
  be.gated_rms_norm(ty, tw, tz, 1e-6f, ty);
  EXPECT_EQ(y, out);

  // sigmoid_mul: elementwise, and one gate value per row.
  auto g = randn(x.size(), rng), gs = randn(rows, rng);
  Tensor tg = make_tensor(g.data(), DType::F32, n, rows), tgs = make_tensor(gs.data(), DType::F32, 1, rows);
  be.sigmoid_mul(tx, tg, to);
  err = 0;
  for (size_t i = 0; i < x.size(); ++i) err = std::max(err, std::abs(out[i] - x[i] * sigmoid_d(g[i])));
  be.sigmoid_mul(tx, tgs, to);
  for (size_t i = 0; i < x.size(); ++i) err = std::max(err, std::abs(out[i] - x[i] * sigmoid_d(gs[i / size_t(n)])));
  EXPECT_LT(err, 1e-6);
  Tensor bad = make_tensor(g.data(), DType::F32, n - 1, rows);
  EXPECT_THROW(be.sigmoid_mul(tx, bad, to), Error);
}

// The batch's state checks: rows in range, one per sequence, copies within
// the rows of the step's sequences.
TEST(CpuRecurrentOps, BatchStateRowsAreValidated) {
  Batch b;
  b.reset(16, 2);
  const std::vector<int32_t> blocks = {0, 1};
  const std::vector<int32_t> toks = {1, 2};
  b.add_sequence(toks, 0, blocks, true, 0);
  b.add_sequence(toks, 4, blocks, true, 2);
  const std::vector<int32_t> full = {0};
  EXPECT_NO_THROW(b.validate(2, full, 3));
  EXPECT_THROW(b.validate(2, full, 2), Error);  // row 2 out of range
  b.state_loads.push_back({1, 2});
  EXPECT_NO_THROW(b.validate(2, full, 3));
  b.state_loads.push_back({2, 1});  // into a row no sequence of the step uses
  EXPECT_THROW(b.validate(2, full, 3), Error);
  b.state_loads.pop_back();
  b.state_slots[1] = 0;  // two sequences on one row
  EXPECT_THROW(b.validate(2, full, 3), Error);
}

}  // namespace
}  // namespace rf
