// The engine with sliding-window KV groups on the CPU, on a synthetic
// gemma3-shaped model (tiny-gemma3: window 16, 2 local layers per global
// one, f32 weights so that results do not depend on how a step is
// batched): long generations over many windows, with prefill chunks that
// slide the window and blocks of the window size, give exactly the tokens
// of a reference that keeps every block (tests/model/runner.h); a KV budget
// too small for the whole context in every layer but enough with window
// groups runs them without preemption; prefix-cache hits over window
// groups leave the tokens unchanged.
#include <gtest/gtest.h>

#include <random>

#include "model/runner.h"
#include "model/temp_model.h"
#include "unit/engine_test_util.h"

namespace rf {
namespace {

using test::greedy;
using test::Output;

class EngineWindow : public ::testing::Test {
 protected:
  EngineWindow() : tm_("tiny-gemma3", "f32", 11), backend_(2) {
    model_ = Model::load(tm_.path(), backend_, false);
    tok_ = Tokenizer::from_gguf(model_->file());
    ref_ = std::make_unique<test::ModelRunner>(tm_.path(), backend_, 256, 1, 32, 16);
  }

  std::unique_ptr<Engine> engine(int32_t num_blocks, int32_t chunk, int32_t max_seqs = 4, bool prefix = true) {
    EngineConfig c = test::config(num_blocks, 16, chunk, max_seqs, prefix);
    return std::make_unique<Engine>(*model_, *tok_, backend_, c);
  }
  std::vector<int32_t> random_prompt(int n, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = 3 + int32_t(rng() % 1000);
    return v;
  }
  static Request long_request(std::vector<int32_t> prompt, int32_t n) {
    Request r = greedy(std::move(prompt), n);
    r.ignore_eos = true;
    return r;
  }
  // Greedy tokens with every block kept (nothing released, one batch for the prompt).
  std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int n) { return ref_->greedy(prompt, n, -1); }

  test::TempModel tm_;
  CpuBackend backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<test::ModelRunner> ref_;
};

TEST_F(EngineWindow, TheModelHasWindowGroups) {
  const KVGroupLayout groups = kv_group_layout(model_->config());
  EXPECT_EQ(model_->config().sliding_window, 16);
  EXPECT_EQ(groups.group_windows(), (std::vector<int32_t>{16, 16, 0}));
  EXPECT_EQ(groups.group_size(), 2);
}

TEST_F(EngineWindow, LongGenerationsEqualAReferenceThatKeepsEveryBlock) {
  // 200 new tokens: 14 windows. Prompts in chunks of 8 (slid over within
  // the prompt), three sequences at once, a cache with room to spare.
  const std::vector<std::vector<int32_t>> prompts = {random_prompt(24, 1), random_prompt(45, 2), random_prompt(3, 3)};
  std::vector<Request> reqs;
  for (const auto& p : prompts) reqs.push_back(long_request(p, 200));
  auto e = engine(200, 8);
  const auto out = test::run_all(*e, reqs);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(out[i].tokens, reference(prompts[i], 200)) << "sequence " << i;
    EXPECT_EQ(out[i].reason, FinishReason::Length);
  }
  EXPECT_EQ(e->metrics().preemptions.load(), 0u);
  // Each window group released all but its last window's blocks.
  EXPECT_GE(e->metrics().kv_window_releases.load(), 3u * 2 * (224 / 16 - 3));
  test::expect_idle(*e);
}

TEST_F(EngineWindow, ABudgetTooSmallForFullWindowLayersIsEnough) {
  // 24 + 200 tokens: 14 blocks per group. Every layer keeping the whole
  // context would take 3 x 14 blocks; the window groups need 3 each (a
  // window of 16 and a chunk of 8 span at most 3 blocks of 16): 20.
  const auto prompt = random_prompt(24, 4);
  const KVGroupLayout groups = kv_group_layout(model_->config());
  const int32_t need = int32_t(groups.max_blocks_per_sequence(224, 16, 8));
  ASSERT_EQ(need, 14 + 2 * 3);
  auto e = engine(need, 8, 1);
  EXPECT_GE(e->max_sequence_tokens(), 224);
  const Output o = test::run_one(*e, long_request(prompt, 200));
  EXPECT_EQ(o.tokens, reference(prompt, 200));
  EXPECT_EQ(e->metrics().preemptions.load(), 0u);
  EXPECT_GT(e->metrics().kv_window_releases.load(), 0u);
  // Less than half the memory of a cache holding every layer's 224 tokens.
  const ModelConfig& c = model_->config();
  const size_t full_context = 2 * size_t(c.n_layer) * 224 * size_t(c.kv_dim()) * 4;
  const size_t kv_bytes = size_t(need) * 2 * size_t(groups.group_size()) * 16 * size_t(c.kv_dim()) * 4;
  EXPECT_LT(kv_bytes, full_context / 2);
  test::expect_idle(*e);
  // A longer request does not fit this cache alone: refused up front.
  EXPECT_THROW(e->submit(long_request(prompt, 300)), Error);
}

TEST_F(EngineWindow, PrefixHitsOverWindowGroupsKeepTheTokens) {
  const auto prompt = random_prompt(150, 5);
  auto e = engine(200, 64);
  const Output a = test::run_one(*e, long_request(prompt, 40));
  const Output b = test::run_one(*e, long_request(prompt, 40));
  EXPECT_EQ(a.tokens, reference(prompt, 40));
  EXPECT_EQ(b.tokens, a.tokens);
  EXPECT_EQ(a.cached_tokens, 0);
  EXPECT_EQ(b.cached_tokens, 144);  // every full block; the last token is computed again
  test::expect_idle(*e);

  // A cache of 24 blocks: other prompts evict blocks of A's between its
  // runs; the hit, whatever its length, gives the same tokens.
  auto small = engine(24, 64, 1);
  const Output c = test::run_one(*small, long_request(prompt, 40));
  const Output filler = test::run_one(*small, long_request(random_prompt(120, 6), 40));
  const Output d = test::run_one(*small, long_request(prompt, 40));
  EXPECT_EQ(c.tokens, a.tokens);
  EXPECT_EQ(d.tokens, a.tokens);
  EXPECT_EQ(d.cached_tokens % 16, 0);
  EXPECT_LT(d.cached_tokens, 144);
  (void)filler;
  test::expect_idle(*small);
}

}  // namespace
}  // namespace rf
