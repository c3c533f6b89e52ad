// Quantization formats without the shared test data: block sizes against
// the dtype table, f16/bf16 conversions on special values and on every bit
// pattern, quantize->dequantize round trips on random data (error below a
// per-type bound and no worse than plain max-abs rounding, computed here),
// dot_row against a double-precision dot of the dequantized row, the AVX2
// and scalar paths against each other, odd sizes, and the errors raised for
// partial blocks and unsupported types.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "core/quant_blocks.h"

namespace rf {
namespace {

const DType kQuantTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                             DType::Q8_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                             DType::Q6_K, DType::Q8_K};
const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                           DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1, DType::Q2_K,
                           DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, x.size()));
  quantize_row(t, x.data(), q.data(), x.size());
  return q;
}

std::vector<float> dequantize(DType t, const std::vector<uint8_t>& q, size_t n) {
  std::vector<float> y(n);
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

double rel_l2(const std::vector<float>& approx, const std::vector<float>& exact) {
  double num = 0, den = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    num += (double(approx[i]) - exact[i]) * (double(approx[i]) - exact[i]);
    den += double(exact[i]) * exact[i];
  }
  return std::sqrt(num / den);
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

TEST(QuantBlocks, SizesMatchDtypeTable) {
  const std::pair<DType, size_t> sizes[] = {
      {DType::Q4_0, sizeof(BlockQ4_0)}, {DType::Q4_1, sizeof(BlockQ4_1)},
      {DType::Q5_0, sizeof(BlockQ5_0)}, {DType::Q5_1, sizeof(BlockQ5_1)},
      {DType::Q8_0, sizeof(BlockQ8_0)}, {DType::Q8_1, sizeof(BlockQ8_1)},
      {DType::Q2_K, sizeof(BlockQ2_K)}, {DType::Q3_K, sizeof(BlockQ3_K)},
      {DType::Q4_K, sizeof(BlockQ4_K)}, {DType::Q5_K, sizeof(BlockQ5_K)},
      {DType::Q6_K, sizeof(BlockQ6_K)}, {DType::Q8_K, sizeof(BlockQ8_K)}};
  for (const auto& [t, size] : sizes) {
    EXPECT_EQ(info(t).type_size, size) << dtype_name(t);
    EXPECT_EQ(int(info(t).block_size), qimpl::layout(t).block_size) << dtype_name(t);
  }
}

// Q8_1 and Q8_K have no llama.cpp-written reference file: check their
// layouts on hand-built blocks (value = d * q; Q8_1's s and Q8_K's bsums are
// not part of the value).
TEST(QuantBlocks, HandBuiltQ8_1AndQ8_K) {
  BlockQ8_1 b1[2];
  for (int k = 0; k < 2; ++k) {
    b1[k].d = f32_to_f16(k ? -0.25f : 0.5f);
    b1[k].s = f32_to_f16(1000.0f);
    for (int i = 0; i < 32; ++i) b1[k].qs[i] = int8_t(i * 8 - 128 + k);
  }
  float y[256];
  dequantize_row(DType::Q8_1, b1, y, 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], (i < 32 ? 0.5f : -0.25f) * float((i % 32) * 8 - 128 + i / 32));

  BlockQ8_K bk{};
  bk.d = 0.125f;
  for (int i = 0; i < 256; ++i) bk.qs[i] = int8_t(i - 128);
  dequantize_row(DType::Q8_K, &bk, y, 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.125f * float(i - 128));

  // Quantizing fills the auxiliary fields consistently.
  const auto x = gaussian(256, 3);
  quantize_row(DType::Q8_K, x.data(), &bk, 256);
  for (int j = 0; j < 16; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += bk.qs[16 * j + i];
    EXPECT_EQ(bk.bsums[j], sum);
  }
  quantize_row(DType::Q8_1, x.data(), b1, 64);
  for (int k = 0; k < 2; ++k) {
    int sum = 0;
    for (int i = 0; i < 32; ++i) sum += b1[k].qs[i];
    EXPECT_EQ(b1[k].s, f32_to_f16(float(sum) * f16_to_f32(b1[k].d)));
  }
}

// --------------------------------------------------------------- f16 / bf16

