// Every case of the table of op cases (op_cases.h) on the CPU backend, in
// both matmul modes, against its naive double-precision reference, one
// test per case.
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "op/op_cases.h"

namespace rf {
namespace {

using test::OpCase;

class OpCaseCpu : public ::testing::TestWithParam<size_t> {};

// Both matmul modes: the reference one at vs_reference, the fast one
// (8-bit activations for quantized weights) at vs_reference_fast.
TEST_P(OpCaseCpu, MatchesReference) {
  const OpCase& c = test::op_cases()[GetParam()];
  const test::OpInputs in = c.inputs(test::op_case_seed(c));
  const test::RefOutputs want = c.reference(in);
  for (CpuMatmul mode : {CpuMatmul::Reference, CpuMatmul::Fast}) {
    CpuBackend cpu(2, mode);
    const test::OpOutputs got = c.run(cpu, in);
    const test::Tolerance tol =
        mode == CpuMatmul::Fast && c.vs_reference_fast.bound >= 0 ? c.vs_reference_fast : c.vs_reference;
    const char* what = mode == CpuMatmul::Fast ? " (fast matmul)" : "";
    ASSERT_EQ(got.size(), want.size()) << c.name << what;
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(got[o].size(), want[o].size()) << c.name << " output " << o << what;
      EXPECT_LE(test::op_error(tol.metric, got[o], want[o]), tol.bound) << c.name << " output " << o << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, OpCaseCpu, ::testing::Range(size_t(0), test::op_cases().size()),
                         [](const auto& info) { return test::op_cases()[info.param].name; });

// Names are unique test names.
TEST(OpCaseTable, NamesAreUniqueTestNames) {
  std::set<std::string> seen;
  for (const OpCase& c : test::op_cases()) {
    EXPECT_TRUE(seen.insert(c.name).second) << c.name;
    for (char ch : c.name) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') << c.name;
  }
}

}  // namespace
}  // namespace rf
