// The CPU matmul kernels (backend/cpu/cpu_qdot.h) against a double-precision
// reference, for every kernel set this CPU runs (the plain C++ set always):
//  - the SIMD activation quantizers give the scalar ones' bytes exactly, and
//    the scalar ones keep |x - d*q| <= d/2 with d = max|x|/127 and exact sums;
//  - each weight format's kernel gives a row the same bits whether it runs
//    alone or beside up to 3 other rows, and, for 1..4 activation rows, equals
//    sum_i w_i * (d_x q_x)_i in double over the reference dequantization
//    (dequantize_row) of w and the quantized activations, to f32 rounding of
//    the per-block products: |err| <= 2e-6 * sum_i |w_i x_i| + 1e-30;
//  - cpu::matmul through each set (n = 1..9 rows, m not a multiple of the
//    weight tile, k not a multiple of 256 where the format allows) against
//    the same reference, and against f32 activations within the 8-bit
//    activations' error (NMSE 3e-4).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_qdot.h"
#include "backend/tensor.h"
#include "core/quant.h"
#include "core/quant_blocks.h"
#include "op/op_test_util.h"

namespace rf::test {
namespace {

using cpu::ActFormat;
using cpu::KernelIsa;

std::vector<KernelIsa> sets() {
  std::vector<KernelIsa> out;
  for (KernelIsa i : {KernelIsa::Scalar, KernelIsa::Avx2, KernelIsa::Avx512Vnni})
    if (cpu::isa_supported(i)) out.push_back(i);
  return out;
}

const DType kTypes[] = {DType::F32,    DType::F16,    DType::BF16,   DType::Q8_0,   DType::Q4_0,  DType::Q4_1,
                        DType::Q5_0,   DType::Q5_1,   DType::Q2_K,   DType::Q3_K,   DType::Q4_K,  DType::Q5_K,
                        DType::Q6_K,   DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4,  DType::IQ2_XXS, DType::IQ2_XS,
                        DType::IQ2_S,  DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S,  DType::IQ1_M};

// Column counts for a format: odd multiples of its block (float types: not
// a multiple of the SIMD width).
std::vector<int> ks_for(DType t) {
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16) return {1, 7, 16, 33, 100, 264};
  if (info(t).block_size == 32) return {32, 96, 288, 544};
  return {256, 768};
}

// The activation row as the kernel sees it, back in f32 (d * q per block).
std::vector<float> act_values(ActFormat f, const std::vector<uint8_t>& row, const std::vector<float>& x, size_t k) {
  std::vector<float> v(k);
  if (f == ActFormat::F32) return x;
  for (size_t i = 0; i < k; ++i) {
    if (f == ActFormat::Q8_32) {
      const auto* b = reinterpret_cast<const cpu::BlockQ8_32*>(row.data()) + i / 32;
      v[i] = b->d * float(b->qs[i % 32]);
    } else {
      const auto* b = reinterpret_cast<const BlockQ8_K*>(row.data()) + i / 256;
      v[i] = b->d * float(b->qs[i % 256]);
    }
  }
  return v;
}

TEST(CpuQdot, QuantizersMatchScalarAndDefinition) {
  std::mt19937 rng(7);
  for (size_t n : {size_t(256), size_t(1024)}) {
    auto x = randn(n, rng, 3.0f);
    for (size_t i = 0; i < 32; ++i) x[i] = 0.0f;  // one all-zero block of 32
    std::vector<cpu::BlockQ8_32> a(n / 32), b(n / 32);
    std::vector<BlockQ8_K> c(n / 256), d(n / 256);
    cpu::qdot::quantize_q8_32_scalar(x.data(), a.data(), n);
    cpu::qdot::quantize_q8_k_scalar(x.data(), c.data(), n);
    for (size_t bi = 0; bi < n / 32; ++bi) {
      float amax = 0;
      int sum = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[bi * 32 + i]));
      EXPECT_EQ(a[bi].d, amax / 127.0f);
      for (int i = 0; i < 32; ++i) {
        EXPECT_LE(std::fabs(x[bi * 32 + i] - a[bi].d * a[bi].qs[i]), a[bi].d * 0.5f * 1.0001f);
        sum += a[bi].qs[i];
      }
      EXPECT_EQ(a[bi].s, a[bi].d * float(sum));
    }
    for (size_t bi = 0; bi < n / 256; ++bi)
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += c[bi].qs[g * 16 + i];
        EXPECT_EQ(c[bi].bsums[g], sum);
      }
    if (cpu::isa_supported(KernelIsa::Avx2)) {
      cpu::qdot::quantize_q8_32_avx2(x.data(), b.data(), n);
      cpu::qdot::quantize_q8_k_avx2(x.data(), d.data(), n);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])), 0);
      EXPECT_EQ(std::memcmp(c.data(), d.data(), c.size() * sizeof(c[0])), 0);
    }
  }
}

