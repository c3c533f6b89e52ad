// Speculative decoding (n-gram proposals) through the whole engine on the
// CPU with stories260K: greedy and seeded-sampling output is token for token
// the same with and without speculation — alone, and in a busy batch that
// mixes speculating and non-speculating sequences under preemption and
// chunked prefill; max_tokens, stop strings and stop tokens cut a verified
// run exactly where plain decoding stops; rollback leaves no KV block
// behind and registers none holding a rejected token in the prefix cache;
// the sampled distribution at a verified position is the plain sampler's
// (chi-square); opt-outs do not speculate; hybrid models refuse.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <random>

#include "unit/engine_test_util.h"

namespace rf {
namespace {

using test::config;
using test::greedy;
using test::Output;

EngineConfig with_spec(EngineConfig c, int32_t draft_max = 4, int32_t ngram_max = 3) {
  c.speculative.type = SpecType::Ngram;
  c.speculative.draft_max = draft_max;
  c.speculative.ngram_min = 1;  // (default 2) single-token matches too: more proposals, more of them rejected
  c.speculative.ngram_max = ngram_max;
  return c;
}

Request sampled(std::vector<int32_t> prompt, int32_t max_tokens, uint64_t seed) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.8f;
  r.sampling.top_k = 40;
  r.sampling.top_p = 0.95f;
  r.sampling.seed = seed;
  return r;
}

void expect_same(const Output& got, const Output& want, const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.text, want.text) << what;
  EXPECT_EQ(got.reason, want.reason) << what;
  EXPECT_EQ(got.completion_tokens, want.completion_tokens) << what;
}

// Proposals were verified, some accepted and some rejected (so rollback ran).
void expect_speculated(const Engine& e) {
  const EngineMetrics& m = e.metrics();
  EXPECT_GT(m.spec_drafts.load(), 0u);
  EXPECT_GT(m.spec_accepted_tokens.load(), 0u);
  EXPECT_LT(m.spec_accepted_tokens.load(), m.spec_draft_tokens.load());
}

TEST(EngineSpeculative, GreedySameWithAndWithout) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  std::vector<Request> reqs;
  for (const auto& g : test::read_golden()) reqs.push_back(greedy(g.prompt_tokens, 100));
  for (auto [draft_max, ngram_max] : {std::pair{4, 3}, std::pair{8, 1}, std::pair{2, 5}}) {
    auto plain = st.engine(config(128));
    auto spec = st.engine(with_spec(config(128), draft_max, ngram_max));
    for (size_t i = 0; i < reqs.size(); ++i)
      expect_same(test::run_one(*spec, reqs[i]), test::run_one(*plain, reqs[i]),
                  "prompt " + std::to_string(i) + ", draft_max " + std::to_string(draft_max));
    expect_speculated(*spec);
    EXPECT_EQ(plain->metrics().spec_drafts.load(), 0u);
    // Fewer steps than tokens: rounds did yield more than one token.
    EXPECT_LT(spec->metrics().steps.load(), plain->metrics().steps.load());
    EXPECT_GT(spec->metrics().spec_mean_acceptance_length(), 1.0);
    const std::string text = spec->metrics_text();
    for (const char* name : {"rocmforge_spec_decode_num_drafts_total ", "rocmforge_spec_decode_num_draft_tokens_total ",
                             "rocmforge_spec_decode_num_accepted_tokens_total ",
                             "rocmforge_spec_decode_mean_acceptance_length ", "rocmforge_spec_decode_acceptance_rate "})
      EXPECT_NE(text.find(std::string("\n") + name), std::string::npos) << name;
    test::expect_idle(*spec);
  }
}

