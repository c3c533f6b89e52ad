// The engine on the hybrid Qwen3.5 models (CPU, arch/tiny-qwen35*.gguf:
// Gated DeltaNet layers with a state slot per sequence beside the paged KV
// of the full-attention layers), against a reference without any cache
// (tests/model/runner.h: each prompt in one step, no prefix cache, no
// checkpoints): chunked prefill with prompts longer than a chunk; prefix
// hits restored from state checkpoints — a repeated prompt, second and
// third choices of a prompt submitted after its prefill (as the server's
// n > 1 does), a conversation's next turn — and preemption give the
// reference's tokens; checkpoints are bounded by their rows; a soak of
// mixed requests with cancellations leaves every slot, checkpoint row and
// block free.
#include <gtest/gtest.h>

#include <random>

#include "model/runner.h"
#include "unit/engine_test_util.h"

namespace rf {
namespace {

using test::greedy;
using test::Output;

class EngineHybrid : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = "arch/tiny-" + GetParam() + ".gguf";
    RF_REQUIRE_TESTDATA(path_);
    model_ = Model::load(test::testdata_path(path_), backend_, false);
    tok_ = Tokenizer::from_gguf(model_->file());
    // Its own backend: a backend's per-step scratch is sized for one engine.
    ref_ = std::make_unique<test::ModelRunner>(test::testdata_path(path_), ref_backend_, 256, 1, 64, 16);
  }
  std::unique_ptr<Engine> engine(int32_t num_blocks, int32_t chunk, int32_t max_seqs, bool prefix = true,
                                 int32_t checkpoints = -1) {
    EngineConfig c = test::config(num_blocks, 16, chunk, max_seqs, prefix);
    c.state_checkpoints = checkpoints;
    return std::make_unique<Engine>(*model_, *tok_, backend_, c);
  }
  std::vector<int32_t> random_prompt(int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = 3 + int32_t(rng_() % 500);
    return v;
  }
  static Request request(std::vector<int32_t> prompt, int32_t n) {
    Request r = greedy(std::move(prompt), n);
    r.ignore_eos = true;
    return r;
  }
  std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int n) { return ref_->greedy(prompt, n, -1); }

  std::string path_;
  CpuBackend backend_{2}, ref_backend_{2};
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<test::ModelRunner> ref_;
  std::mt19937 rng_{35};
};

TEST_P(EngineHybrid, ChunkedPrefillAndBatchingEqualTheReference) {
  const std::vector<std::vector<int32_t>> prompts = {random_prompt(70), random_prompt(5), random_prompt(33),
                                                     random_prompt(1)};
  std::vector<Request> reqs;
  for (const auto& p : prompts) reqs.push_back(request(p, 20));
  auto e = engine(64, 16, 4);  // chunks of 16 tokens: the 70-token prompt takes five steps
  ASSERT_NE(e->state_pool(), nullptr);
  const auto out = test::run_all(*e, reqs);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(out[i].tokens, reference(prompts[i], 20)) << "request " << i;
  test::expect_idle(*e);
}