// One weight row against nr activation rows through the kernel.
void check_kernel(KernelIsa isa, DType t, int k, uint32_t seed) {
  const cpu::KernelSet& ks = cpu::kernel_set(isa);
  const cpu::WeightKernel wk = ks.lookup(t);
  ASSERT_NE(wk.act, ActFormat::None) << dtype_name(t);
  std::mt19937 rng(seed);
  const auto w = random_weight(t, 1, k, rng, 0.5f);
  std::vector<float> wf(static_cast<size_t>(k) + 0);
  dequantize_row(t, w.data(), wf.data(), size_t(k));
  const size_t xrb = cpu::act_row_bytes(wk.act, size_t(k));
  std::vector<uint8_t> xq(xrb * cpu::kMaxRows);
  std::vector<std::vector<float>> xv;
  for (int j = 0; j < cpu::kMaxRows; ++j) {
    const auto x = randn(size_t(k), rng);
    std::vector<uint8_t> row(xrb);
    cpu::quantize_act_row(ks, wk.act, x.data(), row.data(), size_t(k));
    std::copy(row.begin(), row.end(), xq.begin() + ptrdiff_t(j * xrb));
    xv.push_back(act_values(wk.act, row, x, size_t(k)));
  }
  // Each row alone: a row's result must not depend on the rows beside it
  // (a token's output is the same alone and inside a batch).
  std::vector<float> alone(cpu::kMaxRows);
  for (int j = 0; j < cpu::kMaxRows; ++j) wk.dot(w.data(), xq.data() + size_t(j) * xrb, xrb, 1, size_t(k), &alone[size_t(j)], 1);
  for (int nr = 1; nr <= cpu::kMaxRows; ++nr) {
    std::vector<float> out(size_t(nr) * 3, -1.0f);
    wk.dot(w.data(), xq.data(), xrb, nr, size_t(k), out.data(), 3);
    for (int j = 0; j < nr; ++j) {
      EXPECT_EQ(out[size_t(j) * 3], alone[size_t(j)])
          << cpu::isa_name(isa) << " " << dtype_name(t) << " k " << k << " nr " << nr << " row " << j;
      double ref = 0, mag = 0;
      for (int i = 0; i < k; ++i) {
        ref += double(wf[size_t(i)]) * xv[size_t(j)][size_t(i)];
        mag += std::fabs(double(wf[size_t(i)]) * xv[size_t(j)][size_t(i)]);
      }
      EXPECT_NEAR(out[size_t(j) * 3], ref, 2e-6 * mag + 1e-30)
          << cpu::isa_name(isa) << " " << dtype_name(t) << " k " << k << " nr " << nr << " row " << j;
    }
  }
}

TEST(CpuQdot, KernelsMatchDoubleReference) {
  for (KernelIsa isa : sets())
    for (DType t : kTypes)
      for (int k : ks_for(t)) check_kernel(isa, t, k, uint32_t(k) * 31 + uint32_t(t));
}

// The float kernels keep the same chains in every x86 set (the AVX-512
// set's 512-bit registers hold the 256-bit kernel's chains side by side):
// the same bits, so results do not depend on which set the CPU picks; and
// the AVX-512 set's two-row kernel gives each row those bits.
TEST(CpuQdot, FloatKernelsGiveTheSameBitsInBothX86Sets) {
  if (!cpu::isa_supported(KernelIsa::Avx2) || !cpu::isa_supported(KernelIsa::Avx512Vnni))
    GTEST_SKIP() << "this CPU runs fewer than both x86 sets";
  const cpu::KernelSet &a = cpu::kernel_set(KernelIsa::Avx2), &b = cpu::kernel_set(KernelIsa::Avx512Vnni);
  std::mt19937 rng(5);
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int k : {7, 32, 33, 100, 264, 2048 + 24}) {
      const auto w = random_weight(t, 1, k, rng, 0.5f);
      std::vector<float> x;
      for (int j = 0; j < cpu::kMaxRows; ++j) {
        const auto r = randn(size_t(k), rng);
        x.insert(x.end(), r.begin(), r.end());
      }
      for (int nr = 1; nr <= cpu::kMaxRows; ++nr) {
        std::vector<float> oa(static_cast<size_t>(nr)), ob(static_cast<size_t>(nr));
        a.lookup(t).dot(w.data(), x.data(), size_t(k) * 4, nr, size_t(k), oa.data(), 1);
        b.lookup(t).dot(w.data(), x.data(), size_t(k) * 4, nr, size_t(k), ob.data(), 1);
        for (int j = 0; j < nr; ++j)
          EXPECT_EQ(oa[size_t(j)], ob[size_t(j)]) << dtype_name(t) << " k " << k << " nr " << nr << " row " << j;
        // Two weight rows at once: each row's bits alone.
        if (!b.lookup(t).dot2) continue;
        const auto w2 = random_weight(t, 1, k, rng, 0.5f);
        std::vector<uint8_t> both(w);
        both.insert(both.end(), w2.begin(), w2.end());
        std::vector<float> o2(static_cast<size_t>(nr) * 2), o1(static_cast<size_t>(nr));
        b.lookup(t).dot2(both.data(), w.size(), x.data(), size_t(k) * 4, nr, size_t(k), o2.data(), 2);
        b.lookup(t).dot(w2.data(), x.data(), size_t(k) * 4, nr, size_t(k), o1.data(), 1);
        for (int j = 0; j < nr; ++j) {
          EXPECT_EQ(o2[size_t(j) * 2], ob[size_t(j)]) << "dot2 row 0 " << dtype_name(t) << " k " << k << " nr " << nr;
          EXPECT_EQ(o2[size_t(j) * 2 + 1], o1[size_t(j)]) << "dot2 row 1 " << dtype_name(t) << " k " << k << " nr " << nr;
        }
      }
    }
}

