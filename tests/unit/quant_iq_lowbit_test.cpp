// The quantizers of the i-quants below 4 bits (IQ3_S, IQ3_XXS, IQ2_S,
// IQ2_XS, IQ2_XXS, IQ1_M, IQ1_S) without the shared test data:
//  - what a row decodes to is what the search intended: the weighted error
//    of the decoded row equals the error the search computed for it;
//  - importances steer the error (the importance-weighted error is lower
//    with them than without), and the error stays within each format's
//    range on Gaussian rows;
//  - all-zero, tiny, huge and non-finite rows give valid blocks that decode
//    to finite values (zeros to zeros); rows that are not whole 256-value
//    blocks are refused; the bytes do not depend on the thread.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "core/quant_blocks.h"

namespace rf {
namespace {

struct LowBit {
  DType type;
  double max_rel_error;  // relative L2 error bound on Gaussian rows (measured + ~15%)
};
const LowBit kTypes[] = {{DType::IQ3_S, 0.16},  {DType::IQ3_XXS, 0.20}, {DType::IQ2_S, 0.27},
                         {DType::IQ2_XS, 0.30}, {DType::IQ2_XXS, 0.34}, {DType::IQ1_M, 0.45},
                         {DType::IQ1_S, 0.50}};

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Importances spread over two orders of magnitude, as an imatrix's are.
std::vector<float> importances(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> e(-2.0f, 0.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = std::pow(10.0f, e(rng));
  return v;
}

// The search's own figure for the error of what it wrote.
double search_error(DType t, const std::vector<float>& x, const float* imp, std::vector<uint8_t>* q) {
  q->assign(row_bytes(t, x.size()), 0);
  double e = -1;
  const bool done = qimpl::quantize_iq1(t, x.data(), q->data(), x.size(), imp, &e) ||
                    qimpl::quantize_iq2(t, x.data(), q->data(), x.size(), imp, &e) ||
                    qimpl::quantize_iq3(t, x.data(), q->data(), x.size(), imp, &e);
  EXPECT_TRUE(done) << dtype_name(t);
  return e;
}

std::vector<float> decode(DType t, const std::vector<uint8_t>& q, size_t n) {
  std::vector<float> y(n);
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

double weighted_error(const std::vector<float>& x, const std::vector<float>& y, const float* w) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += (w ? w[i] : 1.0) * (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
  return e;
}

double rel_l2(const std::vector<float>& x, const std::vector<float>& y) {
  double den = 0;
  for (float v : x) den += double(v) * v;
  return std::sqrt(weighted_error(x, y, nullptr) / den);
}

TEST(IqLowBit, DecodesToWhatTheSearchComputed) {
  const size_t n = 256 * 12;
  for (const LowBit& c : kTypes) {
    SCOPED_TRACE(dtype_name(c.type));
    const auto x = gaussian(n, 3 + uint32_t(c.type), 0.05f);
    const auto imp = importances(n, 11);
    std::vector<uint8_t> q;
    for (const float* w : {static_cast<const float*>(nullptr), imp.data()}) {
      const double claimed = search_error(c.type, x, w, &q);
      const double actual = weighted_error(x, decode(c.type, q, n), w);
      // Equal but for summation order and the 1e-6 share zero importances get.
      EXPECT_NEAR(claimed, actual, 1e-5 * actual) << (w ? "with importances" : "plain");
      // quantize_row writes the same bytes.
      std::vector<uint8_t> again(q.size());
      quantize_row(c.type, x.data(), again.data(), n, w);
      EXPECT_EQ(again, q);
    }
  }
}

TEST(IqLowBit, ErrorWithinRangeAndImportancesSteerIt) {
  const size_t n = 256 * 16;
  for (const LowBit& c : kTypes) {
    SCOPED_TRACE(dtype_name(c.type));
    const auto x = gaussian(n, 40 + uint32_t(c.type));
    const auto imp = importances(n, 5);
    std::vector<uint8_t> plain_q(row_bytes(c.type, n)), weighted_q(plain_q.size());
    quantize_row(c.type, x.data(), plain_q.data(), n);
    quantize_row(c.type, x.data(), weighted_q.data(), n, imp.data());
    const auto plain = decode(c.type, plain_q, n), weighted = decode(c.type, weighted_q, n);
    const double e = rel_l2(x, plain);
    std::printf("  %-8s Gaussian rows: relative L2 error %.4f\n", dtype_name(c.type), e);
    EXPECT_LE(e, c.max_rel_error);
    EXPECT_GT(e, c.max_rel_error / 4);  // sanity: a lossy format
    EXPECT_LT(weighted_error(x, weighted, imp.data()), 0.95 * weighted_error(x, plain, imp.data()));
  }
}

TEST(IqLowBit, EdgeRowsGiveValidBlocks) {
  const size_t n = 512;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const LowBit& c : kTypes) {
    SCOPED_TRACE(dtype_name(c.type));
    std::vector<uint8_t> q(row_bytes(c.type, n));
    const std::vector<float> zeros(n, 0.0f);
    quantize_row(c.type, zeros.data(), q.data(), n);
    for (float v : decode(c.type, q, n)) ASSERT_EQ(v, 0.0f);
    std::vector<std::vector<float>> rows;
    for (float mag : {1e-30f, 1e-8f, 1e4f, 1e30f, 3e38f}) rows.push_back(gaussian(n, 9, mag));
    auto odd = gaussian(n, 10);
    odd[3] = nan, odd[100] = inf, odd[300] = -inf;
    rows.push_back(odd);
    rows.push_back(std::vector<float>(n, nan));
    rows.push_back(std::vector<float>(n, -inf));
    auto spike = std::vector<float>(n, 0.0f);
    spike[77] = -2.5f;
    rows.push_back(spike);
    for (const auto& x : rows) {
      const std::vector<float> imp(n, 0.0f);  // all-zero importances too
      for (const float* w : {static_cast<const float*>(nullptr), imp.data()}) {
        quantize_row(c.type, x.data(), q.data(), n, w);
        for (float v : decode(c.type, q, n)) ASSERT_TRUE(std::isfinite(v));
      }
    }
    // A lone value among zeros keeps its sign, and the row beats all zeros
    // (the IQ2 and IQ3 grids have no zero: the zeros cost something too).
    quantize_row(c.type, spike.data(), q.data(), n);
    const auto y = decode(c.type, q, n);
    EXPECT_LT(y[77], -0.5f);
    EXPECT_LT(weighted_error(spike, y, nullptr), 0.6 * 2.5 * 2.5);  // IQ2_XXS: 0.52 is optimal
  }
}

TEST(IqLowBit, RefusesPartialBlocks) {
  std::vector<float> x(1024, 0.5f);
  std::vector<uint8_t> q(4096);
  for (const LowBit& c : kTypes) {
    EXPECT_TRUE(can_quantize(c.type)) << dtype_name(c.type);
    for (size_t n : {size_t(32), size_t(128), size_t(300), size_t(256 + 32)})
      EXPECT_THROW(quantize_row(c.type, x.data(), q.data(), n), Error) << dtype_name(c.type) << " n=" << n;
  }
}

TEST(IqLowBit, RowsQuantizeIdenticallyFromManyThreads) {
  const size_t n = 1024, rows = 8;
  const auto x = gaussian(n * rows, 77);
  const auto imp = importances(n, 78);
  for (const LowBit& c : kTypes) {
    const size_t rb = row_bytes(c.type, n);
    std::vector<uint8_t> serial(rb * rows), parallel(rb * rows);
    for (size_t r = 0; r < rows; ++r) quantize_row(c.type, &x[r * n], &serial[r * rb], n, imp.data());
    std::vector<std::thread> threads;
    for (size_t k = 0; k < 4; ++k)
      threads.emplace_back([&, k] {
        for (size_t r = k; r < rows; r += 4) quantize_row(c.type, &x[r * n], &parallel[r * rb], n, imp.data());
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(serial, parallel) << dtype_name(c.type);
  }
}

}  // namespace
}  // namespace rf
