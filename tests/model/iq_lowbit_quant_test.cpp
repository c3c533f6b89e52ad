// The quantizers of the i-quants below 4 bits (IQ3_S, IQ3_XXS, IQ2_S,
// IQ2_XS, IQ2_XXS, IQ1_M, IQ1_S) against llama.cpp's, on the qtest model
// and its importance matrix (the same matrix llama.cpp quantized
// qtest-<type>.gguf with; testdata README):
//  - the importance-weighted squared error of two tensors is no worse than
//    that of llama.cpp's dequantized tensors (qtest-<type>.deq.gguf);
//  - the whole model quantized by us (each tensor in the type llama.cpp's
//    file gives it) moves the first-step logits away from the f16 model's
//    by no more than 1.25x what llama.cpp's file does, both run here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/imatrix.h"
#include "model/runner.h"
#include "testdata.h"

namespace rf {
namespace {

struct LowBitCase {
  const char* name;
  DType type;
};

const LowBitCase kCases[] = {{"iq3_s", DType::IQ3_S},     {"iq3_xxs", DType::IQ3_XXS}, {"iq2_s", DType::IQ2_S},
                             {"iq2_xs", DType::IQ2_XS},   {"iq2_xxs", DType::IQ2_XXS}, {"iq1_m", DType::IQ1_M},
                             {"iq1_s", DType::IQ1_S}};

std::string quant_path(const std::string& name) { return test::testdata_path("quant/" + name); }

std::vector<float> f32_tensor(const gguf::File& f, const std::string& name, size_t* cols) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t || t->type != DType::F32) throw Error(str(f.path(), ": no f32 tensor ", name));
  std::vector<float> v(t->n_elements);
  std::memcpy(v.data(), f.tensor_data(*t), v.size() * sizeof(float));
  *cols = t->ne(0);
  return v;
}

class LowBitQuant : public ::testing::TestWithParam<LowBitCase> {};

TEST_P(LowBitQuant, WeightedErrorNoWorseThanLlamaCpp) {
  const LowBitCase c = GetParam();
  RF_REQUIRE_TESTDATA("quant/qtest.imatrix");
  RF_REQUIRE_TESTDATA("quant/qtest-f16.deq.gguf");
  RF_REQUIRE_TESTDATA(std::string("quant/qtest-") + c.name + ".deq.gguf");
  const auto imatrix = ImportanceMatrix::load(quant_path("qtest.imatrix"));
  auto orig = gguf::File::open(quant_path("qtest-f16.deq.gguf"));
  auto llama = gguf::File::open(quant_path(std::string("qtest-") + c.name + ".deq.gguf"));
  for (const char* tname : {"blk.0.attn_k.weight", "blk.0.ffn_down.weight"}) {
    SCOPED_TRACE(std::string(c.name) + " " + tname);
    size_t cols = 0;
    const std::vector<float> x = f32_tensor(*orig, tname, &cols);
    const std::vector<float> theirs = f32_tensor(*llama, tname, &cols);
    ASSERT_EQ(x.size(), theirs.size());
    const float* imp = imatrix.columns(tname, int64_t(cols));
    ASSERT_NE(imp, nullptr);
    std::vector<uint8_t> packed(row_bytes(c.type, cols));
    std::vector<float> ours(cols);
    double e_ours = 0, e_llama = 0, norm = 0;
    for (size_t r = 0; r < x.size() / cols; ++r) {
      const float* xr = &x[r * cols];
      quantize_row(c.type, xr, packed.data(), cols, imp);
      dequantize_row(c.type, packed.data(), ours.data(), cols);
      for (size_t j = 0; j < cols; ++j) {
        const double a = double(ours[j]) - xr[j], b = double(theirs[r * cols + j]) - xr[j];
        e_ours += imp[j] * a * a;
        e_llama += imp[j] * b * b;
        norm += imp[j] * double(xr[j]) * xr[j];
      }
    }
    // Relative: sqrt(sum imp (deq - x)^2 / sum imp x^2).
    const double r_ours = std::sqrt(e_ours / norm), r_llama = std::sqrt(e_llama / norm);
    std::printf("  %-8s %-22s importance-weighted error: ours %.5f  llama.cpp %.5f\n", c.name, tname, r_ours,
                r_llama);
    EXPECT_LE(r_ours, r_llama);
  }
}