TEST(QuantF16, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  struct Case { float in; uint16_t f16; };
  const Case cases[] = {
      {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3C00}, {-2.0f, 0xC000},
      {65504.0f, 0x7BFF},                   // largest finite
      {65519.99f, 0x7BFF}, {65520.0f, 0x7C00},  // rounds to inf from the halfway point
      {inf, 0x7C00}, {-inf, 0xFC00},
      {std::ldexp(1.0f, -14), 0x0400},      // smallest normal
      {std::ldexp(1.0f, -24), 0x0001},      // smallest subnormal
      {std::ldexp(1.0f, -25), 0x0000},      // halfway to 0: ties to even
      {std::ldexp(3.0f, -25), 0x0002},      // 1.5 ulp: ties to even (2)
      {std::ldexp(1023.0f, -24), 0x03FF},   // largest subnormal
      {1.0f + std::ldexp(1.0f, -11), 0x3C00},  // tie, even stays
      {1.0f + std::ldexp(3.0f, -11), 0x3C02},  // tie, odd rounds up
      {1e-10f, 0x0000}, {-1e-10f, 0x8000}};
  for (const Case& c : cases) {
    uint16_t h;
    quantize_row(DType::F16, &c.in, &h, 1);
    EXPECT_EQ(h, c.f16) << c.in;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  uint16_t h;
  quantize_row(DType::F16, &nan, &h, 1);
  EXPECT_EQ(h & 0x7C00, 0x7C00);
  EXPECT_NE(h & 0x03FF, 0);
}

TEST(QuantF16, EveryBitPatternRoundTrips) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i);
  std::vector<float> f(all.size()), f_scalar(all.size());
  dequantize_row(DType::F16, all.data(), f.data(), all.size());
  dequantize_row_scalar(DType::F16, all.data(), f_scalar.data(), all.size());
  std::vector<uint16_t> back(all.size());
  quantize_row(DType::F16, f.data(), back.data(), f.size());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_TRUE(same_bits(f[i], f_scalar[i])) << i;
    const bool nan = (i & 0x7C00) == 0x7C00 && (i & 0x03FF);
    if (nan) {  // quiet NaN with the payload kept, as ggml converts it
      const uint32_t want = (uint32_t(i & 0x8000) << 16) | 0x7FC00000u | (uint32_t(i & 0x03FF) << 13);
      ASSERT_EQ(f32_to_bits(f[i]), want) << i;
      continue;
    }
    ASSERT_EQ(back[i], all[i]) << "f16 bits " << i << " -> " << f[i];
    // Independent value: sign * mantissa * 2^exponent.
    const int e = int(i >> 10) & 31, m = int(i & 1023);
    const double mag = e == 0 ? std::ldexp(m, -24) : e == 31 ? INFINITY : std::ldexp(1024 + m, e - 25);
    ASSERT_EQ(double(f[i]), (i & 0x8000) ? -mag : mag) << i;
  }
}

TEST(QuantBF16, SpecialValuesAndEveryPattern) {
  struct Case { float in; uint16_t bf16; };
  const Case cases[] = {
      {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3F80},
      {1.0f + std::ldexp(1.0f, -8), 0x3F80},   // tie, even stays
      {1.0f + std::ldexp(3.0f, -8), 0x3F82},   // tie, odd rounds up
      {1.0f + std::ldexp(1.0f, -9), 0x3F80},   // below half
      {std::numeric_limits<float>::infinity(), 0x7F80},
      {std::numeric_limits<float>::max(), 0x7F80},  // rounds up to inf
      {std::numeric_limits<float>::denorm_min(), 0x0000}};
  for (const Case& c : cases) {
    uint16_t h;
    quantize_row(DType::BF16, &c.in, &h, 1);
    EXPECT_EQ(h, c.bf16) << c.in;
  }
  const float snan = bits_to_f32(0x7F800001);  // signalling NaN must stay NaN
  uint16_t h;
  quantize_row(DType::BF16, &snan, &h, 1);
  EXPECT_TRUE(std::isnan(bf16_to_f32(h)));

  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = uint16_t(i);
  std::vector<float> f(all.size()), f_scalar(all.size());
  dequantize_row(DType::BF16, all.data(), f.data(), all.size());
  dequantize_row_scalar(DType::BF16, all.data(), f_scalar.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(f32_to_bits(f[i]), uint32_t(i) << 16) << i;
    ASSERT_EQ(f32_to_bits(f_scalar[i]), uint32_t(i) << 16) << i;
  }
}

// ---------------------------------------------------------- round trips

