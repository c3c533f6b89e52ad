// Embedding requests through the engine (CPU, the tiny Qwen3 model of
// arch/): the pooled, L2-normalised final hidden states equal llama.cpp's
// (arch/tiny-qwen3.embd-last.jsonl and .embd-mean.jsonl: its `embedding`,
// which is its `raw` pooled vector divided by its norm) for last and mean
// pooling; cls pooling is the first token's state (in a causal model, the
// last-pooled embedding of that token alone); the vectors are the same
// submitted alone or together with chunked prefill (16 tokens a step),
// preemption and generation requests in the same steps; every KV block is
// back in the pool afterwards.
#include <gtest/gtest.h>

#include <cmath>

#include "unit/engine_test_util.h"

namespace rf {
namespace {

using test::config;

struct EmbdLine {
  std::vector<int32_t> prompt;
  std::vector<float> embedding;
};

std::vector<EmbdLine> embd_reference(const std::string& pooling) {
  std::ifstream in(test::testdata_path("arch/tiny-qwen3.embd-" + pooling + ".jsonl"));
  std::vector<EmbdLine> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) {
      const auto j = nlohmann::json::parse(line);
      EXPECT_EQ(j["pooling"], pooling);
      out.push_back({j["prompt_tokens"].get<std::vector<int32_t>>(), j["embedding"].get<std::vector<float>>()});
    }
  return out;
}

Request embedding_request(std::vector<int32_t> prompt, Pooling p) {
  Request r;
  r.prompt = std::move(prompt);
  r.pooling = p;
  return r;
}

// The final event's embedding.
std::vector<float> embedding_of(RequestStream& h) {
  std::vector<float> v;
  while (auto ev = h.next(std::chrono::milliseconds(0))) {
    if (!ev->finished) continue;
    EXPECT_EQ(ev->finish_reason, FinishReason::Stop) << ev->error;
    EXPECT_EQ(ev->completion_tokens, 0);
    v = ev->embedding;
  }
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(double(a[i]) - double(b[i])));
  return d;
}

class TinyQwen3 : public ::testing::Test {
 protected:
  void SetUp() override {
    RF_REQUIRE_TESTDATA("arch/tiny-qwen3.gguf");
    RF_REQUIRE_TESTDATA("arch/tiny-qwen3.embd-last.jsonl");
    model_ = Model::load(test::testdata_path("arch/tiny-qwen3.gguf"), backend_, false);
    tok_ = Tokenizer::from_gguf(model_->file());
  }
  std::vector<float> alone(const std::vector<int32_t>& prompt, Pooling p) {
    Engine engine(*model_, *tok_, backend_, config(64));
    RequestHandle h = engine.submit(embedding_request(prompt, p));
    engine.run_until_idle();
    test::expect_idle(engine);
    return embedding_of(*h);
  }
  CpuBackend backend_{2};
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(TinyQwen3, LastAndMeanPoolingEqualLlamaCpp) {
  EXPECT_EQ(model_->config().pooling, Pooling::Last);  // qwen3 without a pooling_type key
  for (const auto& [name, p] : {std::pair{"last", Pooling::Last}, std::pair{"mean", Pooling::Mean}}) {
    const auto ref = embd_reference(name);
    ASSERT_EQ(ref.size(), 4u);
    for (const EmbdLine& line : ref) {
      const std::vector<float> v = alone(line.prompt, p);
      ASSERT_EQ(v.size(), size_t(model_->config().n_embd));
      double norm = 0;
      for (float x : v) norm += double(x) * x;
      EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-6);
      EXPECT_LT(max_abs_diff(v, line.embedding), 2e-5) << name << " pooling, " << line.prompt.size() << " tokens";
    }
  }
}

TEST_F(TinyQwen3, ClsPoolingIsTheFirstTokensState) {
  const auto ref = embd_reference("last");
  ASSERT_EQ(ref[0].prompt.size(), 1u);
  std::vector<int32_t> prompt = ref[0].prompt;
  prompt.insert(prompt.end(), ref[3].prompt.begin(), ref[3].prompt.end());
  EXPECT_LT(max_abs_diff(alone(prompt, Pooling::Cls), ref[0].embedding), 2e-5);
}

TEST_F(TinyQwen3, BatchedChunkedAndPreemptedEqualAlone) {
  const auto last = embd_reference("last"), mean = embd_reference("mean");
  // A pool too small for everything at once (blocks of 8 tokens, 16 tokens
  // a step): prompts are chunked, sequences preempted and recomputed.
  Engine engine(*model_, *tok_, backend_, config(14, 8, 16, 8));
  std::vector<std::pair<RequestHandle, const EmbdLine*>> embd;
  std::vector<RequestHandle> gen;
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < 4; ++i) {
      embd.emplace_back(engine.submit(embedding_request(last[i].prompt, Pooling::Last)), &last[i]);
      embd.emplace_back(engine.submit(embedding_request(mean[i].prompt, Pooling::Mean)), &mean[i]);
      gen.push_back(engine.submit(test::greedy(last[i].prompt, 12)));
    }
  engine.run_until_idle();
  for (auto& [h, line] : embd)
    EXPECT_LT(max_abs_diff(embedding_of(*h), line->embedding), 2e-5) << line->prompt.size() << " tokens";
  for (auto& h : gen) {
    test::Output o;
    test::read_events(*h, o, false);
    EXPECT_EQ(o.reason, FinishReason::Length);
  }
  EXPECT_GT(engine.metrics().preemptions.load(), 0u);
  test::expect_idle(engine);
}

TEST_F(TinyQwen3, EmbeddingRequestsAreValidated) {
  Engine engine(*model_, *tok_, backend_, config(64));
  EXPECT_THROW(engine.submit(embedding_request({}, Pooling::Last)), Error);
  EXPECT_THROW(engine.submit(embedding_request({1, 100000}, Pooling::Mean)), Error);
  EXPECT_THROW(engine.submit(embedding_request(std::vector<int32_t>(600, 5), Pooling::Last)), Error);  // context 512
}

}  // namespace
}  // namespace rf
