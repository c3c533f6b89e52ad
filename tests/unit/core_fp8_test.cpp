// core/fp8.h, the e4m3 encoding of the 8-bit KV cache, against definitions
// written out here: every byte's value from the format's fields (sign,
// exponent bias 7, subnormals m * 2^-9), every non-NaN byte round-tripping,
// and encoding as a brute-force search for the nearest finite e4m3 value
// (ties to the even code, beyond 448 saturating) over random floats of every
// magnitude and hand-picked ties and edges; the row scale.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/fp8.h"

namespace rf {
namespace {

// The value of byte b from the format's definition (NaN for 0x7f / 0xff).
double e4m3_value(int b) {
  const int sign = (b >> 7) & 1, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(1.0 + m / 8.0, e - 7);
  return sign ? -mag : mag;
}

// The code nearest to x among the finite magnitudes 0x00..0x7e, ties to the
// even code; magnitudes past 448 give 448 (the nearest finite value).
uint8_t nearest_e4m3(float x) {
  const double a = std::fabs(double(x));
  int best = 0;
  double best_d = INFINITY;
  for (int c = 0; c <= 0x7e; ++c) {
    const double d = std::fabs(e4m3_value(c) - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  if (std::isinf(a)) best = 0x7e;
  return uint8_t((std::signbit(x) ? 0x80 : 0) | best);
}

TEST(Fp8E4M3, EveryFiniteByteDecodesToItsDefinition) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN: the next test
    const float got = e4m3_to_float(uint8_t(b));
    const double want = e4m3_value(b);
    EXPECT_EQ(double(got), want) << "byte " << b;
    EXPECT_EQ(std::signbit(got), (b & 0x80) != 0) << "byte " << b;  // 0x80 is -0
  }
  EXPECT_EQ(e4m3_to_float(0x7e), kE4M3Max);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
}

// The format's NaN codes decode to NaN, and a row holding a NaN gets a NaN
// scale, so NaN K/V (a broken forward pass) reads back as NaN on every
// backend rather than as a large finite value.
TEST(Fp8E4M3, NanBytesAndRowsStayNan) {
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
  EXPECT_TRUE(std::isnan(e4m3_row_scale(NAN)));
}

TEST(Fp8E4M3, EveryFiniteByteRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;
    EXPECT_EQ(int(e4m3_from_float(e4m3_to_float(uint8_t(b)))), b) << "byte " << b;
  }
}

TEST(Fp8E4M3, EncodingIsTheNearestValueTiesToEven) {
  const float sub = std::ldexp(1.0f, -9);  // the subnormal step
  struct Case {
    float x;
    int want;
  };
  const Case cases[] = {
      {1.0625f, 0x38},         // between 1 (0x38) and 1.125 (0x39): even
      {1.1875f, 0x3a},         // between 1.125 and 1.25 (0x3a): even
      {-1.0625f, 0xb8},
      {0.5f * sub, 0x00},      // between 0 and the first subnormal: even (0)
      {1.5f * sub, 0x02},      // between subnormals 1 and 2
      {2.5f * sub, 0x02},
      {7.5f * sub, 0x08},      // between the last subnormal and 2^-6
      {std::ldexp(1.0f, -6), 0x08},
      {std::ldexp(1.0625f, -6), 0x08},  // a tie just above the first normal
      {15.5f, 0x58},           // between 15 (0x57) and 16 (0x58): the carry into the exponent
      {432.0f, 0x7e},          // between 416 (0x7d) and 448: even
      {431.9f, 0x7d},
      {447.9f, 0x7e},
      {448.0f, 0x7e},
      {448.1f, 0x7e},
      {464.0f, 0x7e},          // saturates rather than rounding away
      {1e9f, 0x7e},
      {-1e9f, 0xfe},
      {INFINITY, 0x7e},
      {-INFINITY, 0xfe},
      {0.0f, 0x00},
      {-0.0f, 0x80},
      {1e-30f, 0x00},
      {-1e-30f, 0x80},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(int(e4m3_from_float(c.x)), c.want) << c.x;
    EXPECT_EQ(int(nearest_e4m3(c.x)), c.want) << c.x << " (the search)";
  }
  // NaN stays NaN, with its sign.
  EXPECT_EQ(int(e4m3_from_float(std::numeric_limits<float>::quiet_NaN())), 0x7f);
  EXPECT_EQ(int(e4m3_from_float(-std::numeric_limits<float>::quiet_NaN())), 0xff);

  // Every tie between two neighbouring finite codes (their midpoint is a float).
  for (int c = 0; c < 0x7e; ++c) {
    const float mid = float((e4m3_value(c) + e4m3_value(c + 1)) / 2);
    EXPECT_EQ(int(e4m3_from_float(mid)), (c & 1) ? c + 1 : c) << "midpoint after byte " << c;
    EXPECT_EQ(int(e4m3_from_float(std::nextafter(mid, 0.0f))), c) << "just below the midpoint after " << c;
    EXPECT_EQ(int(e4m3_from_float(std::nextafter(mid, 1e9f))), c + 1) << "just above the midpoint after " << c;
  }

  // Random floats: uniform in log magnitude over 2^-14 .. 2^10 (subnormals,
  // normals and saturation), and random bit patterns (any exponent).
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> log2mag(-14.0f, 10.0f);
  std::uniform_int_distribution<uint32_t> bits;
  int mismatches = 0;
  for (int i = 0; i < 200000 && mismatches < 10; ++i) {
    float x;
    if (i % 4 == 3) {
      const uint32_t u = bits(rng);
      std::memcpy(&x, &u, 4);
      if (std::isnan(x)) continue;
    } else {
      x = std::exp2(log2mag(rng)) * (i % 2 ? -1.0f : 1.0f);
    }
    const uint8_t got = e4m3_from_float(x), want = nearest_e4m3(x);
    if (got != want) {
      ++mismatches;
      ADD_FAILURE() << x << ": " << int(got) << ", nearest " << int(want);
    }
  }
}

TEST(Fp8E4M3, RowScale) {
  EXPECT_EQ(e4m3_row_scale(0.0f), 1.0f);  // an all-zero row
  EXPECT_EQ(e4m3_row_scale(448.0f), 1.0f);
  EXPECT_EQ(e4m3_row_scale(896.0f), 2.0f);
  // A row's largest magnitude encodes to +-448 under its scale, and every
  // element comes back within half a step of 3 mantissa bits (2^-4
  // relative) or, in the subnormal range, half a subnormal step.
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  for (int r = 0; r < 100; ++r) {
    std::vector<float> row(64);
    const float mag = std::exp2(float(r % 40 - 20));
    float amax = 0;
    for (auto& x : row) amax = std::max(amax, std::fabs(x = nd(rng) * mag));
    const float s = e4m3_row_scale(amax);
    for (float x : row) {
      const uint8_t b = e4m3_from_float(x / s);
      if (std::fabs(x) == amax) {
        EXPECT_EQ(b & 0x7f, 0x7e) << "row " << r;
      }
      const double back = double(e4m3_to_float(b)) * s;
      EXPECT_LE(std::fabs(back - x), std::max(std::fabs(double(x)) / 16, std::ldexp(double(s), -10)) * (1 + 1e-6))
          << "row " << r << " value " << x;
    }
  }
}

}  // namespace
}  // namespace rf