// Greedy, seeded sampling with and without penalties, logprobs, min_tokens
// and opted-out requests together, under preemption and chunked prefill,
// each the same as alone without speculation.
TEST(EngineSpeculative, MixedBatchUnderPreemptionSameAsAlone) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto golden = test::read_golden();
  std::mt19937 rng(11);
  std::vector<Request> reqs;
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> p = golden[size_t(i) % golden.size()].prompt_tokens;
    for (int j = i % 5; j > 0; --j) p.push_back(3 + int32_t(rng() % 500));
    Request r = i % 3 == 0 ? greedy(p, 40 + i) : sampled(p, 30 + i, 500 + uint64_t(i));
    if (i % 6 == 1) r.sampling.repetition_penalty = 1.2f, r.sampling.frequency_penalty = 0.3f;
    if (i % 6 == 2) r.sampling.presence_penalty = 0.5f;
    if (i % 4 == 3) r.speculative = false;
    if (i % 7 == 4) r.logprobs = true, r.sampling.top_logprobs = 3;
    if (i % 8 == 5) r.min_tokens = 20;
    reqs.push_back(r);
  }
  std::vector<Output> alone;
  {
    auto plain = st.engine(config(64, 16, 256, 1, false));
    for (const auto& r : reqs) alone.push_back(test::run_one(*plain, r));
  }
  // 40 blocks of 16 for 24 sequences of up to ~110 tokens, 64 tokens a step.
  auto spec = st.engine(with_spec(config(40, 16, 64, 24)));
  const auto out = test::run_all(*spec, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    expect_same(out[i], alone[i], "request " + std::to_string(i));
    ASSERT_EQ(out[i].logprobs.size(), alone[i].logprobs.size());
    for (size_t j = 0; j < out[i].logprobs.size(); ++j) {
      EXPECT_NEAR(out[i].logprobs[j].logprob, alone[i].logprobs[j].logprob, 1e-4);
      EXPECT_EQ(out[i].logprobs[j].top.size(), 3u);
    }
  }
  EXPECT_GT(spec->metrics().preemptions.load(), 0u);
  expect_speculated(*spec);
  test::expect_idle(*spec);
}

TEST(EngineSpeculative, MaxTokensAndStopsCutWherePlainDecodingStops) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto golden = test::read_golden();
  auto plain = st.engine(config(128));
  auto spec = st.engine(with_spec(config(128), 6));
  const std::vector<int32_t> prompt = golden[0].prompt_tokens;
  const Output full = test::run_one(*plain, greedy(prompt, 80));
  ASSERT_EQ(full.tokens.size(), 80u);
  for (int32_t n = 1; n <= 40; ++n) {
    const Output o = test::run_one(*spec, greedy(prompt, n));
    EXPECT_EQ(o.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + n)) << "max_tokens " << n;
    EXPECT_EQ(o.reason, FinishReason::Length);
    EXPECT_EQ(o.completion_tokens, n);
  }
  // Stop strings: every word of the plain text from the 3rd on, each its own request.
  std::vector<std::string> stops;
  for (size_t at = full.text.find(' ', 10); at != std::string::npos && stops.size() < 30; at = full.text.find(' ', at + 1)) {
    const size_t end = full.text.find(' ', at + 1);
    if (end != std::string::npos && end > at + 2) stops.push_back(full.text.substr(at, end - at));
  }
  ASSERT_GE(stops.size(), 10u);
  for (const std::string& s : stops) {
    Request r = greedy(prompt, 80);
    r.stop = {s};
    expect_same(test::run_one(*spec, r), test::run_one(*plain, r), "stop '" + s + "'");
  }
  // Stop tokens: each of the output's tokens from the 5th on.
  for (size_t i = 4; i < 40; i += 3) {
    Request r = greedy(prompt, 80);
    r.stop_token_ids = {full.tokens[i]};
    expect_same(test::run_one(*spec, r), test::run_one(*plain, r), "stop token " + std::to_string(full.tokens[i]));
  }
  expect_speculated(*spec);
  test::expect_idle(*spec);
}

// A later prompt that extends a speculated sequence's output hits its
// cached blocks: their KV must be that of the accepted tokens (a block
// holding a rejected token registered under the accepted tokens' hash would
// change the output). Blocks of 4 tokens, so most rounds cross one.
TEST(EngineSpeculative, PrefixCacheHoldsNoRejectedToken) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto golden = test::read_golden();
  auto spec = st.engine(with_spec(config(256, 4), 6));
  auto plain = st.engine(config(256, 4, 256, 64, false));
  for (const auto& g : golden) {
    const Output a = test::run_one(*spec, greedy(g.prompt_tokens, 60));
    std::vector<int32_t> longer = g.prompt_tokens;
    longer.insert(longer.end(), a.tokens.begin(), a.tokens.begin() + 48);
    Request b = greedy(longer, 30);
    b.speculative = false;
    const Output hit = test::run_one(*spec, b);
    EXPECT_GT(hit.cached_tokens, int32_t(g.prompt_tokens.size()) + 8) << "the generated blocks were not reused";
    expect_same(hit, test::run_one(*plain, b), "prompt '" + g.prompt + "' extended");
  }
  expect_speculated(*spec);
  test::expect_idle(*spec);
}

