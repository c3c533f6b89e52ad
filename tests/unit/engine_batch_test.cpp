// Engine batch invariance on the CPU with stories260K: every request's
// output (greedy or seeded sampling) is the same alone and among 32
// concurrent others under a KV cache small enough to force preemption,
// with chunked prefill and prefix-cache hits; the golden prompts still give
// the golden tokens. Prefix-cache accounting (hits reported per request and
// in the metrics) and seeded sampling reproducibility.
#include <gtest/gtest.h>

#include <random>

#include "unit/engine_test_util.h"

namespace rf {
namespace {

using test::config;
using test::greedy;
using test::Output;

std::vector<int32_t> random_tokens(std::mt19937& rng, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = 3 + int32_t(rng() % 509);
  return v;
}

Request sampled(std::vector<int32_t> prompt, int32_t max_tokens, uint64_t seed) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.9f;
  r.sampling.top_k = 40;
  r.sampling.top_p = 0.95f;
  r.sampling.seed = seed;
  return r;
}

// The golden prompt first, then 32 others: random greedy ones, ones sharing
// a 40-token prefix, seeded sampling with penalties, and the other golden
// prompts.
std::vector<Request> workload(const std::vector<test::Golden>& golden) {
  std::mt19937 rng(7);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const auto shared = random_tokens(rng, 40);
  std::vector<Request> reqs = {greedy(golden[0].prompt_tokens, 64)};
  for (int i = 0; i < 32; ++i) {
    switch (i % 4) {
      case 0: reqs.push_back(greedy(random_tokens(rng, uni(1, 60)), uni(1, 80))); break;
      case 1: {
        auto p = shared;
        const auto tail = random_tokens(rng, uni(0, 10));
        p.insert(p.end(), tail.begin(), tail.end());
        reqs.push_back(greedy(p, uni(5, 40)));
        break;
      }
      case 2: {
        Request r = sampled(random_tokens(rng, uni(1, 60)), uni(10, 60), 1000 + uint64_t(i));
        if (i % 8 == 2) r.sampling.repetition_penalty = 1.3f, r.sampling.frequency_penalty = 0.5f;
        reqs.push_back(r);
        break;
      }
      default: reqs.push_back(greedy(golden[size_t(1 + i / 4 % 3)].prompt_tokens, 64)); break;
    }
  }
  return reqs;
}

// Each request on its own, one after another, with no prefix cache.
std::vector<Output> run_alone(test::Stories& st, const std::vector<Request>& reqs) {
  auto engine = st.engine(config(64, 16, 256, 1, false));
  std::vector<Output> out;
  for (const auto& r : reqs) out.push_back(test::run_one(*engine, r));
  test::expect_idle(*engine);
  return out;
}

TEST(EngineBatch, SameOutputAloneAndAmong32UnderPreemption) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto golden = test::read_golden();
  const auto reqs = workload(golden);
  const auto alone = run_alone(st, reqs);

  // 30 blocks of 16 tokens (480) for 33 requests of up to 140 tokens; 64
  // tokens per step, so long prompts are chunked beside decode tokens.
  auto engine = st.engine(config(30, 16, 64, 64, true));
  std::vector<RequestHandle> hs;
  // Most arrive at once; the rest a few steps later (so they can hit blocks
  // cached by the first wave).
  for (size_t i = 0; i < 24; ++i) hs.push_back(engine->submit(reqs[(i + 1) % 24]));
  for (int s = 0; s < 6; ++s) engine->step();
  for (size_t i = 24; i < reqs.size(); ++i) hs.push_back(engine->submit(reqs[i]));
  engine->run_until_idle();
  // hs[i] is reqs[order[i]].
  std::vector<size_t> order;
  for (size_t i = 0; i < 24; ++i) order.push_back((i + 1) % 24);
  for (size_t i = 24; i < reqs.size(); ++i) order.push_back(i);

