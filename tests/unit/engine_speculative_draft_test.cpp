// Speculative decoding with a draft model (engine/proposer_draft.h) on the
// CPU, stories260K drafting for itself (a second copy on its own backend): greedy output is the plain
// decoding's and nearly every proposal is accepted (the same model, greedy,
// proposes what the target draws — all but where chunked and single-token
// logits round apart); seeded sampling (whose draws often differ from the
// greedy proposals, so the draft's KV is rolled back often) is the same as
// alone without speculation, in a batch with opted-out requests, under
// preemption and chunked prefill; every target and draft KV block is free
// after; a draft model with another vocabulary is refused, as are one on
// the target's backend and a draft configuration without its model.
#include <gtest/gtest.h>

#include <random>

#include "unit/engine_test_util.h"

namespace rf {
namespace {

using test::config;
using test::greedy;
using test::Output;

// stories260K again, on a backend of its own, as the draft model.
struct Draft {
  Draft() : backend(1), model(Model::load(test::testdata_path("stories260K.gguf"), backend, false)) {}
  CpuBackend backend;
  std::unique_ptr<Model> model;
};

EngineConfig with_draft(EngineConfig c, Draft& draft, int32_t draft_max = 4) {
  c.speculative.type = SpecType::Draft;
  c.speculative.draft = draft.model.get();
  c.speculative.draft_backend = &draft.backend;
  c.speculative.draft_max = draft_max;
  return c;
}

void expect_same(const Output& got, const Output& want, const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.text, want.text) << what;
  EXPECT_EQ(got.reason, want.reason) << what;
}

void expect_all_free(const Engine& e) {
  test::expect_idle(e);
  ASSERT_NE(e.draft_proposer(), nullptr);
  EXPECT_EQ(e.draft_proposer()->free_blocks(), e.draft_proposer()->num_blocks()) << "draft KV blocks leaked";
}

TEST(EngineSpeculativeDraft, GreedySameAndSelfDraftAccepted) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  Draft draft;
  auto plain = st.engine(config(128));
  auto spec = st.engine(with_draft(config(128), draft, 5));
  for (const auto& g : test::read_golden()) {
    const Request r = greedy(g.prompt_tokens, 90);
    expect_same(test::run_one(*spec, r), test::run_one(*plain, r), g.prompt);
  }
  const EngineMetrics& m = spec->metrics();
  EXPECT_GT(m.spec_draft_tokens.load(), 100u);
  EXPECT_GE(double(m.spec_accepted_tokens.load()), 0.9 * double(m.spec_draft_tokens.load()));
  EXPECT_LT(m.steps.load(), plain->metrics().steps.load() / 3);
  expect_all_free(*spec);
}

TEST(EngineSpeculativeDraft, SampledMixedBatchUnderPreemptionSameAsAlone) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto golden = test::read_golden();
  std::mt19937 rng(3);
  std::vector<Request> reqs;
  for (int i = 0; i < 20; ++i) {
    std::vector<int32_t> p = golden[size_t(i) % golden.size()].prompt_tokens;
    for (int j = i % 4; j > 0; --j) p.push_back(3 + int32_t(rng() % 500));
    Request r = greedy(p, 30 + 2 * i);
    if (i % 3 != 0) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_k = 40;
      r.sampling.seed = 90 + uint64_t(i);
    }
    if (i % 5 == 1) r.sampling.repetition_penalty = 1.2f;
    if (i % 4 == 3) r.speculative = false;
    reqs.push_back(r);
  }
  std::vector<Output> alone;
  {
    auto plain = st.engine(config(64, 16, 256, 1, false));
    for (const auto& r : reqs) alone.push_back(test::run_one(*plain, r));
  }
  Draft draft;
  auto spec = st.engine(with_draft(config(20, 16, 64, 20), draft));  // 20 blocks for 20 sequences of up to 5: preemption
  const auto out = test::run_all(*spec, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) expect_same(out[i], alone[i], "request " + std::to_string(i));
  const EngineMetrics& m = spec->metrics();
  EXPECT_GT(m.preemptions.load(), 0u);
  EXPECT_GT(m.spec_accepted_tokens.load(), 0u);
  EXPECT_LT(m.spec_accepted_tokens.load(), m.spec_draft_tokens.load());  // rejections: rollbacks
  expect_all_free(*spec);
}

TEST(EngineSpeculativeDraft, RefusesAnotherVocabularySharedBackendOrMissingModel) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  RF_REQUIRE_TESTDATA("arch/tiny-qwen3.gguf");
  test::Stories st;
  Draft other;
  other.model = Model::load(test::testdata_path("arch/tiny-qwen3.gguf"), other.backend, false);
  try {
    auto e = st.engine(with_draft(config(64), other));
    FAIL() << "a draft model with another vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
  }
  // The draft on the target's own backend: one backend holds one model's step buffers.
  EngineConfig shared = config(64);
  shared.speculative.type = SpecType::Draft;
  shared.speculative.draft = &st.model();
  shared.speculative.draft_backend = &st.backend();
  EXPECT_THROW(st.engine(shared), Error);
  EngineConfig c = config(64);
  c.speculative.type = SpecType::Draft;
  EXPECT_THROW(st.engine(c), Error);
}

}  // namespace
}  // namespace rf
