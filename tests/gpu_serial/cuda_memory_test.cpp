// Many engine-sized steps allocate no device memory: the device's free
// memory (cudaMemGetInfo, which also sees allocations inside libraries such
// as cuBLAS) is the same before and after, with decode graphs captured up
// front. Device-wide, so this binary runs alone (RUN_SERIAL); it also checks
// that a sequence's logits in a batch of 32 match it alone. An MoE model too
// (its routing, expert grouping and tiles live in reserved scratch); its
// batch invariance is CudaEngineBatch's (tests/gpu), which allows for
// routing near-ties; and a hybrid one (Gated DeltaNet state rows).
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/gpu_test_util.h"
#include "model/runner.h"

namespace rf {
namespace {

// Steps of 32 sequences (prefill, then decode graphs); with compare_alone,
// sequence 0's logits against it alone.
void steps_allocate_nothing(const std::string& rel, bool compare_alone) {
  auto gpu = test::make_gpu();
  test::ModelRunner runner(test::testdata_path(rel), *gpu, 1024, 32, 512, 16);
  std::mt19937 rng(9);
  std::vector<test::ModelRunner::Seq> seqs(32);
  std::vector<test::ModelRunner::Seq*> ptrs;
  for (auto& s : seqs) {
    for (int i = 0; i < 5 + int(rng() % 20); ++i) s.tokens.push_back(int32_t(rng() % 512));
    ptrs.push_back(&s);
  }
  // Sequence 0 alone (prefill + 8 decode steps).
  test::ModelRunner::Seq alone;
  alone.tokens = seqs[0].tokens;
  std::vector<std::vector<float>> alone_logits;
  for (int step = 0; step < 9; ++step) {
    alone_logits.push_back(runner.step({&alone})[0]);
    alone.tokens.push_back(test::ModelRunner::argmax(alone_logits.back()));
  }
  runner.release(alone);
  runner.warmup();
  gpu->synchronize();
  const size_t free_before = gpu->free_memory();
  for (int step = 0; step < 9; ++step) {
    auto logits = runner.step(ptrs);
    for (float v : logits[0]) ASSERT_TRUE(std::isfinite(v)) << rel << " step " << step;
    if (compare_alone) {
      EXPECT_LT(test::rel_l2(logits[0], alone_logits[size_t(step)]), 1e-2) << "step " << step;
      EXPECT_EQ(test::ModelRunner::argmax(logits[0]), test::ModelRunner::argmax(alone_logits[size_t(step)]));
    }
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i].tokens.push_back(test::ModelRunner::argmax(logits[i]));
  }
  gpu->synchronize();
  EXPECT_EQ(gpu->free_memory(), free_before) << "device memory was allocated during steps";
  for (auto& s : seqs) runner.release(s);
}

TEST(CudaModel, BatchOf32MatchesAloneAndNoAllocationPerStep) {
  RF_REQUIRE_GPU();
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  steps_allocate_nothing("stories260K.gguf", true);
}

TEST(CudaModel, MixtureOfExpertsAllocatesNothingPerStep) {
  RF_REQUIRE_GPU();
  RF_REQUIRE_TESTDATA("arch/tiny-qwen3moe.gguf");
  steps_allocate_nothing("arch/tiny-qwen3moe.gguf", false);
}

TEST(CudaModel, HybridAllocatesNothingPerStep) {
  RF_REQUIRE_GPU();
  RF_REQUIRE_TESTDATA("arch/tiny-qwen35moe.gguf");
  // Gated DeltaNet layers (their state rows are the KV cache's, allocated
  // with it) and a shared expert beside the routed ones.
  steps_allocate_nothing("arch/tiny-qwen35moe.gguf", false);
}

}  // namespace
}  // namespace rf
