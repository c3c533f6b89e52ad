// What the table of op cases (op_cases.h) does not check for the CPU's
// core ops: an out-of-range token id is an error of embed, not a crash.
#include <gtest/gtest.h>

#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/quant.h"

#include "op/op_test_util.h"

namespace rf {
namespace {

TEST(CpuOps, EmbedRejectsOutOfRangeTokenIds) {
  std::mt19937 rng(2);
  CpuBackend be(2);
  const int vocab = 10, d = 64;
  const auto q = test::random_weight(DType::Q8_0, vocab, d, rng, 1.0f);
  Batch b;
  b.reset(16, 1);
  const std::vector<int32_t> toks = {7, vocab, 9}, blocks = {0};
  b.add_sequence(toks, 0, blocks, true);
  StepMeta m = be.upload_step(b);
  std::vector<float> emb(size_t(3) * d);
  Tensor te = make_tensor(emb.data(), DType::F32, d, 3);
  EXPECT_THROW(be.embed(make_tensor(const_cast<uint8_t*>(q.data()), DType::Q8_0, d, vocab), m, te), Error);
}

}  // namespace
}  // namespace rf
