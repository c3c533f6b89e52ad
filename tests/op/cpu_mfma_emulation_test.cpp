// The matrix-core GEMM tile of mfma_tile.h (what gemm_tiled.cu runs on CDNA
// GPUs) on emulated 64-wide wavefronts whose mma16 follows the documented
// operand layout of V_MFMA_F32_16X16X16F16, against a plain double loop:
// whole and partial tiles, k not a multiple of 16. Small-integer inputs, so
// every sum is exact. This checks the tile's indexing and its use of the
// layout, on any machine; that the hardware matches the layout is AMD's
// documentation (not run on AMD hardware here: docs/AMD.md).
#include <gtest/gtest.h>

#include <random>

#include "backend/cuda/matmul/mfma_tile.h"
#include "op/emulated_block.h"

namespace rf::gpu {
namespace {

void check_gemm(int n, int m, int k) {
  std::mt19937 rng(unsigned(n * 1000 + m * 10 + k));
  std::vector<float> x(size_t(n) * k), w(size_t(m) * k);
  for (float& v : x) v = float(int(rng() % 9) - 4);
  for (float& v : w) v = float(int(rng() % 9) - 4);
  std::vector<float> out(size_t(n) * m, -1e30f);
  for (int n0 = 0; n0 < n; n0 += mfma::kTile)
    for (int m0 = 0; m0 < m; m0 += mfma::kTile) {
      std::vector<float> xs(mfma::kTile * mfma::kStepK), ws(mfma::kTile * mfma::kStepK);
      EmulatedBlock block(mfma::kThreads, mfma::kWave);
      block.run([&](EmulatedBlock::Lanes& lanes) {
        mfma::gemm_tile(
            xs.data(), ws.data(), n0, m0, n, m, k, [&](int r, int c) { return x[size_t(r) * k + c]; },
            [&](int r, int c) { return w[size_t(r) * k + c]; },
            [&](int r, int c, float v) { out[size_t(r) * m + c] = v; }, lanes);
      });
    }
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < m; ++c) {
      double want = 0;
      for (int i = 0; i < k; ++i) want += double(x[size_t(r) * k + i]) * double(w[size_t(c) * k + i]);
      ASSERT_EQ(double(out[size_t(r) * m + c]), want) << n << "x" << m << "x" << k << " at [" << r << ", " << c << "]";
    }
}

TEST(MfmaEmulation, OneWholeTile) { check_gemm(64, 64, 16); }
TEST(MfmaEmulation, PartialTilesAndAShortLastKStep) { check_gemm(70, 130, 40); }
TEST(MfmaEmulation, FewRowsManyColumns) { check_gemm(5, 200, 48); }

}  // namespace
}  // namespace rf::gpu