// qtest-f16.gguf with every tensor in the type of llama.cpp's qtest-<type>.gguf,
// quantized by quantize_row with the importance matrix.
void write_our_model(const std::string& type_name, const std::string& out) {
  const auto imatrix = ImportanceMatrix::load(quant_path("qtest.imatrix"));
  auto src = gguf::File::open(quant_path("qtest-f16.gguf"));
  auto like = gguf::File::open(quant_path("qtest-" + type_name + ".gguf"));
  ThreadPool pool(2);
  gguf::Writer w;
  for (const auto& [k, v] : src->metadata())
    if (k != "general.alignment") w.set(k, v);
  for (const auto& t : src->tensors()) {
    const gguf::TensorInfo* theirs = like->find_tensor(t.name);
    ASSERT_NE(theirs, nullptr) << t.name;
    const DType target = theirs->type;
    const gguf::TensorInfo* info = &t;
    const gguf::File* file = src.get();
    const size_t cols = t.ne(0);
    const float* imp = imatrix.columns(t.name, int64_t(cols));
    w.add_tensor(t.name, target, t.dims, [info, file, target, imp, cols, &pool](uint8_t* dst) {
      const uint8_t* data = file->tensor_data(*info);
      if (target == info->type) {
        std::memcpy(dst, data, info->n_bytes);
        return;
      }
      const size_t in_rb = row_bytes(info->type, cols), out_rb = row_bytes(target, cols);
      pool.parallel_for(info->rows(), 8, [&](size_t r0, size_t r1) {
        std::vector<float> row(cols);
        for (size_t r = r0; r < r1; ++r) {
          dequantize_row(info->type, data + r * in_rb, row.data(), cols);
          quantize_row(target, row.data(), dst + r * out_rb, cols, imp);
        }
      });
    });
  }
  w.write(out);
}

std::vector<float> first_logits(const std::string& path, const std::vector<int32_t>& prompt) {
  CpuBackend backend(2);
  test::ModelRunner runner(path, backend);
  test::ModelRunner::Seq s;
  s.tokens = prompt;
  auto logits = runner.step({&s})[0];
  runner.release(s);
  return logits;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

TEST_P(LowBitQuant, LogitsWithinLlamaCppsError) {
  const LowBitCase c = GetParam();
  RF_REQUIRE_TESTDATA("quant/qtest.imatrix");
  RF_REQUIRE_TESTDATA("quant/qtest-f16.gguf");
  RF_REQUIRE_TESTDATA(std::string("quant/qtest-") + c.name + ".gguf");
  const std::string ours_path = (std::filesystem::temp_directory_path() /
                                 ("rf_test_qtest_" + std::string(c.name) + "_" + std::to_string(getpid()) + ".gguf"))
                                    .string();
  write_our_model(c.name, ours_path);
  // Prompts of 8 to 24 tokens over the 1024-token vocabulary (BOS first).
  double sum_ours = 0, sum_llama = 0;
  for (uint32_t p = 0; p < 4; ++p) {
    std::vector<int32_t> prompt = {1};
    for (uint32_t i = 0; i < 8 + 5 * p; ++i) prompt.push_back(int32_t(3 + (i * 131 + p * 577) % 1000));
    const auto f16 = first_logits(quant_path("qtest-f16.gguf"), prompt);
    const double e_ours = rel_l2(first_logits(ours_path, prompt), f16);
    const double e_llama = rel_l2(first_logits(quant_path(std::string("qtest-") + c.name + ".gguf"), prompt), f16);
    std::printf("  %-8s prompt %u: logits' relative L2 difference from f16: ours %.4f  llama.cpp %.4f\n", c.name,
                p, e_ours, e_llama);
    sum_ours += e_ours;
    sum_llama += e_llama;
  }
  std::filesystem::remove(ours_path);
  std::printf("  %-8s mean: ours %.4f  llama.cpp %.4f  (ratio %.3f)\n", c.name, sum_ours / 4, sum_llama / 4,
              sum_ours / sum_llama);
  EXPECT_LE(sum_ours, 1.25 * sum_llama);
}

INSTANTIATE_TEST_SUITE_P(Types, LowBitQuant, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace rf