  EXPECT_GT(engine->metrics().preemptions.load(), 0u);
  EXPECT_GT(engine->metrics().prefix_cache_hit_tokens.load(), 0u);
  uint64_t cached = 0;
  for (size_t i = 0; i < hs.size(); ++i) {
    const size_t k = order[i];
    Output o;
    test::read_events(*hs[i], o, false);
    ASSERT_TRUE(o.finished) << "request " << k;
    EXPECT_EQ(o.reason, alone[k].reason) << "request " << k;
    EXPECT_EQ(o.tokens, alone[k].tokens) << "request " << k;
    EXPECT_EQ(o.text, alone[k].text) << "request " << k;
    EXPECT_LT(o.cached_tokens, o.prompt_tokens) << "request " << k;
    cached += uint64_t(o.cached_tokens);
  }
  EXPECT_EQ(cached, engine->metrics().prefix_cache_hit_tokens.load());
  // The golden prompts keep their golden tokens, alone and batched.
  EXPECT_EQ(alone[0].tokens, golden[0].greedy_tokens);
  for (size_t k = 4; k < reqs.size(); k += 4)
    EXPECT_EQ(alone[k].tokens, golden[1 + (k - 1) / 4 % 3].greedy_tokens) << k;
  test::expect_idle(*engine);
}

TEST(EngineBatch, PrefixCacheHitsAreCountedAndChangeNothing) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  std::mt19937 rng(3);
  const auto prompt = random_tokens(rng, 40);
  auto engine = st.engine(config(32));
  const Output first = test::run_one(*engine, greedy(prompt, 20));
  EXPECT_EQ(first.cached_tokens, 0);
  const Output again = test::run_one(*engine, greedy(prompt, 20));
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(again.cached_tokens, 32);  // 2 full blocks; the 3rd holds the last prompt token
  EXPECT_EQ(engine->metrics().prefix_cache_hit_tokens.load(), 32u);
  EXPECT_EQ(engine->metrics().prefix_cache_queried_tokens.load(), 80u);
  // A follow-up turn with the whole first exchange as its prefix: 59 of its
  // tokens have KV (40 prompt + 19 generated), 3 full blocks of them.
  auto turn2 = prompt;
  turn2.insert(turn2.end(), first.tokens.begin(), first.tokens.end());
  turn2.push_back(13);
  const Output third = test::run_one(*engine, greedy(turn2, 5));
  EXPECT_EQ(third.cached_tokens, 48);
  auto fresh = st.engine(config(32, 16, 256, 64, false));
  EXPECT_EQ(test::run_one(*fresh, greedy(turn2, 5)).tokens, third.tokens);
  test::expect_idle(*engine);
  test::expect_idle(*fresh);
}

TEST(EngineBatch, SeededSamplingIsReproducible) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto g = test::read_golden()[0];
  auto engine = st.engine(config(64));
  const Output a = test::run_one(*engine, sampled(g.prompt_tokens, 48, 42));
  const Output b = test::run_one(*engine, sampled(g.prompt_tokens, 48, 42));
  const Output c = test::run_one(*engine, sampled(g.prompt_tokens, 48, 43));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.text, b.text);
  EXPECT_NE(a.tokens, c.tokens);
  EXPECT_NE(a.tokens, std::vector<int32_t>(g.greedy_tokens.begin(), g.greedy_tokens.begin() + 48));
  // The same seeds side by side in one batch, beside other seeds.
  std::vector<Request> reqs;
  for (uint64_t seed : {42, 7, 43, 42, 9}) reqs.push_back(sampled(g.prompt_tokens, 48, seed));
  const auto outs = test::run_all(*engine, reqs);
  EXPECT_EQ(outs[0].tokens, a.tokens);
  EXPECT_EQ(outs[3].tokens, a.tokens);
  EXPECT_EQ(outs[2].tokens, c.tokens);
  test::expect_idle(*engine);
}

}  // namespace
}  // namespace rf
