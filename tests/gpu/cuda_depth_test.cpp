// Where a model's GPU run parts from its CPU run: the model cut to its
// first L layers (the output norm and head right after layer L - 1), for
// every L, on the same prompt, a 40-token prefill then decode steps
// through captured graphs. Each depth's logits within f16_tolerance() of
// the CPU's, as the whole model's (cuda_model_test.cpp; steps after a
// routing near-tie of the cut model's own tokens excepted); the table of
// errors by depth and step is printed, so a failure names the first layer
// whose kind (attention, DeltaNet, MoE, shared KV, MLA) goes wrong.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "gpu/f16_sensitivity.h"
#include "gpu/gpu_test_util.h"
#include "gpu/routing_margin.h"
#include "model/runner.h"

namespace rf {
namespace {

class CudaDepthVsCpu : public ::testing::TestWithParam<std::string> {};

constexpr int kPrompt = 40, kSteps = 4;

TEST_P(CudaDepthVsCpu, EveryDepthMatchesCpu) {
  RF_REQUIRE_GPU();
  const std::string rel = GetParam();
  RF_REQUIRE_TESTDATA(rel);
  const std::string path = test::testdata_path(rel);
  // MoE models: the first random prompt whose full-depth CPU run routes
  // every token with a clear margin (routing_margin.h).
  test::RoutingMarginCpu cpu(2);
  std::mt19937 rng(5);
  const std::vector<int32_t> prompt = test::clear_routing_prompt(path, cpu, rng, kPrompt, kSteps, 400);
  ASSERT_FALSE(prompt.empty()) << rel << ": no prompt with routing margins >= " << test::kMinRoutingMargin;
  auto gpu = test::make_gpu();
  const ModelConfig config = test::ModelRunner(path, cpu).config();
  const int32_t n_layer = config.n_layer;
  std::printf("  %s: rel. L2 against the CPU by depth (layers), prefill then %d decode steps\n", rel.c_str(),
              kSteps - 1);
  // (Hybrids: the depths from their first attention layer on; a cache
  // needs a layer that keeps KV.)
  int32_t first = 1;
  while (first < n_layer && config.is_recurrent(first - 1)) ++first;
  for (int32_t depth = first; depth <= n_layer; ++depth) {
    test::ModelRunner g(path, *gpu, 256, 8, 256, 16, KVCacheDType::Auto, 0, depth);
    test::ModelRunner c(path, cpu, 256, 8, 256, 16, KVCacheDType::Auto, 0, depth);
    g.warmup();
    test::ModelRunner::Seq sg, sc;
    sg.tokens = sc.tokens = prompt;
    const double bound = test::f16_tolerance(test::f16_sensitivity(path, prompt, kSteps, depth));
    std::printf("  depth %2d (bound %.1e):", depth, bound);
    bool tied = false;
    for (int step = 0; step < kSteps; ++step) {
      cpu.min_margin = INFINITY;
      const auto lg = g.step({&sg})[0];
      const auto lc = c.step({&sc})[0];
      const double err = test::rel_l2(lg, lc);
      std::printf(" %.2e", err);
      // (A decode step of the cut model feeds its own greedy tokens, which
      // the prompt's margins do not cover: a routing near-tie there, and
      // the KV it leaves for the steps after it, is a parting, not an error.)
      tied = tied || cpu.min_margin < test::kMinRoutingMargin;
      if (tied) {
        std::printf(" [routing near-tie]");
      } else {
        EXPECT_LT(err, bound) << rel << " depth " << depth << " step " << step;
      }
      const int32_t next = test::ModelRunner::argmax(lc);
      sg.tokens.push_back(next);
      sc.tokens.push_back(next);
    }
    std::printf("\n");
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaDepthVsCpu,
                         ::testing::Values("arch/tiny-qwen3.gguf", "arch/tiny-qwen35.gguf", "arch/tiny-qwen35moe.gguf",
                                           "arch/tiny-gemma4.gguf", "arch/tiny-gemma4moe.gguf",
                                           "arch/tiny-deepseek2.gguf"),
                         [](const auto& info) { return test::param_name(info.param); });

}  // namespace
}  // namespace rf
