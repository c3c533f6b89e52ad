// F8_E4M3_ROW, the FP8 weight type (core/dtype.h): a row's 16-byte header
// (f32 scale s, 12 zero bytes) then n e4m3 codes of x / s, with
// s = max|x| / 448 as the FP8 KV cache scales its rows (core/fp8.h).
//
// Decoding: an e4m3 code's low 7 bits shifted into an f32's exponent and
// mantissa (bits 26..20) give its magnitude times 2^-120, subnormals
// included (f32's exponent bias is 120 more than e4m3's, and both formats'
// subnormals are linear), so value = f32(bits) * 2^120 exactly; the NaN
// codes (0x7f, 0xff) are the one exception, and only a row holding a NaN
// has them, whose NaN scale makes every value NaN anyway.
#include <cmath>
#include <cstring>

#include "core/fp8.h"
#include "core/quant_blocks.h"

#ifdef RF_QUANT_AVX2
#include <immintrin.h>
#endif

namespace rf::qimpl {
namespace {

constexpr size_t kHeader = 16;
constexpr float kTwo120 = 0x1p120f;

float row_scale(const void* row) {
  float s;
  std::memcpy(&s, row, sizeof s);
  return s;
}

const uint8_t* codes(const void* row) { return static_cast<const uint8_t*>(row) + kHeader; }

inline float decode(uint8_t c) {
  const uint32_t bits = (uint32_t(c & 0x80u) << 24) | (uint32_t(c & 0x7fu) << 20);
  float f;
  std::memcpy(&f, &bits, 4);
  return f * kTwo120;
}

#ifdef RF_QUANT_AVX2
// Codes q[0..8) as floats (times the row scale by the caller).
inline __m256 decode8(const uint8_t* q) {
  const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
  const __m256i bits = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24),
                                       _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x7f)), 20));
  return _mm256_mul_ps(_mm256_castsi256_ps(bits), _mm256_set1_ps(kTwo120));
}
#endif

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

void dequantize_f8_row(const void* src, float* dst, size_t n, bool simd) {
  const float s = row_scale(src);
  const uint8_t* q = codes(src);
  size_t i = 0;
#ifdef RF_QUANT_AVX2
  if (simd)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(decode8(q + i), _mm256_set1_ps(s)));
#endif
  for (; i < n; ++i) dst[i] = decode(q[i]) * s;
}

float dot_f8_row(const void* w, const float* x, size_t n, bool simd) {
  const uint8_t* q = codes(w);
  size_t i = 0;
  float sum = 0.0f;
#ifdef RF_QUANT_AVX2
  if (simd) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
      a0 = _mm256_fmadd_ps(decode8(q + i), _mm256_loadu_ps(x + i), a0);
      a1 = _mm256_fmadd_ps(decode8(q + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    const __m256 a = _mm256_add_ps(a0, a1);
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
    sum = _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
  }
#endif
  float acc[8] = {};
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) acc[j] += decode(q[i + j]) * x[i + j];
  for (; i < n; ++i) sum += decode(q[i]) * x[i];
  for (float a : acc) sum += a;
  return sum * row_scale(w);
}

}  // namespace rf::qimpl
