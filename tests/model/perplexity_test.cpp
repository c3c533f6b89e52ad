// What `rocmforge perplexity` computes: the statistics (log-softmax, PPL and
// its error, KL divergence, same top token) against values worked out by
// hand in double, and Evaluator::score — every position's logits of a text
// fed in steps of several tokens with several logit rows — against the
// evaluator's one-prefix-at-a-time run (first_step_logits of each prefix),
// on stories260K and on a sliding-window model (tiny-gemma2).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "model/evaluator.h"
#include "model/model.h"
#include "model/perplexity.h"
#include "testdata.h"

namespace rf {
namespace {

TEST(Perplexity, StatisticsMatchHandComputedValues) {
  std::vector<double> lp;
  log_softmax(std::vector<float>{1.0f, 2.0f, 3.0f}, lp);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  ASSERT_EQ(lp.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(lp[size_t(i)], double(i + 1) - lse, 1e-12);
  // Large logits do not overflow.
  log_softmax(std::vector<float>{1000.0f, 1000.0f}, lp);
  EXPECT_NEAR(lp[0], -std::log(2.0), 1e-12);

  PerplexityStats s;
  for (double nll : {1.0, 2.0, 3.0}) s.add(nll);
  EXPECT_EQ(s.count(), 3);
  EXPECT_NEAR(s.ppl(), std::exp(2.0), 1e-9);
  // Sample variance 1, standard error of the mean sqrt(1/3), times PPL.
  EXPECT_NEAR(s.ppl_error(), std::exp(2.0) * std::sqrt(1.0 / 3.0), 1e-9);

  KlStats kl;
  const std::vector<float> base = {float(std::log(0.5)), float(std::log(0.25)), float(std::log(0.25))};
  const std::vector<double> same = {std::log(0.5), std::log(0.25), std::log(0.25)};
  const std::vector<double> other = {std::log(0.25), std::log(0.5), std::log(0.25)};
  kl.add(base, same);
  kl.add(base, other);
  EXPECT_EQ(kl.count(), 2);
  EXPECT_NEAR(kl.quantile(0.0), 0.0, 1e-7);
  // 0.5 ln 2 + 0.25 ln 0.5 = 0.25 ln 2.
  EXPECT_NEAR(kl.max(), 0.25 * std::log(2.0), 1e-7);
  EXPECT_NEAR(kl.mean(), 0.125 * std::log(2.0), 1e-7);
  EXPECT_DOUBLE_EQ(kl.same_top(), 0.5);
}

void expect_score_matches_prefix_runs(const std::string& rel, int32_t chunk) {
  RF_REQUIRE_TESTDATA(rel);
  CpuBackend backend(2);
  auto model = Model::load(test::testdata_path(rel), backend, false);
  const int32_t vocab = model->config().n_vocab;
  std::vector<int32_t> text;
  for (int32_t i = 0; i < 40; ++i) text.push_back(int32_t((i * 37 + 11) % vocab));
  const int32_t first = 13;
  EvalOptions eo;
  eo.max_prompt = eo.max_context = int32_t(text.size());
  eo.prefill_chunk = chunk;
  eo.max_logits = chunk;
  Evaluator scorer(*model, backend, eo);
  std::vector<std::vector<float>> rows;
  std::vector<int32_t> seen;
  scorer.score(text, first, [&](int32_t j, std::span<const float> logits) {
    seen.push_back(j);
    rows.emplace_back(logits.begin(), logits.end());
  });
  ASSERT_EQ(int32_t(rows.size()), int32_t(text.size()) - first) << rel;
  for (size_t k = 0; k < seen.size(); ++k) ASSERT_EQ(seen[k], first + int32_t(k)) << rel;
  EvalOptions one;
  one.max_prompt = one.max_context = int32_t(text.size());
  Evaluator prefix(*model, backend, one);
  for (int32_t j = first; j < int32_t(text.size()); j += 5) {
    const EvalResult r = prefix.run(std::span<const int32_t>(text.data(), size_t(j) + 1), 0, {});
    const std::vector<float>& got = rows[size_t(j - first)];
    double top = 0, err = 0;
    for (int32_t i = 0; i < vocab; ++i) {
      top = std::max(top, std::abs(double(r.first_step_logits[size_t(i)])));
      err = std::max(err, std::abs(double(got[size_t(i)]) - double(r.first_step_logits[size_t(i)])));
    }
    EXPECT_LE(err, 1e-5 * top) << rel << " position " << j << ", steps of " << chunk;
  }
}

TEST(Perplexity, ScoreGivesEachPrefixsLogits) {
  for (int32_t chunk : {1, 6, 39}) expect_score_matches_prefix_runs("stories260K.gguf", chunk);
}

TEST(Perplexity, ScoreGivesEachPrefixsLogitsWithSlidingWindowLayers) {
  for (int32_t chunk : {4, 39}) expect_score_matches_prefix_runs("arch/tiny-gemma2.gguf", chunk);
}

}  // namespace
}  // namespace rf
