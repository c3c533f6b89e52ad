// Importance matrices: llama.cpp's imatrix file of the qtest model reads
// back as per-column mean squared activations, and quantizing with them
// lowers the importance-weighted error (what they are for).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "gguf/reader.h"
#include "model/imatrix.h"
#include "testdata.h"

namespace rf {
namespace {

TEST(ImportanceMatrix, ReadsLlamaCppFile) {
  RF_REQUIRE_TESTDATA("quant/qtest.imatrix");
  const auto m = ImportanceMatrix::load(test::testdata_path("quant/qtest.imatrix"));
  EXPECT_EQ(m.size(), 8u);  // the seven matrices of the layer and the output
  const float* k = m.columns("blk.0.attn_k.weight", 256);
  ASSERT_NE(k, nullptr);
  for (int j = 0; j < 256; ++j) EXPECT_TRUE(std::isfinite(k[j]) && k[j] >= 0) << j;
  EXPECT_NE(m.columns("blk.0.ffn_down.weight", 512), nullptr);
  EXPECT_EQ(m.columns("token_embd.weight", 256), nullptr);  // read by lookup: no importances
  EXPECT_THROW(m.columns("blk.0.attn_k.weight", 128), Error);
}

TEST(ImportanceMatrix, RejectsOtherFiles) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  try {
    ImportanceMatrix::load(test::testdata_path("stories260K.gguf"));
    FAIL() << "a model file was accepted as an importance matrix";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an importance matrix"), std::string::npos) << e.what();
  }
}

double weighted_error(DType t, const std::vector<float>& x, size_t cols, const float* imp, const float* w) {
  std::vector<uint8_t> packed(row_bytes(t, cols));
  std::vector<float> back(cols);
  double err = 0;
  for (size_t r = 0; r < x.size() / cols; ++r) {
    quantize_row(t, x.data() + r * cols, packed.data(), cols, imp);
    dequantize_row(t, packed.data(), back.data(), cols);
    for (size_t j = 0; j < cols; ++j) {
      const double d = double(back[j]) - x[r * cols + j];
      err += w[j] * d * d;
    }
  }
  return err;
}

TEST(ImportanceMatrix, WeightsTheQuantizersErrors) {
  RF_REQUIRE_TESTDATA("quant/qtest.imatrix");
  RF_REQUIRE_TESTDATA("quant/qtest-f16.deq.gguf");
  const auto m = ImportanceMatrix::load(test::testdata_path("quant/qtest.imatrix"));
  auto f = gguf::File::open(test::testdata_path("quant/qtest-f16.deq.gguf"));
  const gguf::TensorInfo* t = f->find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  const size_t cols = t->ne(0);
  std::vector<float> x(t->n_elements);
  std::memcpy(x.data(), f->tensor_data(*t), x.size() * 4);
  const float* imp = m.columns(t->name, int64_t(cols));
  ASSERT_NE(imp, nullptr);
  for (DType type : {DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4}) {
    const double plain = weighted_error(type, x, cols, nullptr, imp);
    const double weighted = weighted_error(type, x, cols, imp, imp);
    std::printf("  %-7s importance-weighted error: plain %.5g, with the matrix %.5g\n", dtype_name(type), plain,
                weighted);
    EXPECT_LT(weighted, plain) << dtype_name(type);
  }
}

}  // namespace
}  // namespace rf