// Upper bounds on the relative L2 error for N(0,1) data (llama.cpp's figures
// on the Gaussian-like test tensors, see quant_ggml_test.cpp).
double error_bound(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 3e-4;   // 2^-11 relative rounding, rms about a third of that
    case DType::BF16: return 3e-3;  // 2^-8
    case DType::Q2_K: return 0.296;
    case DType::Q3_K: return 0.152;
    case DType::Q4_0: return 0.087;
    case DType::Q4_1: return 0.079;
    case DType::Q4_K: return 0.072;
    case DType::Q5_0: return 0.043;
    case DType::Q5_1: return 0.038;
    case DType::Q5_K: return 0.036;
    case DType::Q6_K: return 0.018;
    case DType::Q8_0: case DType::Q8_1: return 0.0054;
    // One scale per 256: the step follows max|x| over 256 values (about 3
    // sigma, under 4.2 sigma) instead of over 32; rms error step/sqrt(12).
    case DType::Q8_K: return 4.2 / (127 * std::sqrt(12.0));
    default: return 0;
  }
}

TEST(QuantRoundTrip, RandomDataWithinBound) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtype_name(t));
    const auto x = gaussian(256 * 16, 7 + uint32_t(t), 0.02f);
    const auto y = dequantize(t, quantize(t, x), x.size());
    const double e = rel_l2(y, x);
    EXPECT_LE(e, error_bound(t));
    if (t != DType::F32) {
      EXPECT_GT(e, error_bound(t) / 20) << "suspiciously exact";
    }
    // Deterministic: the same input gives the same bytes.
    EXPECT_EQ(quantize(t, x), quantize(t, x));
  }
}

// Plain max-abs rounding (ggml's reference scheme for the 32-blocks, and its
// obvious analogue for the super-blocks), returning dequantized values.
std::vector<float> naive_roundtrip(DType t, const std::vector<float>& x) {
  struct Spec { int group, qlo, qhi; bool affine; int slo, shi, mmax; bool super; };
  Spec s;
  switch (t) {
    case DType::Q4_0: s = {32, -8, 7, false, 0, 0, 0, false}; break;
    case DType::Q5_0: s = {32, -16, 15, false, 0, 0, 0, false}; break;
    case DType::Q8_0: case DType::Q8_1: s = {32, -127, 127, false, 0, 0, 0, false}; break;
    case DType::Q4_1: s = {32, 0, 15, true, 0, 0, 0, false}; break;
    case DType::Q5_1: s = {32, 0, 31, true, 0, 0, 0, false}; break;
    case DType::Q2_K: s = {16, 0, 3, true, 0, 15, 15, true}; break;
    case DType::Q3_K: s = {16, -4, 3, false, -32, 31, 0, true}; break;
    case DType::Q4_K: s = {32, 0, 15, true, 0, 63, 63, true}; break;
    case DType::Q5_K: s = {32, 0, 31, true, 0, 63, 63, true}; break;
    case DType::Q6_K: s = {16, -32, 31, false, -128, 127, 0, true}; break;
    default: return {};
  }
  auto rnd = [](double v, int lo, int hi) { return int(std::fmin(hi, std::fmax(lo, std::nearbyint(v)))); };
  auto h = [](double v) { return double(f16_to_f32(f32_to_f16(float(v)))); };
  std::vector<float> y(x.size());
  const size_t super = s.super ? 256 : size_t(s.group);
  for (size_t b = 0; b < x.size(); b += super) {
    const int ng = int(super) / s.group;
    std::vector<double> scale(ng), mins(ng);
    for (int g = 0; g < ng; ++g) {
      const float* v = &x[b + size_t(g) * s.group];
      double mn = 0, mx = v[0], amax = 0, xm = 0;
      mn = s.super ? 0 : v[0];
      for (int i = 0; i < s.group; ++i) {
        mn = std::fmin(mn, v[i]);
        mx = std::fmax(mx, v[i]);
        if (std::fabs(v[i]) > amax) { amax = std::fabs(v[i]); xm = v[i]; }
      }
      scale[g] = s.affine ? (mx - mn) / s.qhi : xm / s.qlo;
      mins[g] = -mn;
    }
    std::vector<double> sc(ng), mn(ng);
    if (s.super) {  // integer scales on a max-abs super-scale
      double smax = 0, sm = 0, mmax = 0;
      for (int g = 0; g < ng; ++g) {
        if (std::fabs(scale[g]) > smax) { smax = std::fabs(scale[g]); sm = scale[g]; }
        mmax = std::fmax(mmax, mins[g]);
      }
      const double d = h(s.affine ? sm / s.shi : sm / s.slo), dmin = h(mmax / std::max(1, s.mmax));
      for (int g = 0; g < ng; ++g) {
        sc[g] = double(float(d) * float(d ? rnd(scale[g] / d, s.slo, s.shi) : 0));
        mn[g] = s.affine ? double(float(dmin) * float(dmin ? rnd(mins[g] / dmin, 0, s.mmax) : 0)) : 0;
      }
    } else {
      for (int g = 0; g < ng; ++g) { sc[g] = h(scale[g]); mn[g] = s.affine ? -h(-mins[g]) : 0; }
    }
    for (int g = 0; g < ng; ++g) {
      for (int i = 0; i < s.group; ++i) {
        const size_t k = b + size_t(g) * s.group + i;
        const int l = sc[g] ? rnd((x[k] + mn[g]) / sc[g], s.qlo, s.qhi) : 0;
        y[k] = float(sc[g] * l - mn[g]);
      }
    }
  }
  return y;
}

