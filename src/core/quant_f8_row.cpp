// F8_E4M3_ROW, the FP8 weight type (core/dtype.h): a row's 16-byte header
// (f32 scale s, 12 zero bytes) then n e4m3 codes of x / s, with
// s = max|x| / 448 as the FP8 KV cache scales its rows (core/fp8.h).
#include <cmath>
#include <cstring>

#include "core/fp8.h"
#include "core/quant_blocks.h"

namespace rf::qimpl {
namespace {

constexpr size_t kHeader = 16;

float row_scale(const void* row) {
  float s;
  std::memcpy(&s, row, sizeof s);
  return s;
}

const uint8_t* codes(const void* row) { return static_cast<const uint8_t*>(row) + kHeader; }

}  // namespace

void quantize_f8_row(const float* src, void* dst, size_t n) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) amax = std::isnan(src[i]) || std::isnan(amax) ? NAN : std::fmax(amax, std::fabs(src[i]));
  // Infinities saturate (their row's scale stays finite: the largest finite magnitude).
  if (std::isinf(amax)) {
    amax = 0.0f;
    for (size_t i = 0; i < n; ++i)
      if (std::isfinite(src[i])) amax = std::fmax(amax, std::fabs(src[i]));
    if (amax == 0.0f) amax = kE4M3Max;
  }
  const float s = e4m3_row_scale(amax);
  auto* out = static_cast<uint8_t*>(dst);
  std::memset(out, 0, kHeader);
  std::memcpy(out, &s, sizeof s);
  for (size_t i = 0; i < n; ++i) out[kHeader + i] = e4m3_from_float(src[i] / s);
}

void dequantize_f8_row(const void* src, float* dst, size_t n) {
  const float s = row_scale(src);
  const uint8_t* q = codes(src);
  for (size_t i = 0; i < n; ++i) dst[i] = e4m3_to_float(q[i]) * s;
}

float dot_f8_row(const void* w, const float* x, size_t n) {
  // The 256 e4m3 values, decoded once.
  static const auto table = [] {
    struct T {
      float v[256];
    } t;
    for (int b = 0; b < 256; ++b) t.v[b] = e4m3_to_float(uint8_t(b));
    return t;
  }();
  const uint8_t* q = codes(w);
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) acc[j] += table.v[q[i + j]] * x[i + j];
  float sum = 0.0f;
  for (; i < n; ++i) sum += table.v[q[i]] * x[i];
  for (float a : acc) sum += a;
  return sum * row_scale(w);
}

}  // namespace rf::qimpl
