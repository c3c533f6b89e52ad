// dot_row: the dot product of one stored row (any supported format) with an
// f32 vector, the CPU backend's matmul inner loop.
//
// Quantized rows are decoded 256 elements at a time by qimpl::unpack_blocks;
// each group then contributes scale * sum(q*x) + bias * sum(x), so the
// per-element work is one int8->f32 conversion and one FMA. Accumulation is
// in f32 (eight lanes, reduced once at the end).
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "core/quant_blocks.h"

#ifdef RF_QUANT_AVX2
#include <immintrin.h>
#endif

namespace rf {
namespace {

#ifdef RF_QUANT_AVX2
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline __m256 q8_to_ps(const int8_t* q) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
}

// sum over groups of scale*sum(q*x) + bias*sum(x), for groups of kGs elements.
template <int kGs, bool kBias>
__m256 groups_avx2(const int8_t* q, const float* scale, const float* bias, const float* x,
                   size_t ngroups, __m256 acc) {
  for (size_t g = 0; g < ngroups; ++g, q += kGs, x += kGs) {
    __m256 p0 = _mm256_mul_ps(q8_to_ps(q), _mm256_loadu_ps(x));
    __m256 p1 = _mm256_mul_ps(q8_to_ps(q + 8), _mm256_loadu_ps(x + 8));
    __m256 sx;
    if constexpr (kBias) sx = _mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8));
    if constexpr (kGs == 32) {
      p0 = _mm256_fmadd_ps(q8_to_ps(q + 16), _mm256_loadu_ps(x + 16), p0);
      p1 = _mm256_fmadd_ps(q8_to_ps(q + 24), _mm256_loadu_ps(x + 24), p1);
      if constexpr (kBias)
        sx = _mm256_add_ps(sx, _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(scale[g]), _mm256_add_ps(p0, p1), acc);
    if constexpr (kBias) acc = _mm256_fmadd_ps(_mm256_set1_ps(bias[g]), sx, acc);
  }
  return acc;
}

float dot_f32_avx2(const float* w, const float* x, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
  }
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += w[i] * x[i];
  return s;
}

template <bool kBf16>
float dot_half_avx2(const uint16_t* w, const float* x, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  auto load = [](const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else return _mm256_cvtph_ps(h);
  };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(load(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
  }
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += (kBf16 ? bf16_to_f32(w[i]) : f16_to_f32(w[i])) * x[i];
  return s;
}
#endif

float groups_scalar(const int8_t* q, const float* scale, const float* bias, const float* x,
                    size_t n, const qimpl::Layout& l) {
  const size_t gs = size_t(l.group_size);
  float acc = 0.0f;
  for (size_t g = 0; g * gs < n; ++g, q += gs, x += gs) {
    float p = 0.0f, sx = 0.0f;
    for (size_t i = 0; i < gs; ++i) {
      p += float(q[i]) * x[i];
      sx += x[i];
    }
    acc += scale[g] * p;
    if (l.has_bias) acc += bias[g] * sx;
  }
  return acc;
}

template <bool kSimd>
float dot(DType t, const void* w, const float* x, size_t n) {
  RF_CHECK(can_dequantize(t), "dot_row: unsupported type ", dtype_name(t));
  row_bytes(t, n);  // throws on a partial block
#ifdef RF_QUANT_AVX2
  if constexpr (kSimd) {
    switch (t) {
      case DType::F32: return dot_f32_avx2(static_cast<const float*>(w), x, n);
      case DType::F16: return dot_half_avx2<false>(static_cast<const uint16_t*>(w), x, n);
      case DType::BF16: return dot_half_avx2<true>(static_cast<const uint16_t*>(w), x, n);
      default: break;
    }
  }
#endif
  switch (t) {
    case DType::F8_E4M3_ROW: return qimpl::dot_f8_row(w, x, n, kSimd);
    case DType::F32: case DType::F16: case DType::BF16: {
      float s = 0.0f;
      float buf[256];
      for (size_t i = 0; i < n; i += 256) {
        const size_t len = n - i < 256 ? n - i : 256;
        const size_t esz = t == DType::F32 ? 4 : 2;
        dequantize_row_scalar(t, static_cast<const uint8_t*>(w) + i * esz, buf, len);
        for (size_t k = 0; k < len; ++k) s += buf[k] * x[i + k];
      }
      return s;
    }
    default: break;
  }

  const qimpl::Layout l = qimpl::layout(t);
  const size_t block_bytes = info(t).type_size;
  const auto* p = static_cast<const uint8_t*>(w);
  alignas(32) int8_t q[qimpl::kUnpackChunk];
  float scale[qimpl::kUnpackChunk / 16], bias[qimpl::kUnpackChunk / 16];
  const size_t chunk = qimpl::kUnpackChunk;
#ifdef RF_QUANT_AVX2
  __m256 acc = _mm256_setzero_ps();
#endif
  float acc_scalar = 0.0f;
  for (size_t done = 0; done < n; done += chunk) {
    const size_t len = n - done < chunk ? n - done : chunk;
    const size_t nb = len / size_t(l.block_size);
    const float* xs = x + done;
#ifdef RF_QUANT_AVX2
    if constexpr (kSimd) {
      qimpl::unpack_blocks(t, p, nb, q, scale, bias);
      const size_t ng = len / size_t(l.group_size);
      if (l.group_size == 16) {
        acc = l.has_bias ? groups_avx2<16, true>(q, scale, bias, xs, ng, acc)
                         : groups_avx2<16, false>(q, scale, bias, xs, ng, acc);
      } else {
        acc = l.has_bias ? groups_avx2<32, true>(q, scale, bias, xs, ng, acc)
                         : groups_avx2<32, false>(q, scale, bias, xs, ng, acc);
      }
      p += nb * block_bytes;
      continue;
    }
#endif
    qimpl::unpack_blocks_scalar(t, p, nb, q, scale, bias);
    acc_scalar += groups_scalar(q, scale, bias, xs, len, l);
    p += nb * block_bytes;
  }
#ifdef RF_QUANT_AVX2
  if constexpr (kSimd) return hsum(acc);
#endif
  return acc_scalar;
}

}  // namespace

float dot_row(DType t, const void* w, const float* x, size_t n) {
#ifdef RF_QUANT_AVX2
  return dot<true>(t, w, x, n);
#else
  return dot<false>(t, w, x, n);
#endif
}

float dot_row_scalar(DType t, const void* w, const float* x, size_t n) {
  return dot<false>(t, w, x, n);
}

}  // namespace rf
