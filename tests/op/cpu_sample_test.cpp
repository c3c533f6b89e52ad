// CPU sampling against its definition: greedy is the argmax; a draw is a
// pure function of (seed, counter); top-k / top-p / min-p restrict the
// support exactly; penalties follow their formulas; draws follow the
// softmax distribution; logprobs are the raw log-softmax.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "backend/cpu/cpu_backend.h"

namespace rf {
namespace {

SampleResult sample(const std::vector<float>& logits, SamplingParams p, uint64_t counter = 0,
                    const std::vector<PenaltyToken>& pen = {}) {
  SampleRow row;
  row.params = p;
  row.rng_counter = counter;
  row.penalty_count = int32_t(pen.size());
  SampleResult r;
  cpu::sample_row(logits.data(), int32_t(logits.size()), row, pen.data(), r);
  return r;
}

std::vector<float> random_logits(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(CpuSample, GreedyIsArgmaxAndLogprobIsLogSoftmax) {
  auto l = random_logits(1000, 1);
  SamplingParams p;
  p.temperature = 0;
  p.top_logprobs = 5;
  const auto r = sample(l, p);
  const int32_t best = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  EXPECT_EQ(r.token, best);
  double z = 0;
  for (float x : l) z += std::exp(double(x));
  EXPECT_NEAR(r.logprob, double(l[size_t(best)]) - std::log(z), 1e-5);
  ASSERT_EQ(r.top.size(), 5u);
  EXPECT_EQ(r.top[0].first, best);
  for (size_t i = 1; i < r.top.size(); ++i) EXPECT_GE(r.top[i - 1].second, r.top[i].second);
}

TEST(CpuSample, SameSeedAndCounterSameToken) {
  auto l = random_logits(500, 2);
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::set<int32_t> seen;
  for (uint64_t c = 0; c < 50; ++c) {
    const auto a = sample(l, p, c), b = sample(l, p, c);
    EXPECT_EQ(a.token, b.token);
    seen.insert(a.token);
  }
  EXPECT_GT(seen.size(), 5u);  // the counter moves the draw
}

TEST(CpuSample, TopKTopPMinPRestrictTheSupport) {
  std::vector<float> l = {5.0f, 4.0f, 3.0f, 0.0f, -1.0f, 2.5f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  for (uint64_t c = 0; c < 200; ++c) {
    const int32_t t = sample(l, p, c).token;
    EXPECT_TRUE(t == 0 || t == 1) << t;
  }
  p.top_k = 0;
  p.top_p = 0.5f;  // softmax(5,4,...) puts ~0.6 on token 0 alone
  for (uint64_t c = 0; c < 100; ++c) EXPECT_EQ(sample(l, p, c).token, 0);
  p.top_p = 1.0f;
  p.min_p = 0.3f;  // keep p >= 0.3 * p(token 0): tokens 0 and 1 (e^-1 = 0.37)
  std::set<int32_t> seen;
  for (uint64_t c = 0; c < 300; ++c) seen.insert(sample(l, p, c).token);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
}

TEST(CpuSample, DrawsFollowTheSoftmax) {
  std::vector<float> l = {1.0f, 0.0f, -0.5f, 2.0f};
  SamplingParams p;
  p.temperature = 0.7f;
  p.seed = 7;
  std::vector<double> want(l.size());
  double z = 0;
  for (size_t i = 0; i < l.size(); ++i) z += (want[i] = std::exp(double(l[i]) / 0.7));
  std::vector<int> counts(l.size(), 0);
  const int n = 20000;
  for (int c = 0; c < n; ++c) counts[size_t(sample(l, p, uint64_t(c)).token)]++;
  for (size_t i = 0; i < l.size(); ++i) {
    const double pi = want[i] / z;
    const double sd = std::sqrt(n * pi * (1 - pi));
    EXPECT_NEAR(counts[i], n * pi, 5 * sd) << "token " << i;
  }
}

TEST(CpuSample, PenaltiesFollowTheirFormulas) {
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.5f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.25f;
  p.frequency_penalty = 0.5f;
  std::vector<PenaltyToken> pen = {{0, 0, 1}, {1, 0, 1}, {2, 3, 1}};
  std::vector<float> got = l;
  apply_penalties(got.data(), p, pen.data(), int32_t(pen.size()));
  EXPECT_FLOAT_EQ(got[0], 1.0f);                    // positive logit divided
  EXPECT_FLOAT_EQ(got[1], -4.0f);                   // negative logit multiplied
  EXPECT_FLOAT_EQ(got[2], 0.5f - 0.25f - 1.5f);     // divided, then presence + 3 x frequency
  EXPECT_FLOAT_EQ(got[3], 0.5f);                    // untouched
  // Greedy sampling sees the penalised logits; a banned token is never drawn.
  p.temperature = 0;
  EXPECT_EQ(sample(l, p, 0, pen).token, 0);
  std::vector<PenaltyToken> ban = {{0, 0, 0, 1}};
  SamplingParams g;
  g.temperature = 0;
  EXPECT_EQ(sample(l, g, 0, ban).token, 2);
}

TEST(CpuSample, BiasesComeBeforePenaltiesAndBans) {
  const std::vector<float> l = {2.0f, -2.0f, 0.5f, 0.5f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  // Token 0: a bias entry after its penalty entry — still biased first, then divided.
  // Token 1: biased up; token 3: biased and banned (the ban wins).
  std::vector<PenaltyToken> pen = {{0, 0, 1}, {0, 0, 0, 0, 4.0f}, {1, 0, 0, 0, 3.0f}, {3, 0, 0, 0, 50.0f}, {3, 0, 0, 1}};
  std::vector<float> got = l;
  apply_penalties(got.data(), p, pen.data(), int32_t(pen.size()));
  EXPECT_FLOAT_EQ(got[0], (2.0f + 4.0f) / 2.0f);
  EXPECT_FLOAT_EQ(got[1], 1.0f);
  EXPECT_FLOAT_EQ(got[2], 0.5f);  // untouched
  EXPECT_EQ(got[3], -INFINITY);
  SamplingParams g;
  g.temperature = 0;
  const std::vector<PenaltyToken> up = {{2, 0, 0, 0, 1.75f}};
  EXPECT_EQ(sample(l, g, 0, up).token, 2);  // 0.5 + 1.75 > 2
  // Its logprob is of the model's own distribution, without the bias.
  double z = 0;
  for (float x : l) z += std::exp(double(x));
  EXPECT_NEAR(sample(l, g, 0, up).logprob, 0.5 - std::log(z), 1e-6);
}

TEST(CpuSample, BackendSamplesRowsWithTheirOwnPenalties) {
  CpuBackend be(2);
  std::vector<float> logits = {1, 5, 2, 9, 0, 3};  // two rows of vocab 3
  Tensor t = make_tensor(logits.data(), DType::F32, 3, 2);
  std::vector<SampleRow> rows(2);
  rows[0].params.temperature = 0;
  rows[1].params.temperature = 0;
  rows[1].penalty_offset = 0;
  rows[1].penalty_count = 1;
  std::vector<PenaltyToken> pen = {{0, 0, 0, 1}};
  std::vector<SampleResult> out;
  be.sample(t, rows, pen, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].token, 1);
  EXPECT_EQ(out[1].token, 2);  // token 0 (logit 9) banned in row 1 only
}

}  // namespace
}  // namespace rf
