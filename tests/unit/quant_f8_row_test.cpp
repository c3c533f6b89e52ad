// FP8 weights (F8_E4M3_ROW, core/dtype.h) on the host: a row's layout (its
// f32 scale max|x| / 448 in a 16-byte header, then one e4m3 code per value,
// each the nearest e4m3 value to x / scale by core/fp8.h, itself tested
// against the format in core_fp8_test.cpp), dequantization as code value
// times scale, the dot product against a double-precision sum, the edge rows
// (zeros, NaN, infinities), sizes and a GGUF round trip. (Models with FP8
// weights: tests/model/fp8_weights_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/fp8.h"
#include "core/quant.h"
#include "gguf/reader.h"
#include "random_values.h"
#include "gguf/writer.h"

namespace rf {
namespace {

constexpr DType kF8 = DType::F8_E4M3_ROW;

float scale_of(const std::vector<uint8_t>& row) {
  float s;
  std::memcpy(&s, row.data(), 4);
  return s;
}


TEST(QuantF8Row, SizesAndHeader) {
  EXPECT_EQ(row_bytes(kF8, 64), 80u);
  EXPECT_EQ(row_bytes(kF8, 4096), 4112u);
  EXPECT_THROW(row_bytes(kF8, 48), Error);  // not a multiple of 32
  EXPECT_EQ(std::string(dtype_name(kF8)), "f8_e4m3_row");
  ASSERT_TRUE(dtype_info(uint32_t(kF8)));  // a type files may hold
  EXPECT_TRUE(can_quantize(kF8) && can_dequantize(kF8));
}

TEST(QuantF8Row, CodesAreTheNearestE4M3OfValueOverScale) {
  std::mt19937 rng(3);
  for (const float sd : {1e-3f, 0.02f, 1.0f, 300.0f}) {
    const size_t n = 256;
    auto x = test::randn(n, rng, sd);
    std::vector<uint8_t> q(row_bytes(kF8, n));
    quantize_row(kF8, x.data(), q.data(), n);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const float s = scale_of(q);
    EXPECT_EQ(s, amax / 448.0f) << sd;
    for (size_t i = 4; i < 16; ++i) EXPECT_EQ(q[i], 0) << "header byte " << i;
    for (size_t i = 0; i < n; ++i) {
      // The decoded value is within half a step of x / s: no other code is closer.
      const uint8_t c = q[16 + i];
      const double v = double(x[i]) / s, got = e4m3_to_float(c);
      for (int other = 0; other < 256; ++other) {
        if ((other & 0x7f) == 0x7f) continue;
        ASSERT_LE(std::fabs(got - v), std::fabs(double(e4m3_to_float(uint8_t(other))) - v) + 1e-12)
            << "x=" << x[i] << " code " << int(c) << " vs " << other;
      }
    }
    // The largest magnitude maps to +-448 exactly.
    int max_codes = 0;
    for (size_t i = 0; i < n; ++i) max_codes += (q[16 + i] & 0x7f) == 0x7e;
    EXPECT_GE(max_codes, 1);
  }
}

TEST(QuantF8Row, DequantizeAndDotMatchDoubleReference) {
  std::mt19937 rng(5);
  for (const size_t n : {32u, 96u, 4096u, 14336u}) {
    auto w = test::randn(n, rng, 0.05f);
    auto x = test::randn(n, rng, 1.0f);
    std::vector<uint8_t> q(row_bytes(kF8, n));
    quantize_row(kF8, w.data(), q.data(), n);
    std::vector<float> deq(n), deq_scalar(n);
    dequantize_row(kF8, q.data(), deq.data(), n);
    dequantize_row_scalar(kF8, q.data(), deq_scalar.data(), n);
    const float s = scale_of(q);
    double ref = 0, mag = 0, err2 = 0, w2 = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(deq[i], e4m3_to_float(q[16 + i]) * s);
      ASSERT_EQ(deq[i], deq_scalar[i]);
      ref += double(deq[i]) * x[i];
      mag += std::fabs(double(deq[i]) * x[i]);
      err2 += (double(deq[i]) - w[i]) * (double(deq[i]) - w[i]);
      w2 += double(w[i]) * w[i];
    }
    EXPECT_NEAR(dot_row(kF8, q.data(), x.data(), n), ref, 1e-5 * mag) << n;
    EXPECT_NEAR(dot_row_scalar(kF8, q.data(), x.data(), n), ref, 1e-5 * mag) << n;
    // e4m3 keeps 3 mantissa bits: a relative step of 1/8 to 1/16, so the
    // row's relative RMS error is a few percent.
    EXPECT_LT(std::sqrt(err2 / w2), 0.04) << n;
  }
}

// Every finite code decodes to its e4m3 value (both paths, subnormals
// included), and the dot product reads each one.
TEST(QuantF8Row, EveryCodeDecodes) {
  const size_t n = 256;
  std::vector<uint8_t> row(row_bytes(kF8, n), 0);
  const float one = 1.0f;
  std::memcpy(row.data(), &one, 4);
  for (size_t c = 0; c < n; ++c) row[16 + c] = (c & 0x7f) == 0x7f ? 0 : uint8_t(c);
  std::vector<float> a(n), b(n), x(n, 0.0f);
  dequantize_row(kF8, row.data(), a.data(), n);
  dequantize_row_scalar(kF8, row.data(), b.data(), n);
  for (size_t c = 0; c < n; ++c) {
    const float want = e4m3_to_float(row[16 + c]);
    EXPECT_EQ(a[c], want) << "code " << c;
    EXPECT_EQ(b[c], want) << "code " << c;
    x[c] = 1.0f;
    EXPECT_EQ(dot_row(kF8, row.data(), x.data(), n), want) << "code " << c;
    EXPECT_EQ(dot_row_scalar(kF8, row.data(), x.data(), n), want) << "code " << c;
    x[c] = 0.0f;
  }
}

TEST(QuantF8Row, EdgeRows) {
  const size_t n = 64;
  std::vector<uint8_t> q(row_bytes(kF8, n));
  std::vector<float> x(n, 0.0f), y(n);
  quantize_row(kF8, x.data(), q.data(), n);
  dequantize_row(kF8, q.data(), y.data(), n);
  EXPECT_EQ(scale_of(q), 1.0f);
  for (float v : y) EXPECT_EQ(v, 0.0f);

  x[3] = 1.0f;
  x[7] = std::numeric_limits<float>::quiet_NaN();
  quantize_row(kF8, x.data(), q.data(), n);
  dequantize_row(kF8, q.data(), y.data(), n);
  for (float v : y) EXPECT_TRUE(std::isnan(v));  // a NaN row reads back NaN

  x[7] = std::numeric_limits<float>::infinity();
  x[9] = -std::numeric_limits<float>::infinity();
  x[3] = 2.0f;
  quantize_row(kF8, x.data(), q.data(), n);
  dequantize_row(kF8, q.data(), y.data(), n);
  EXPECT_EQ(scale_of(q), 2.0f / 448.0f);
  EXPECT_EQ(y[3], 2.0f);
  EXPECT_EQ(y[7], 2.0f);  // saturated to the largest finite magnitude
  EXPECT_EQ(y[9], -2.0f);
}

TEST(QuantF8Row, GgufRoundTrip) {
  std::mt19937 rng(9);
  const uint64_t cols = 96, rows = 5;
  const size_t rb = row_bytes(kF8, cols);
  std::vector<uint8_t> q(rb * rows);
  for (uint64_t r = 0; r < rows; ++r) {
    auto x = test::randn(cols, rng, 0.3f);
    quantize_row(kF8, x.data(), q.data() + r * rb, cols);
  }
  const auto path = (std::filesystem::temp_directory_path() / "rf_quant_f8_row_test.gguf").string();
  {
    gguf::Writer w;
    w.set_string("general.architecture", "llama");
    w.add_tensor_bytes("blk.0.attn_q.weight", kF8, {cols, rows}, q);
    w.write(path);
  }
  auto f = gguf::File::open(path);
  const gguf::TensorInfo* t = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, kF8);
  EXPECT_EQ(t->n_bytes, rb * rows);  // each row's header counted
  EXPECT_EQ(std::memcmp(f->tensor_data(*t), q.data(), q.size()), 0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace rf
