// The engine with model families beyond Llama (CPU, the tiny models of
// arch/): the golden prompts give llama.cpp's greedy tokens through the
// whole engine, and every request's output is the same alone and among
// others under a KV cache small enough to force preemption, with chunked
// prefill and prefix-cache hits — on Gemma 3 (sliding window 8, its own RoPE
// base on local layers) and Gemma 2 (soft-caps) and Qwen2 (biases), and on
// the mixtures of experts Mixtral and Qwen3-MoE (a token's experts chosen
// the same in any batch), and the hybrid Qwen3.5 models (recurrent state
// per sequence slot, prefix hits through state checkpoints), and Gemma 4
// (shared-KV layers reading an earlier layer's blocks, per-layer head sizes;
// its MoE model with experts beside the dense FFN), and GLM-4.5 (a leading
// dense layer, sigmoid routing with a choice-only bias, a shared expert).
#include <gtest/gtest.h>

#include <random>

#include "unit/engine_test_util.h"

namespace rf {
namespace {

using test::config;
using test::greedy;
using test::Output;

struct ArchGoldenLine {
  std::vector<int32_t> prompt, greedy;
};

std::vector<ArchGoldenLine> arch_golden(const std::string& arch) {
  std::ifstream in(test::testdata_path("arch/tiny-" + arch + ".golden.jsonl"));
  std::vector<ArchGoldenLine> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) {
      const auto j = nlohmann::json::parse(line);
      out.push_back({j["prompt_tokens"].get<std::vector<int32_t>>(), j["greedy_tokens"].get<std::vector<int32_t>>()});
    }
  return out;
}

class EngineFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineFamily, GoldenTokensAloneAndUnderPreemption) {
  const std::string arch = GetParam();
  RF_REQUIRE_TESTDATA("arch/tiny-" + arch + ".gguf");
  CpuBackend backend(2);
  auto model = Model::load(test::testdata_path("arch/tiny-" + arch + ".gguf"), backend, false);
  auto tok = Tokenizer::from_gguf(model->file());
  const auto golden = arch_golden(arch);
  ASSERT_EQ(golden.size(), 4u);

  // The golden prompts, then random ones (some sharing a 20-token prefix).
  std::mt19937 rng(5);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = 3 + int32_t(rng() % 500);
    return v;
  };
  std::vector<Request> reqs;
  for (const auto& g : golden) reqs.push_back(greedy(g.prompt, 24));
  const auto shared = random_tokens(20);
  for (int i = 0; i < 12; ++i) {
    auto p = i % 2 ? shared : random_tokens(1 + int(rng() % 30));
    if (i % 2) {
      const auto tail = random_tokens(int(rng() % 6));
      p.insert(p.end(), tail.begin(), tail.end());
    }
    reqs.push_back(greedy(p, 4 + int32_t(rng() % 30)));
  }

  std::vector<Output> alone;
  {
    Engine engine(*model, *tok, backend, config(16, 16, 256, 1, false));
    for (const auto& r : reqs) alone.push_back(test::run_one(engine, r));
    test::expect_idle(engine);
  }
  for (size_t i = 0; i < golden.size(); ++i) EXPECT_EQ(alone[i].tokens, golden[i].greedy) << arch << " prompt " << i;

  // Blocks of 8 tokens for 16 requests of up to 64 tokens: what one such
  // request needs (Llama-like: 8; with sliding-window KV groups their
  // window's blocks besides) and 4 more; 16 tokens per step, so prompts are
  // chunked beside decode tokens.
  // (gemma4moe's requests, with 4 spare blocks, evict each shared prefix
  // before it is asked for again: 8 there, still preempting.)
  const int32_t spare = arch == "gemma4moe" ? 8 : 4;
  const int32_t num_blocks =
      int32_t(kv_group_layout(model->config()).max_blocks_per_sequence(64, 8, 16)) + spare;
  Engine engine(*model, *tok, backend, config(num_blocks, 8, 16, 16, true));
  const auto together = test::run_all(engine, reqs);
  EXPECT_GT(engine.metrics().preemptions.load(), 0u) << arch;
  EXPECT_GT(engine.metrics().prefix_cache_hit_tokens.load(), 0u) << arch;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << arch << " request " << i;
    EXPECT_EQ(together[i].reason, alone[i].reason) << arch << " request " << i;
  }
  test::expect_idle(engine);
}

INSTANTIATE_TEST_SUITE_P(Families, EngineFamily, ::testing::Values("gemma3", "gemma2", "qwen2", "mixtral", "qwen3moe",
                                                                   "qwen35", "qwen35moe", "gemma4", "gemma4moe",
                                                                   "glm4moe", "deepseek2"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rf
