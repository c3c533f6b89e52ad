// The engine over 2 tensor-parallel CPU ranks (stories260K, in-process
// collectives): a busy mix of greedy and sampled requests (top-k, top-p,
// min-p, penalties, logit biases, logprobs with alternatives) gives the
// tokens of the one-rank engine, and the logprobs to float rounding; the
// KV cache holds the same blocks, each rank its KV heads of them. Sliding
// window groups and prefix-cache hits (tiny-gemma3) too, and a rank failing
// mid-step fails the step without hanging.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <random>

#include "backend/loopback_comm.h"
#include "model/temp_model.h"
#include "unit/engine_test_util.h"

namespace rf {
namespace {

std::vector<Request> workload() {
  std::mt19937 rng(5);
  std::vector<Request> reqs;
  for (int i = 0; i < 12; ++i) {
    Request r;
    for (int t = 0, n = 1 + int(rng() % 40); t < n; ++t) r.prompt.push_back(3 + int32_t(rng() % 509));
    r.max_tokens = 10 + int32_t(rng() % 30);
    SamplingParams& p = r.sampling;
    p.seed = 100 + uint64_t(i);
    switch (i % 6) {
      case 0: p.temperature = 0; break;
      case 1: p.temperature = 0.9f, p.top_k = 40, p.top_p = 0.95f; break;
      case 2: p.temperature = 1.1f, p.min_p = 0.05f, p.repetition_penalty = 1.2f; break;
      case 3: p.temperature = 0.7f, p.top_p = 0.5f, p.presence_penalty = 0.3f, p.frequency_penalty = 0.4f; break;
      case 4: p.temperature = 1.0f; r.logit_bias = {{13, 3.0f}, {400, -100.0f}}; break;
      default: p.temperature = 0.8f, p.top_k = 5; break;
    }
    if (i % 4 == 1) {
      r.logprobs = true;
      p.top_logprobs = 3;
    }
    reqs.push_back(r);
  }
  return reqs;
}

TEST(EngineTensorParallel, TwoRanksGiveTheOneRankOutputs) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  const auto reqs = workload();
  test::Stories st;
  auto one = st.engine(test::config(64));
  const auto want = test::run_all(*one, reqs);

  CpuBackend b0(1), b1(1);
  LoopbackGroup group(2);
  Backend* backends[] = {&b0, &b1};
  Communicator* comms[] = {&group.rank(0), &group.rank(1)};
  auto model = Model::load(test::testdata_path("stories260K.gguf"), backends, false);
  Engine two(*model, st.tok(), backends, comms, test::config(64));
  EXPECT_EQ(two.tensor_parallel_size(), 2);
  EXPECT_EQ(two.num_blocks(), one->num_blocks());
  const auto got = test::run_all(two, reqs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].text, want[i].text) << "request " << i;
    EXPECT_EQ(got[i].reason, want[i].reason) << "request " << i;
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size()) << "request " << i;
    for (size_t t = 0; t < want[i].logprobs.size(); ++t) {
      EXPECT_NEAR(got[i].logprobs[t].logprob, want[i].logprobs[t].logprob, 1e-4) << "request " << i;
      ASSERT_EQ(got[i].logprobs[t].top.size(), want[i].logprobs[t].top.size());
      for (size_t j = 0; j < want[i].logprobs[t].top.size(); ++j)
        EXPECT_EQ(got[i].logprobs[t].top[j].first, want[i].logprobs[t].top[j].first) << "request " << i;
    }
  }
  test::expect_idle(two);
}

// Sliding-window KV groups at 2 ranks (synthetic tiny-gemma3, window 16,
// f32): long prompts in chunks, generations past several windows, a KV
// budget that needs the window releases, a prefix-cache hit — the tokens of
// the one-rank engine.
TEST(EngineTensorParallel, WindowGroupsAndPrefixHitsAtTwoRanks) {
  test::TempModel tm("tiny-gemma3", "f32", 11);
  CpuBackend one_b(1), b0(1), b1(1);
  LoopbackGroup group(2);
  Backend* one[] = {&one_b};
  Backend* two[] = {&b0, &b1};
  Communicator* comms[] = {&group.rank(0), &group.rank(1)};
  auto m1 = Model::load(tm.path(), one, false);
  auto m2 = Model::load(tm.path(), two, false);
  auto tok = Tokenizer::from_gguf(m1->file());
  std::mt19937 rng(9);
  std::vector<Request> reqs;
  std::vector<int32_t> shared;
  for (int i = 0; i < 40; ++i) shared.push_back(3 + int32_t(rng() % 1000));
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.prompt = shared;
    for (int t = 0; t < 10 * i; ++t) r.prompt.push_back(3 + int32_t(rng() % 1000));
    r.max_tokens = 50;
    r.ignore_eos = true;
    r.sampling.temperature = i % 2 ? 0.8f : 0.0f;
    r.sampling.seed = uint64_t(i);
    reqs.push_back(r);
  }
  // 24 blocks of 16 tokens for 4 sequences of up to 130 tokens in 3 KV groups:
  // enough only because window groups give blocks back.
  const EngineConfig cfg = test::config(24, 16, 32, 4, true);
  Engine e1(*m1, *tok, one, {}, cfg), e2(*m2, *tok, two, comms, cfg);
  const auto want = test::run_all(e1, reqs);
  const auto got = test::run_all(e2, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].cached_tokens, want[i].cached_tokens) << "request " << i;
  }
  EXPECT_GT(e2.metrics().kv_window_releases.load(), 0u);
  EXPECT_GT(e2.metrics().prefix_cache_hit_tokens.load(), 0u);
  EXPECT_EQ(e2.metrics().preemptions.load(), e1.metrics().preemptions.load());
}

// A rank whose backend fails in the middle of a step (the other rank is
// then waiting in an all-reduce): the step fails, its request finishes with
// an error, and nothing hangs.
class FailingCpu final : public CpuBackend {
 public:
  FailingCpu() : CpuBackend(1) {}
  std::atomic<int> matmuls_left{1 << 30};
  Handoff matmul(const Tensor& x, const Tensor& w, Tensor& out, const Handoff& x_in = {}) override {
    if (--matmuls_left < 0) fail("injected failure");
    return CpuBackend::matmul(x, w, out, x_in);
  }
};

TEST(EngineTensorParallel, ARankFailingMidStepFailsTheStepWithoutHanging) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  CpuBackend b0(1);
  FailingCpu b1;
  LoopbackGroup group(2);
  Backend* backends[] = {&b0, &b1};
  Communicator* comms[] = {&group.rank(0), &group.rank(1)};
  auto model = Model::load(test::testdata_path("stories260K.gguf"), backends, false);
  Engine two(*model, st.tok(), backends, comms, test::config(64));
  b1.matmuls_left = 3;  // inside the first layer of the next step
  const auto out = test::run_all(two, {test::greedy({1, 400, 21}, 8)});
  EXPECT_EQ(out[0].reason, FinishReason::Error);
  EXPECT_NE(out[0].error.find("injected failure"), std::string::npos) << out[0].error;
  // The group is gone: later requests fail at once, naming the first error.
  const auto later = test::run_all(two, {test::greedy({1, 400, 21}, 8)});
  EXPECT_EQ(later[0].reason, FinishReason::Error);
  EXPECT_NE(later[0].error.find("earlier step"), std::string::npos) << later[0].error;
  EXPECT_NE(later[0].error.find("injected failure"), std::string::npos) << later[0].error;
}

}  // namespace
}  // namespace rf