TEST(QuantRoundTrip, NoWorseThanMaxAbsRounding) {
  for (DType t : kQuantTypes) {
    if (t == DType::Q8_K) continue;
    SCOPED_TRACE(dtype_name(t));
    for (uint32_t seed = 0; seed < 3; ++seed) {
      // Gaussian, and heavy-tailed (Gaussian cubed) rows.
      auto x = gaussian(256 * 8, 100 + seed);
      if (seed == 2) for (auto& v : x) v = v * v * v;
      const double ours = rel_l2(dequantize(t, quantize(t, x), x.size()), x);
      const double naive = rel_l2(naive_roundtrip(t, x), x);
      EXPECT_LE(ours, naive) << "seed " << seed;
      EXPECT_GT(ours, 0.3 * naive) << "seed " << seed;  // sanity: same kind of format
    }
  }
}

TEST(QuantRoundTrip, EdgeInputs) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtype_name(t));
    const size_t n = 512;
    // All zeros: exact zeros back.
    const std::vector<float> zeros(n, 0.0f);
    for (float v : dequantize(t, quantize(t, zeros), n)) ASSERT_EQ(v, 0.0f);
    // One outlier among small values: the outlier survives within a few %.
    auto x = gaussian(n, 5, 1e-3f);
    x[37] = 50.0f;
    auto y = dequantize(t, quantize(t, x), n);
    EXPECT_NEAR(y[37], 50.0f, 50.0f * 0.3f);
    for (float v : y) ASSERT_TRUE(std::isfinite(v));
    // Constant rows.
    const std::vector<float> c(n, -0.75f);
    y = dequantize(t, quantize(t, c), n);
    for (float v : y) ASSERT_NEAR(v, -0.75f, 0.75f * 0.01f);
    // Other scales: the same relative error; extreme ones stay finite (the
    // f16 scales lose precision near their subnormal range, as in ggml).
    for (float mag : {1e-2f, 1e3f}) {
      const auto z = gaussian(n, 9, mag);
      EXPECT_LE(rel_l2(dequantize(t, quantize(t, z), n), z), error_bound(t) * 1.2) << mag;
    }
    for (float mag : {1e-7f, 3e3f}) {
      for (float v : dequantize(t, quantize(t, gaussian(n, 9, mag)), n)) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

// ----------------------------------------------------------------- dot_row

double dot_ref(const std::vector<float>& w, const float* x) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += double(w[i]) * x[i];
  return s;
}
double abs_dot(const std::vector<float>& w, const float* x) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += std::fabs(double(w[i]) * x[i]);
  return s;
}

TEST(QuantDot, MatchesDoubleDotOfDequantizedRow) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtype_name(t));
    const size_t bs = info(t).block_size;
    // One block, a few blocks, 4096, and a size that is not a multiple of 256.
    for (size_t n : {size_t(bs), 3 * bs, size_t(4096), 4096 + 7 * size_t(std::max<size_t>(bs, 32))}) {
      if (n % bs) continue;
      const auto w = gaussian(n, uint32_t(n) + 11u * uint32_t(t));
      const auto x = gaussian(n, uint32_t(n) + 3);
      const auto q = quantize(t, w);
      const auto wd = dequantize(t, q, n);
      const double ref = dot_ref(wd, x.data()), mag = abs_dot(wd, x.data());
      const float got = dot_row(t, q.data(), x.data(), n);
      const float got_scalar = dot_row_scalar(t, q.data(), x.data(), n);
      // f32 accumulation: rounding error grows like eps * sqrt(depth) *
      // sum|w x| (measured at most 1e-7 * sum|w x| for both paths); 1e-6 leaves
      // room for the scalar path's longer sequential sums, while a wrong
      // element, scale or group would be off by orders of magnitude more.
      EXPECT_NEAR(got, ref, 1e-6 * mag) << "n=" << n;
      EXPECT_NEAR(got_scalar, ref, 1e-6 * mag) << "scalar, n=" << n;
    }
  }
}

// --------------------------------------------------------- paths and sizes