TEST(CpuQdot, AllSetsCoverTheSameFormats) {
  for (KernelIsa isa : sets())
    for (DType t : kTypes) {
      const auto a = cpu::kernel_set(isa).lookup(t), s = cpu::kernel_set(KernelIsa::Scalar).lookup(t);
      EXPECT_EQ(int(a.act), int(s.act)) << cpu::isa_name(isa) << " " << dtype_name(t);
    }
  EXPECT_EQ(int(cpu::kernel_set(KernelIsa::Scalar).lookup(DType::F8_E4M3_ROW).act), int(ActFormat::None));
}

// cpu::matmul through a kernel set: tiles of activation rows and weight rows.
void check_matmul(ThreadPool& pool, KernelIsa isa, DType t, int n, int k, int m, uint32_t seed) {
  const cpu::KernelSet& ks = cpu::kernel_set(isa);
  const cpu::WeightKernel wk = ks.lookup(t);
  std::mt19937 rng(seed);
  const auto w = random_weight(t, m, k, rng, 0.5f);
  const auto x = randn(size_t(n) * k, rng);
  std::vector<float> out(size_t(n) * m, -1.0f);
  Tensor xt = make_tensor(const_cast<float*>(x.data()), DType::F32, k, n);
  Tensor wt = make_tensor(const_cast<uint8_t*>(w.data()), t, k, m);
  Tensor ot = make_tensor(out.data(), DType::F32, m, n);
  cpu::MatmulScratch scratch;
  cpu::matmul(pool, xt, wt, ot, scratch, ks);
  const size_t rb = row_bytes(t, uint64_t(k)), xrb = cpu::act_row_bytes(wk.act, size_t(k));
  std::vector<float> wf(static_cast<size_t>(k) + 0);
  double err2 = 0, ref2 = 0;
  for (int r = 0; r < m; ++r) {
    dequantize_row(t, w.data() + size_t(r) * rb, wf.data(), size_t(k));
    for (int j = 0; j < n; ++j) {
      const std::vector<float> xr(x.begin() + ptrdiff_t(j) * k, x.begin() + ptrdiff_t(j + 1) * k);
      std::vector<uint8_t> row(xrb);
      cpu::quantize_act_row(ks, wk.act, xr.data(), row.data(), size_t(k));
      const auto xv = act_values(wk.act, row, xr, size_t(k));
      double ref = 0, mag = 0, exact = 0;
      for (int i = 0; i < k; ++i) {
        ref += double(wf[size_t(i)]) * xv[size_t(i)];
        mag += std::fabs(double(wf[size_t(i)]) * xv[size_t(i)]);
        exact += double(wf[size_t(i)]) * xr[size_t(i)];
      }
      const float got = out[size_t(j) * m + size_t(r)];
      ASSERT_NEAR(got, ref, 2e-6 * mag + 1e-30)
          << cpu::isa_name(isa) << " " << dtype_name(t) << " n " << n << " k " << k << " row " << r << " x " << j;
      err2 += (got - exact) * (got - exact);
      ref2 += exact * exact;
    }
  }
  // 8-bit activations (d = max/127 per 32 or 256) leave an NMSE of ~2e-5 to
  // ~5e-5 against f32 activations; every output of a row shares that row's
  // rounding, so a small case scatters a few times around it: 3e-4.
  EXPECT_LT(err2 / ref2, 3e-4) << cpu::isa_name(isa) << " " << dtype_name(t);
}

TEST(CpuQdot, MatmulTilesMatchReference) {
  ThreadPool pool(2);
  for (KernelIsa isa : sets())
    for (DType t : {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q5_1, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                    DType::Q6_K, DType::IQ4_XS})
      for (int n = 1; n <= 9; ++n) {
        const int k = info(t).block_size == 32 ? 96 : (t == DType::F16 ? 72 : 512);
        check_matmul(pool, isa, t, n, k, 13, uint32_t(n * 7 + int(t)));
      }
}

// Wide enough that the activation rows are quantized on the pool too, with
// weight rows split over several tiles per thread.
TEST(CpuQdot, MatmulLargeShapes) {
  ThreadPool pool(2);
  for (KernelIsa isa : sets()) {
    check_matmul(pool, isa, DType::Q4_K, 9, 4096, 70, 11);
    check_matmul(pool, isa, DType::Q8_0, 5, 8192, 37, 12);
  }
}

}  // namespace
}  // namespace rf::test
