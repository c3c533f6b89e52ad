// dequantize_row: every supported format to f32, bit-exact with ggml.
//
// Quantized formats go through qimpl::unpack_blocks and then evaluate
// scale*q + bias per element. ggml's reference dequantizers compute
// `d*q - m` as a separate multiply and subtract, so this file is compiled
// with floating-point contraction off: a fused multiply-add would round once
// instead of twice and change the low bits.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

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

// y[i] = scale[g] * q[i] (+ bias[g]) for n elements in groups of gs.
template <bool kSimd>
void combine(const int8_t* q, const float* scale, const float* bias, const qimpl::Layout& l,
             size_t n, float* y) {
  const size_t gs = size_t(l.group_size);
  for (size_t g = 0; g * gs < n; ++g, q += gs, y += gs) {
    const float s = scale[g], b = bias[g];
#ifdef RF_QUANT_AVX2
    if constexpr (kSimd) {
      const __m256 vs = _mm256_set1_ps(s), vb = _mm256_set1_ps(b);
      for (size_t i = 0; i < gs; i += 8) {
        const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i));
        const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)), vs);
        _mm256_storeu_ps(y + i, l.has_bias ? _mm256_add_ps(v, vb) : v);
      }
      continue;
    }
#endif
    if (l.has_bias) {
      for (size_t i = 0; i < gs; ++i) y[i] = s * float(q[i]) + b;
    } else {
      for (size_t i = 0; i < gs; ++i) y[i] = s * float(q[i]);
    }
  }
}

template <bool kSimd>
void dequantize_f16(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
#ifdef RF_QUANT_AVX2
  if constexpr (kSimd) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
#endif
  // Signalling NaNs come out quiet (payload kept), as from F16C's vcvtph2ps
  // and ggml's converters; f16_to_f32 alone would keep them signalling.
  for (; i < n; ++i) {
    const bool nan = (src[i] & 0x7C00) == 0x7C00 && (src[i] & 0x03FF);
    dst[i] = nan ? bits_to_f32(f32_to_bits(f16_to_f32(src[i])) | 0x00400000u) : f16_to_f32(src[i]);
  }
}

template <bool kSimd>
void dequantize_bf16(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
#ifdef RF_QUANT_AVX2
  if constexpr (kSimd) {
    for (; i + 8 <= n; i += 8) {
      const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
      _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
  }
#endif
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

template <bool kSimd>
void dequantize(DType t, const void* src, float* dst, size_t n) {
  RF_CHECK(can_dequantize(t), "dequantize_row: unsupported type ", dtype_name(t));
  row_bytes(t, n);  // throws on a partial block
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::F16: return dequantize_f16<kSimd>(static_cast<const uint16_t*>(src), dst, n);
    case DType::BF16: return dequantize_bf16<kSimd>(static_cast<const uint16_t*>(src), dst, n);
    case DType::F8_E4M3_ROW: return qimpl::dequantize_f8_row(src, dst, n, kSimd);
    default: break;
  }
  const qimpl::Layout l = qimpl::layout(t);
  const size_t block_bytes = info(t).type_size;
  const auto* p = static_cast<const uint8_t*>(src);
  alignas(32) int8_t q[qimpl::kUnpackChunk];
  float scale[qimpl::kUnpackChunk / 16], bias[qimpl::kUnpackChunk / 16];
  const size_t chunk = qimpl::kUnpackChunk;
  for (size_t done = 0; done < n; done += chunk) {
    const size_t len = n - done < chunk ? n - done : chunk;
    const size_t nb = len / size_t(l.block_size);
    if constexpr (kSimd) {
      qimpl::unpack_blocks(t, p, nb, q, scale, bias);
    } else {
      qimpl::unpack_blocks_scalar(t, p, nb, q, scale, bias);
    }
    combine<kSimd>(q, scale, bias, l, len, dst + done);
    p += nb * block_bytes;
  }
}

}  // namespace

bool can_dequantize(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16:
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1:
    case DType::Q8_0: case DType::Q8_1: case DType::Q2_K: case DType::Q3_K:
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::Q8_K:
    case DType::F8_E4M3_ROW:
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: case DType::IQ1_M: case DType::IQ4_NL: case DType::IQ4_XS: case DType::MXFP4:
      return true;
    default:
      return false;
  }
}

void dequantize_row(DType t, const void* src, float* dst, size_t n) {
#ifdef RF_QUANT_AVX2
  dequantize<true>(t, src, dst, n);
#else
  dequantize<false>(t, src, dst, n);
#endif
}

void dequantize_row_scalar(DType t, const void* src, float* dst, size_t n) {
  dequantize<false>(t, src, dst, n);
}

}  // namespace rf
