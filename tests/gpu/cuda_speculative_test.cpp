// Speculative decoding (n-gram proposals) on the CUDA backend: verification
// rounds run as prefill chunks with a logit row per position and are
// sampled on the GPU. stories260K's golden prompts give the golden tokens
// with speculation, mixed with opted-out requests in one batch (as plain
// decoding does on the GPU, CudaEngineBatch.StoriesGoldenAmong32); on tiny
// models of other families and a synthetic f16 model, greedy output with
// speculation equals plain decoding's up to near-ties (near_tie.h: a
// verification chunk's matmuls and attention reduce in another order than a
// decode step's, so the runs may part only where plain decoding's two best
// tokens were within 1e-2 nats and speculation took the runner-up); and a
// draft model on a second backend of the device. Every case leaves every KV
// block free.
#include <gtest/gtest.h>

#include <cctype>

#include "gpu/gpu_test_util.h"
#include "gpu/near_tie.h"
#include "model/temp_model.h"
#include "unit/engine_test_util.h"

namespace rf {
namespace {

EngineConfig with_spec(EngineConfig c) {
  c.speculative.type = SpecType::Ngram;
  c.speculative.draft_max = 5;
  return c;
}

TEST(CudaSpeculative, StoriesGoldenWithSpeculation) {
  RF_REQUIRE_GPU();
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  auto gpu = test::make_gpu();
  auto model = Model::load(test::testdata_path("stories260K.gguf"), *gpu, false);
  auto tok = Tokenizer::from_gguf(model->file());
  const auto golden = test::read_golden();
  std::vector<Request> reqs;
  for (int i = 0; i < 24; ++i) {
    const auto& g = golden[size_t(i) % golden.size()];
    Request r = test::greedy(g.prompt_tokens, 16 + 48 * (i % 2));
    r.speculative = i % 3 != 2;
    reqs.push_back(r);
  }
  auto engine = std::make_unique<Engine>(*model, *tok, *gpu, with_spec(test::config(64, 16, 128, 64, true)));
  const auto outs = test::run_all(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& g = golden[i % golden.size()];
    EXPECT_EQ(outs[i].tokens, std::vector<int32_t>(g.greedy_tokens.begin(),
                                                   g.greedy_tokens.begin() + long(reqs[i].max_tokens)))
        << g.prompt;
  }
  EXPECT_GT(engine->metrics().spec_accepted_tokens.load(), 0u);
  EXPECT_LT(engine->metrics().spec_accepted_tokens.load(), engine->metrics().spec_draft_tokens.load());
  test::expect_idle(*engine);
}

// A draft model on the GPU: stories260K drafting for itself, on a second
// backend of the same device (one backend holds one model's step buffers and
// graphs; the draft's single-token steps replay its own decode graphs).
TEST(CudaSpeculative, DraftModelStoriesGolden) {
  RF_REQUIRE_GPU();
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  auto gpu = test::make_gpu();
  auto draft_gpu = test::make_gpu();
  auto model = Model::load(test::testdata_path("stories260K.gguf"), *gpu, false);
  auto draft = Model::load(test::testdata_path("stories260K.gguf"), *draft_gpu, false);
  auto tok = Tokenizer::from_gguf(model->file());
  const auto golden = test::read_golden();
  std::vector<Request> reqs;
  for (int i = 0; i < 16; ++i) {
    const auto& g = golden[size_t(i) % golden.size()];
    Request r = test::greedy(g.prompt_tokens, 16 + 48 * (i % 2));
    r.speculative = i % 4 != 3;
    reqs.push_back(r);
  }
  EngineConfig c = test::config(64, 16, 128, 64, true);
  c.speculative.type = SpecType::Draft;
  c.speculative.draft = draft.get();
  c.speculative.draft_backend = draft_gpu.get();
  auto engine = std::make_unique<Engine>(*model, *tok, *gpu, c);
  const auto outs = test::run_all(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& g = golden[i % golden.size()];
    EXPECT_EQ(outs[i].tokens, std::vector<int32_t>(g.greedy_tokens.begin(),
                                                   g.greedy_tokens.begin() + long(reqs[i].max_tokens)))
        << g.prompt;
  }
  const EngineMetrics& m = engine->metrics();
  EXPECT_GT(m.spec_draft_tokens.load(), 0u);
  // The same model proposes what the target draws, but for near-ties
  // between its decode-graph logits and the target's chunk logits.
  EXPECT_GE(double(m.spec_accepted_tokens.load()), 0.8 * double(m.spec_draft_tokens.load()));
  test::expect_idle(*engine);
  EXPECT_EQ(engine->draft_proposer()->free_blocks(), engine->draft_proposer()->num_blocks());
}

class CudaSpeculativeModels : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaSpeculativeModels, GreedySameAsPlainUpToNearTies) {
  RF_REQUIRE_GPU();
  const std::string name = GetParam();
  std::unique_ptr<test::TempModel> temp;
  std::string path;
  if (name.rfind("synthetic-tiny-", 0) == 0) {
    temp = std::make_unique<test::TempModel>("tiny", name.substr(15));
    path = temp->path();
  } else {
    RF_REQUIRE_TESTDATA(name);
    path = test::testdata_path(name);
  }
  auto gpu = test::make_gpu(/*fp8_activations=*/false);
  auto model = Model::load(path, *gpu, false);
  auto tok = Tokenizer::from_gguf(model->file());
  const int32_t vocab = model->config().n_vocab;
  // Prompts that repeat a phrase (the lookup finds it), and plain ones.
  std::vector<Request> plain_reqs, spec_reqs;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> phrase, p;
    for (int j = 0; j < 3 + i % 4; ++j) phrase.push_back(3 + (37 * i + 11 * j) % (vocab - 3));
    for (int rep = 0; rep < 1 + i % 3; ++rep) p.insert(p.end(), phrase.begin(), phrase.end());
    Request r = test::greedy(p, 40);
    r.ignore_eos = true;
    r.logprobs = true;  // the alternatives, to judge a parting
    r.sampling.top_logprobs = 2;
    plain_reqs.push_back(r);
    r.logprobs = false;
    r.sampling.top_logprobs = 0;
    spec_reqs.push_back(r);
  }
  const int32_t one = int32_t(kv_group_layout(model->config()).max_blocks_per_sequence(64, 16, 128));
  std::vector<test::Output> plain;
  {
    Engine e(*model, *tok, *gpu, test::config(std::max(64, 12 * one), 16, 128, 16, false));
    plain = test::run_all(e, plain_reqs);
  }
  Engine spec(*model, *tok, *gpu, with_spec(test::config(std::max(64, 12 * one), 16, 128, 16, true)));
  const auto got = test::run_all(spec, spec_reqs);
  int near_ties = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens.size(), 40u) << name << " request " << i;
    EXPECT_TRUE(test::same_up_to_near_tie(plain[i], got[i], 1e-2, &near_ties)) << name << " request " << i;
  }
  EXPECT_LE(near_ties, 3) << name << ": too many requests parted, even at near-ties";
  EXPECT_GT(spec.metrics().spec_drafts.load(), 0u);
  test::expect_idle(spec);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaSpeculativeModels,
                         ::testing::Values("synthetic-tiny-f16", "arch/tiny-qwen3.gguf", "arch/tiny-gemma3.gguf",
                                           "arch/tiny-phi3.gguf"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace rf