// The first three generated tokens of many seeded requests against the
// plain sampler's probabilities. Sampling: temperature 1, top-k 3, so that
// p(t) is the softmax of the raw logprobs over the 3 best (the engine's own
// top_logprobs give them), and the joint is p(t1) p(t2 | t1) p(t3 | t1 t2).
// max_tokens 4 lets the step after t1 verify up to 2 proposed tokens: t2 is
// drawn at its first row, and t3 at its second whenever the first proposal
// was accepted (its KV then stands for t2) — so a wrong acceptance or
// rollback shows in t3's conditional distribution. Cells with fewer than 5
// expected draws are pooled; the threshold is the chi-square quantile of
// upper tail 1e-6 for the degrees of freedom left, so a correct engine fails
// with probability 1e-6 (and the seeds are fixed: it passes or fails the
// same way every run).
TEST(EngineSpeculative, SampledDistributionIsThePlainSamplers) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  auto plain = st.engine(config(256));
  auto top3 = [&](const std::vector<int32_t>& p) {
    Request r = greedy(p, 1);
    r.logprobs = true;
    r.sampling.top_logprobs = 3;
    const Output o = test::run_one(*plain, r);
    std::map<int32_t, double> probs;
    double z = 0;
    for (const auto& [t, lp] : o.logprobs.at(0).top) z += std::exp(double(lp));
    for (const auto& [t, lp] : o.logprobs.at(0).top) probs[t] = std::exp(double(lp)) / z;
    return probs;
  };
  // A golden prompt and some of the story it goes on with, cut where the
  // likely next tokens occur earlier in it (so the lookup proposes after
  // most first tokens): the first cut with all 3.
  std::vector<int32_t> prompt;
  int in_prompt = -1;
  for (const test::Golden& g : test::read_golden())
    for (size_t cut = 8; cut <= 48 && cut <= g.greedy_tokens.size() && in_prompt < 3; cut += 4) {
      std::vector<int32_t> p = g.prompt_tokens;
      p.insert(p.end(), g.greedy_tokens.begin(), g.greedy_tokens.begin() + long(cut));
      int n = 0;
      for (const auto& [t, prob] : top3(p)) n += std::find(p.begin(), p.end(), t) != p.end();
      if (n > in_prompt) prompt = p, in_prompt = n;
    }
  ASSERT_GE(in_prompt, 2) << "the likely first tokens are not in any prompt: nothing to look up";
  using Cell = std::array<int32_t, 3>;
  std::map<Cell, double> expected;  // joint probabilities
  for (const auto& [t1, p1] : top3(prompt)) {
    std::vector<int32_t> c1 = prompt;
    c1.push_back(t1);
    for (const auto& [t2, p2] : top3(c1)) {
      std::vector<int32_t> c2 = c1;
      c2.push_back(t2);
      for (const auto& [t3, p3] : top3(c2)) expected[{t1, t2, t3}] = p1 * p2 * p3;
    }
  }
  ASSERT_EQ(expected.size(), 27u);

  constexpr int kDraws = 8000;
  auto spec = st.engine(with_spec(config(512, 16, 2048, 64), 4, 3));
  std::map<Cell, int> seen;
  for (int from = 0; from < kDraws; from += 64) {
    std::vector<Request> reqs;
    for (int i = from; i < std::min(kDraws, from + 64); ++i) {
      Request r;
      r.prompt = prompt;
      r.max_tokens = 4;
      r.ignore_eos = true;
      r.sampling.temperature = 1.0f;
      r.sampling.top_k = 3;
      r.sampling.seed = 777 + uint64_t(i);
      reqs.push_back(r);
    }
    for (const Output& o : test::run_all(*spec, reqs)) {
      ASSERT_GE(o.tokens.size(), 3u);
      seen[{o.tokens[0], o.tokens[1], o.tokens[2]}]++;
    }
  }
  // Verification rounds both accepted and rejected proposals, in many requests.
  expect_speculated(*spec);
  EXPECT_GT(spec->metrics().spec_accepted_tokens.load(), uint64_t(kDraws / 10));
  double chi2 = 0, pooled_e = 0;
  int pooled_o = 0, cells = 0;
  for (const auto& [cell, p] : expected) {
    const double e = p * kDraws;
    const int o = seen.count(cell) ? seen[cell] : 0;
    if (e < 5) {
      pooled_e += e;
      pooled_o += o;
      continue;
    }
    chi2 += (o - e) * (o - e) / e;
    ++cells;
  }
  if (pooled_e > 0) {
    chi2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
    ++cells;
  }
  int outside = 0;  // draws outside the 27 cells: impossible under top-k 3
  for (const auto& [cell, n] : seen)
    if (!expected.count(cell)) outside += n;
  EXPECT_EQ(outside, 0);
  // Upper-tail 1e-6 quantiles of chi-square with 1..26 degrees of freedom.
  static constexpr double kQuantile[] = {23.93, 27.63, 30.66, 33.38, 35.89, 38.26, 40.52, 42.70, 44.81,
                                         46.86, 48.87, 50.83, 52.75, 54.64, 56.49, 58.32, 60.13, 61.91,
                                         63.68, 65.42, 67.15, 68.86, 70.55, 72.23, 73.89, 75.55};
  ASSERT_GE(cells, 2);
  EXPECT_LT(chi2, kQuantile[cells - 2]) << cells << " cells";
  std::printf("chi-square %.2f over %d cells (threshold %.2f)\n", chi2, cells, kQuantile[cells - 2]);
  test::expect_idle(*spec);
}