TEST(QuantPaths, SimdAndScalarDequantizeIdenticallyOnRandomBlocks) {
  std::mt19937 rng(42);
  for (DType t : kQuantTypes) {
    SCOPED_TRACE(dtype_name(t));
    const size_t n = 256 * 9;
    std::vector<uint8_t> raw(row_bytes(t, n));
    for (auto& b : raw) b = uint8_t(rng());
    std::vector<float> a(n), b(n);
    dequantize_row(t, raw.data(), a.data(), n);
    dequantize_row_scalar(t, raw.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(a[i]) && std::isnan(b[i])) continue;
      ASSERT_TRUE(same_bits(a[i], b[i])) << i << ": " << a[i] << " vs " << b[i];
    }
  }
}

// Blocks are independent: a row converted in one call equals the row
// converted one block at a time (sizes that are not multiples of the
// internal 256-element chunk included).
TEST(QuantPaths, OneBlockAtATimeEqualsWholeRow) {
  for (DType t : kAllTypes) {
    SCOPED_TRACE(dtype_name(t));
    const size_t bs = info(t).block_size, bb = info(t).type_size;
    const size_t n = bs == 1 ? 1001 : bs == 32 ? 32 * 37 : 256 * 5;
    const auto x = gaussian(n, 21);
    const auto whole = quantize(t, x);
    std::vector<uint8_t> blockwise(whole.size());
    std::vector<float> y_blocks(n), x_dot(n, 0.0f);
    for (size_t b = 0; b < n / bs; ++b) {
      quantize_row(t, &x[b * bs], &blockwise[b * bb], bs);
      dequantize_row(t, &whole[b * bb], &y_blocks[b * bs], bs);
    }
    EXPECT_EQ(whole, blockwise);
    const auto y = dequantize(t, whole, n);
    for (size_t i = 0; i < n; ++i) ASSERT_TRUE(same_bits(y[i], y_blocks[i])) << i;
    // dot_row with a one-hot x picks out single dequantized elements.
    for (size_t i : {size_t(0), n / 2 + 3, n - 1}) {
      x_dot.assign(n, 0.0f);
      x_dot[i] = 1.0f;
      EXPECT_EQ(dot_row(t, whole.data(), x_dot.data(), n), y[i]) << i;
      EXPECT_EQ(dot_row_scalar(t, whole.data(), x_dot.data(), n), y[i]) << i;
    }
  }
}

TEST(QuantPaths, ErrorsOnPartialBlocksAndUnsupportedTypes) {
  std::vector<float> f(1024, 1.0f);
  std::vector<uint8_t> buf(8192);
  for (DType t : kQuantTypes) {
    const size_t bs = info(t).block_size;
    EXPECT_THROW(quantize_row(t, f.data(), buf.data(), bs + 1), Error) << dtype_name(t);
    EXPECT_THROW(dequantize_row(t, buf.data(), f.data(), bs - 1), Error) << dtype_name(t);
    EXPECT_THROW(dot_row(t, buf.data(), f.data(), 2 * bs + 16), Error) << dtype_name(t);
  }
  for (DType t : {DType::I8, DType::I32, DType::F64}) {
    EXPECT_FALSE(can_quantize(t));
    EXPECT_FALSE(can_dequantize(t));
    EXPECT_THROW(quantize_row(t, f.data(), buf.data(), 32), Error);
    EXPECT_THROW(dequantize_row(t, buf.data(), f.data(), 32), Error);
    EXPECT_THROW(dot_row(t, buf.data(), f.data(), 32), Error);
  }
  for (DType t : kAllTypes) EXPECT_TRUE(can_quantize(t)) << dtype_name(t);
  // n = 0 is an empty row, not an error.
  EXPECT_NO_THROW(quantize_row(DType::Q4_K, f.data(), buf.data(), 0));
  EXPECT_EQ(dot_row(DType::Q4_K, buf.data(), f.data(), 0), 0.0f);
}

TEST(QuantPaths, RowsQuantizeIdenticallyFromManyThreads) {
  const size_t n = 1024, rows = 16;
  const auto x = gaussian(n * rows, 77);
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q4_0, DType::Q2_K}) {
    const size_t rb = row_bytes(t, n);
    std::vector<uint8_t> serial(rb * rows), parallel(rb * rows);
    for (size_t r = 0; r < rows; ++r) quantize_row(t, &x[r * n], &serial[r * rb], n);
    std::vector<std::thread> threads;
    for (size_t k = 0; k < 4; ++k)
      threads.emplace_back([&, k] {
        for (size_t r = k; r < rows; r += 4) quantize_row(t, &x[r * n], &parallel[r * rb], n);
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(serial, parallel) << dtype_name(t);
  }
}

}  // namespace
}  // namespace rf