TEST_P(EngineHybrid, PrefixHitsRestoreCheckpoints) {
  const auto prompt = random_prompt(45);
  const auto want = reference(prompt, 12);
  auto e = engine(64, 256, 4);
  const Output a = test::run_one(*e, request(prompt, 12));
  const Output b = test::run_one(*e, request(prompt, 12));
  EXPECT_EQ(a.tokens, want);
  EXPECT_EQ(b.tokens, want);
  EXPECT_EQ(a.cached_tokens, 0);
  EXPECT_EQ(b.cached_tokens, 32);  // (45 - 1) / 16 * 16: the prompt's checkpoint
  // The same with no prefix cache at all.
  auto plain = engine(64, 256, 4, false);
  EXPECT_EQ(test::run_one(*plain, request(prompt, 12)).tokens, want);
  EXPECT_EQ(plain->state_pool()->n_checkpoint_rows(), 0);
  test::expect_idle(*plain);

  // Second and third choices of a new prompt, submitted once its prefill
  // is done (the server's n > 1): each restores the prompt's state into its
  // own slot.
  const auto p2 = random_prompt(40);
  const auto want2 = reference(p2, 10);
  auto h1 = e->submit(request(p2, 10));
  while (e->step() && e->metrics().generation_tokens.load() < 12 + 12 + 1) {
  }
  auto h2 = e->submit(request(p2, 10));
  auto h3 = e->submit(request(p2, 10));
  e->run_until_idle();
  for (auto* h : {&h1, &h2, &h3}) {
    Output o;
    test::read_events(**h, o, false);
    EXPECT_EQ(o.tokens, want2);
    if (h != &h1) EXPECT_EQ(o.cached_tokens, 32);
  }

  // The conversation's next turn: the first prompt, its reply, more text.
  // A computed 45 + 11 = 56 tokens; its latest checkpoint is at 48.
  std::vector<int32_t> turn = prompt;
  turn.insert(turn.end(), a.tokens.begin(), a.tokens.end());
  const auto more = random_prompt(9);
  turn.insert(turn.end(), more.begin(), more.end());
  const Output c = test::run_one(*e, request(turn, 8));
  EXPECT_EQ(c.tokens, reference(turn, 8));
  EXPECT_EQ(c.cached_tokens, 48);
  EXPECT_LE(e->state_pool()->num_checkpoints(), e->state_pool()->n_checkpoint_rows());
  test::expect_idle(*e);
}

TEST_P(EngineHybrid, PreemptionRecomputesTheState) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Request> reqs;
  const auto shared = random_prompt(20);
  for (int i = 0; i < 8; ++i) {
    auto p = i % 2 ? shared : random_prompt(3 + int(rng_() % 30));
    if (i % 2) {
      const auto tail = random_prompt(1 + int(rng_() % 5));
      p.insert(p.end(), tail.begin(), tail.end());
    }
    prompts.push_back(p);
    reqs.push_back(request(p, 24));
  }
  // 12 blocks of 16 for 8 sequences of up to 57 tokens, 24 tokens a step.
  auto e = engine(12, 24, 8, true, 2);
  const auto out = test::run_all(*e, reqs);
  EXPECT_GT(e->metrics().preemptions.load(), 0u);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(out[i].tokens, reference(prompts[i], 24)) << "request " << i;
  test::expect_idle(*e);
}

TEST_P(EngineHybrid, SoakWithCancellationsLeaksNoSlot) {
  auto e = engine(24, 24, 6, true, 4);
  const auto shared = random_prompt(34);
  struct Live {
    RequestHandle h;
    std::vector<int32_t> prompt;
    Output out;  // the events read so far
  };
  std::vector<Live> live;
  std::vector<std::pair<std::vector<int32_t>, Output>> done;
  auto drain = [&](bool all) {
    for (auto it = live.begin(); it != live.end();) {
      test::read_events(*it->h, it->out, all);
      if (it->out.finished) {
        if (it->out.reason == FinishReason::Length) done.emplace_back(it->prompt, it->out);
        it = live.erase(it);
      } else {
        ++it;
      }
    }
  };
  for (int round = 0; round < 120; ++round) {
    if (rng_() % 2 == 0) {
      std::vector<int32_t> p = rng_() % 2 ? shared : random_prompt(1 + int(rng_() % 40));
      const auto tail = random_prompt(int(rng_() % 6));
      p.insert(p.end(), tail.begin(), tail.end());
      live.push_back({e->submit(request(p, 1 + int32_t(rng_() % 16))), p, {}});
    }
    if (!live.empty() && rng_() % 5 == 0) live[rng_() % live.size()].h->cancel();
    e->step();
    drain(false);
  }
  e->run_until_idle();
  drain(true);
  EXPECT_GT(e->metrics().requests_cancelled.load(), 0u);
  EXPECT_GT(e->metrics().prefix_cache_hit_tokens.load(), 0u);
  ASSERT_GT(done.size(), 10u);
  for (size_t i = 0; i < done.size(); i += 3)  // a third of them against the reference (time)
    EXPECT_EQ(done[i].second.tokens, reference(done[i].first, int(done[i].second.tokens.size()))) << "request " << i;
  test::expect_idle(*e);
}

INSTANTIATE_TEST_SUITE_P(Models, EngineHybrid, ::testing::Values("qwen35", "qwen35moe"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rf