TEST(EngineSpeculative, OptedOutAndGrammarRequestsDoNotSpeculate) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  auto spec = st.engine(with_spec(config(128)));
  Request r = greedy(test::read_golden()[0].prompt_tokens, 60);
  r.speculative = false;
  const Output o = test::run_one(*spec, r);
  EXPECT_EQ(o.tokens.size(), 60u);
  EXPECT_EQ(spec->metrics().spec_drafts.load(), 0u);
  r.speculative = true;
  expect_same(test::run_one(*spec, r), o, "speculating");
  EXPECT_GT(spec->metrics().spec_drafts.load(), 0u);
  test::expect_idle(*spec);
}

TEST(EngineSpeculative, HybridModelsRefuseAtStartup) {
  RF_REQUIRE_TESTDATA("arch/tiny-qwen35.gguf");
  CpuBackend backend(1);
  auto model = Model::load(test::testdata_path("arch/tiny-qwen35.gguf"), backend, false);
  auto tok = Tokenizer::from_gguf(model->file());
  try {
    Engine e(*model, *tok, backend, with_spec(config(64)));
    FAIL() << "a hybrid model accepted speculative decoding";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recurrent layers"), std::string::npos) << e.what();
  }
}

// Other families (arch/tiny-*.gguf): greedy output with speculation equals
// plain decoding's, the golden prompts together in one batch with some
// requests opted out.
class EngineSpeculativeFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineSpeculativeFamily, GreedySameWithAndWithout) {
  const std::string arch = GetParam();
  RF_REQUIRE_TESTDATA("arch/tiny-" + arch + ".gguf");
  CpuBackend backend(2);
  auto model = Model::load(test::testdata_path("arch/tiny-" + arch + ".gguf"), backend, false);
  auto tok = Tokenizer::from_gguf(model->file());
  std::ifstream in(test::testdata_path("arch/tiny-" + arch + ".golden.jsonl"));
  std::vector<Request> reqs;  // each prompt twice, the second opted out
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) {
      Request r = greedy(nlohmann::json::parse(line)["prompt_tokens"].get<std::vector<int32_t>>(), 48);
      r.ignore_eos = true;
      reqs.push_back(r);
      r.speculative = false;
      reqs.push_back(r);
    }
  ASSERT_FALSE(reqs.empty());
  EngineConfig c = config(96, 16, 64, 16);
  Engine plain(*model, *tok, backend, c);
  Engine spec(*model, *tok, backend, with_spec(c, 5));
  const auto want = test::run_all(plain, reqs);
  const auto got = test::run_all(spec, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) expect_same(got[i], want[i], arch + " request " + std::to_string(i));
  EXPECT_GT(spec.metrics().spec_drafts.load(), 0u);
  test::expect_idle(spec);
}

INSTANTIATE_TEST_SUITE_P(Families, EngineSpeculativeFamily,
                         ::testing::Values("qwen2", "qwen3", "gemma2", "gemma3", "gemma4", "phi3", "glm4", "mixtral",
                                           "qwen3moe", "gpt-oss", "glm4moe"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace rf
