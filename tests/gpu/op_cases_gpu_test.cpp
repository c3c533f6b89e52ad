// Every case of the table of op cases (tests/op/op_cases.h) on the GPU
// backend against the CPU backend on the same inputs, one test per case.
// A case the table lists as not yet run on the GPU (kBackendGaps in op_cases.cpp) must
// still be refused there with an error; once it runs, its entry must go.
// The GPU backend keeps f16 activations in every matmul (no e4m3
// activations for FP8 weights: make_gpu(false)), which the ladder's
// tolerances assume; the FP8 activation path has its own tests
// (cuda_ops_test.cpp).
#include <gtest/gtest.h>

#include "core/error.h"
#include "gpu/gpu_test_util.h"
#include "op/op_cases.h"

namespace rf {
namespace {

using test::OpCase;

class OpCaseGpu : public ::testing::TestWithParam<size_t> {};

TEST_P(OpCaseGpu, MatchesCpu) {
  RF_REQUIRE_GPU();
  const OpCase& c = test::op_cases()[GetParam()];
  const test::OpInputs in = c.inputs(test::op_case_seed(c));
  CpuBackend cpu(2);
  const test::OpOutputs want = c.run(cpu, in);
  auto gpu = test::make_gpu(false);
  if (const char* why = test::backend_gap("cuda", c.name)) {
    EXPECT_THROW(c.run(*gpu, in), Error) << c.name << " runs on the GPU now: remove it from backend_gaps ("
                                         << why << ")";
    GTEST_SKIP() << "not yet on the GPU: " << why;
  }
  const test::OpOutputs got = c.run(*gpu, in);
  ASSERT_EQ(got.size(), want.size()) << c.name;
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].size(), want[o].size()) << c.name << " output " << o;
    const std::vector<double> ref(want[o].begin(), want[o].end());
    EXPECT_LE(test::op_error(c.vs_cpu.metric, got[o], ref), c.vs_cpu.bound) << c.name << " output " << o;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, OpCaseGpu, ::testing::Range(size_t(0), test::op_cases().size()),
                         [](const auto& info) { return test::op_cases()[info.param].name; });

}  // namespace
}  // namespace rf
