// Decoding of every quantized block format into the shared unpacked form
// (int8 quants + per-group f32 scale and bias, see qimpl::Layout in
// core/quant_blocks.h). dequantize_row and dot_row are built on this.
//
// Each format has one template: the per-group scales are always computed by
// the same scalar code (the exact float operations of ggml's dequantizers),
// and only the bit-unpacking of the quants has an AVX2 variant, which yields
// the same integers. So the scalar and AVX2 paths agree bit for bit.
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"

#ifdef RF_QUANT_AVX2
#include <immintrin.h>
#endif

namespace rf::qimpl {
namespace {

#ifdef RF_QUANT_AVX2
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void store256(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
inline __m256i bytes(int v) { return _mm256_set1_epi8(char(v)); }
// 0xFF in each byte of `h` that has all bits of `bit` set, else 0.
inline __m256i has_bit(__m256i h, int bit) {
  return _mm256_cmpeq_epi8(_mm256_and_si256(h, bytes(bit)), bytes(bit));
}
// The 32 bits of `u` spread to 32 bytes: byte j is 0xFF when bit j is set.
inline __m256i bits_to_bytes(uint32_t u) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int(u)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202,
                         0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}
// 16 packed bytes to 32 nibbles: low nibbles first, then high nibbles.
inline __m256i nibbles16(const uint8_t* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}
#endif

// ----------------------------------------------------------------- legacy

template <bool kSimd, bool kOffset>  // Q4_0 (q-8) / Q4_1 (q, plus m)
void unpack_q4(const uint8_t* src, size_t nb, int8_t* q, float* scale, float* bias) {
  const size_t bsz = kOffset ? sizeof(BlockQ4_1) : sizeof(BlockQ4_0);
  for (size_t i = 0; i < nb; ++i, src += bsz, q += kQK) {
    uint16_t d, m = 0;
    std::memcpy(&d, src, 2);
    if (kOffset) std::memcpy(&m, src + 2, 2);
    const uint8_t* qs = src + (kOffset ? 4 : 2);
    scale[i] = f16_to_f32(d);
    bias[i] = kOffset ? f16_to_f32(m) : 0.0f;
    const int sub = kOffset ? 0 : 8;
#ifdef RF_QUANT_AVX2
    if constexpr (kSimd) {
      store256(q, _mm256_sub_epi8(nibbles16(qs), bytes(sub)));
      continue;
    }
#endif
    for (int j = 0; j < kQK / 2; ++j) {
      q[j] = int8_t((qs[j] & 0x0F) - sub);
      q[j + kQK / 2] = int8_t((qs[j] >> 4) - sub);
    }
  }
}

template <bool kSimd, bool kOffset>  // Q5_0 (q-16) / Q5_1 (q, plus m)
void unpack_q5(const uint8_t* src, size_t nb, int8_t* q, float* scale, float* bias) {
  const size_t bsz = kOffset ? sizeof(BlockQ5_1) : sizeof(BlockQ5_0);
  for (size_t i = 0; i < nb; ++i, src += bsz, q += kQK) {
    uint16_t d, m = 0;
    uint32_t qh;
    std::memcpy(&d, src, 2);
    if (kOffset) std::memcpy(&m, src + 2, 2);
    const uint8_t* p = src + (kOffset ? 4 : 2);
    std::memcpy(&qh, p, 4);
    const uint8_t* qs = p + 4;
    scale[i] = f16_to_f32(d);
    bias[i] = kOffset ? f16_to_f32(m) : 0.0f;
    const int sub = kOffset ? 0 : 16;
#ifdef RF_QUANT_AVX2
    if constexpr (kSimd) {
      const __m256i hi = _mm256_and_si256(bits_to_bytes(qh), bytes(0x10));
      store256(q, _mm256_sub_epi8(_mm256_or_si256(nibbles16(qs), hi), bytes(sub)));
      continue;
    }
#endif
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = ((qh >> j) & 1) << 4;
      const int h1 = ((qh >> (j + 16)) & 1) << 4;
      q[j] = int8_t(((qs[j] & 0x0F) | h0) - sub);
      q[j + kQK / 2] = int8_t(((qs[j] >> 4) | h1) - sub);
    }
  }
}

template <size_t kBlockBytes, size_t kScaleOffset, int kElems>  // Q8_0, Q8_1 (f16 d), Q8_K (f32 d)
void unpack_q8(const uint8_t* src, size_t nb, int8_t* q, float* scale, float* bias) {
  constexpr int kGroups = kElems / kQK;
  for (size_t i = 0; i < nb; ++i, src += kBlockBytes, q += kElems) {
    float d;
    if constexpr (kElems == kQK_K) {
      std::memcpy(&d, src, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, src, 2);
      d = f16_to_f32(h);
    }
    std::memcpy(q, src + kScaleOffset, kElems);
    for (int g = 0; g < kGroups; ++g) {
      scale[i * kGroups + g] = d;
      bias[i * kGroups + g] = 0.0f;
    }
  }
}

// ----------------------------------------------------------------- k-quants

template <bool kSimd>
void unpack_q2_k(const uint8_t* src, size_t nb, int8_t* q, float* scale, float* bias) {
  for (size_t i = 0; i < nb; ++i, q += kQK_K, scale += 16, bias += 16) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(src + i * sizeof(BlockQ2_K));
    const float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * (b->scales[g] & 0xF);
      const float ml = dmin * (b->scales[g] >> 4);
      scale[g] = dl;
      bias[g] = -ml;
    }
#ifdef RF_QUANT_AVX2
    if constexpr (kSimd) {
      for (int n = 0; n < 2; ++n) {
        const __m256i v = load256(b->qs + 32 * n);
        for (int j = 0; j < 4; ++j)
          store256(q + 128 * n + 32 * j, _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), bytes(3)));
      }
      continue;
    }
#endif
    for (int e = 0; e < kQK_K; ++e)
      q[e] = int8_t((b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
  }
}

template <bool kSimd>
void unpack_q3_k(const uint8_t* src, size_t nb, int8_t* q, float* scale, float* bias) {
  for (size_t i = 0; i < nb; ++i, q += kQK_K, scale += 16, bias += 16) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(src + i * sizeof(BlockQ3_K));
    const float d = f16_to_f32(b->d);
    uint8_t sc[16];
    q3k_scales(b->scales, sc);
    for (int g = 0; g < 16; ++g) {
      scale[g] = d * (int(sc[g]) - 32);
      bias[g] = 0.0f;
    }
#ifdef RF_QUANT_AVX2
    if constexpr (kSimd) {
      const __m256i hm = load256(b->hmask);
      for (int n = 0; n < 2; ++n) {
        const __m256i v = load256(b->qs + 32 * n);
        for (int j = 0; j < 4; ++j) {
          const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), bytes(3));
          const __m256i minus4 = _mm256_andnot_si256(has_bit(hm, 1 << (4 * n + j)), bytes(4));
          store256(q + 128 * n + 32 * j, _mm256_sub_epi8(lo, minus4));
        }
      }
      continue;
    }
#endif
    for (int e = 0; e < kQK_K; ++e) {
      const int lo = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const bool high = b->hmask[e % 32] & (1 << (e / 32));
      q[e] = int8_t(lo - (high ? 0 : 4));
    }
  }
}

template <bool kSimd, bool kFifthBit>  // Q4_K / Q5_K
void unpack_q45_k(const uint8_t* src, size_t nb, int8_t* q, float* scale, float* bias) {
  using Block = std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>;
  for (size_t i = 0; i < nb; ++i, q += kQK_K, scale += 8, bias += 8) {
    const auto* b = reinterpret_cast<const Block*>(src + i * sizeof(Block));
    const float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, m;
      k4_scale_min(b->scales, g, &sc, &m);
      const float d1 = d * sc;
      const float m1 = dmin * m;
      scale[g] = d1;
      bias[g] = -m1;
    }
#ifdef RF_QUANT_AVX2
    if constexpr (kSimd) {
      __m256i hb = _mm256_setzero_si256();
      if constexpr (kFifthBit) hb = load256(b->qh);
      for (int c = 0; c < 4; ++c) {
        const __m256i v = load256(b->qs + 32 * c);
        __m256i lo = _mm256_and_si256(v, bytes(0x0F));
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), bytes(0x0F));
        if constexpr (kFifthBit) {
          lo = _mm256_or_si256(lo, _mm256_and_si256(has_bit(hb, 1 << (2 * c)), bytes(16)));
          hi = _mm256_or_si256(hi, _mm256_and_si256(has_bit(hb, 1 << (2 * c + 1)), bytes(16)));
        }
        store256(q + 64 * c, lo);
        store256(q + 64 * c + 32, hi);
      }
      continue;
    }
#endif
    for (int e = 0; e < kQK_K; ++e) {
      const int c = e / 64, l = e % 64;
      int v = l < 32 ? (b->qs[32 * c + l] & 0x0F) : (b->qs[32 * c + l - 32] >> 4);
      if constexpr (kFifthBit) {
        const int bit = 2 * c + (l < 32 ? 0 : 1);
        if (b->qh[l % 32] & (1 << bit)) v += 16;
      }
      q[e] = int8_t(v);
    }
  }
}

template <bool kSimd>
void unpack_q6_k(const uint8_t* src, size_t nb, int8_t* q, float* scale, float* bias) {
  for (size_t i = 0; i < nb; ++i, q += kQK_K, scale += 16, bias += 16) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(src + i * sizeof(BlockQ6_K));
    const float d = f16_to_f32(b->d);
    for (int g = 0; g < 16; ++g) {
      scale[g] = d * b->scales[g];
      bias[g] = 0.0f;
    }
#ifdef RF_QUANT_AVX2
    if constexpr (kSimd) {
      const __m256i m4 = bytes(0x0F), m2 = bytes(0x30);
      for (int n = 0; n < 2; ++n) {
        const __m256i l0 = load256(b->ql + 64 * n), l1 = load256(b->ql + 64 * n + 32);
        const __m256i h = load256(b->qh + 32 * n);
        const __m256i v[4] = {
            _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2)),
            _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m2)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m2)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                            _mm256_and_si256(_mm256_srli_epi16(h, 2), m2)),
        };
        for (int k = 0; k < 4; ++k) store256(q + 128 * n + 32 * k, _mm256_sub_epi8(v[k], bytes(32)));
      }
      continue;
    }
#endif
    for (int e = 0; e < kQK_K; ++e) {
      const int n = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t lbyte = b->ql[64 * n + 32 * (k & 1) + l];
      const int low = k < 2 ? (lbyte & 0x0F) : (lbyte >> 4);
      const int high = (b->qh[32 * n + l] >> (2 * k)) & 3;
      q[e] = int8_t((low | (high << 4)) - 32);
    }
  }
}

template <bool kSimd>
void unpack(DType t, const void* src_v, size_t nb, int8_t* q, float* scale, float* bias) {
  const auto* src = static_cast<const uint8_t*>(src_v);
  switch (t) {
    case DType::Q4_0: return unpack_q4<kSimd, false>(src, nb, q, scale, bias);
    case DType::Q4_1: return unpack_q4<kSimd, true>(src, nb, q, scale, bias);
    case DType::Q5_0: return unpack_q5<kSimd, false>(src, nb, q, scale, bias);
    case DType::Q5_1: return unpack_q5<kSimd, true>(src, nb, q, scale, bias);
    case DType::Q8_0: return unpack_q8<sizeof(BlockQ8_0), 2, kQK>(src, nb, q, scale, bias);
    case DType::Q8_1: return unpack_q8<sizeof(BlockQ8_1), 4, kQK>(src, nb, q, scale, bias);
    case DType::Q8_K: return unpack_q8<sizeof(BlockQ8_K), 4, kQK_K>(src, nb, q, scale, bias);
    case DType::Q2_K: return unpack_q2_k<kSimd>(src, nb, q, scale, bias);
    case DType::Q3_K: return unpack_q3_k<kSimd>(src, nb, q, scale, bias);
    case DType::Q4_K: return unpack_q45_k<kSimd, false>(src, nb, q, scale, bias);
    case DType::Q5_K: return unpack_q45_k<kSimd, true>(src, nb, q, scale, bias);
    case DType::Q6_K: return unpack_q6_k<kSimd>(src, nb, q, scale, bias);
    default:
      if (unpack_iquant(t, src, nb, q, scale, bias)) return;
      fail("unpack_blocks: ", dtype_name(t), " is not a quantized block format");
  }
}

}  // namespace

Layout layout(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: case DType::Q8_1:
      return {kQK, kQK, false};
    case DType::Q4_1: case DType::Q5_1:
      return {kQK, kQK, true};
    case DType::Q8_K:
      return {kQK_K, kQK, false};
    case DType::Q3_K: case DType::Q6_K:
      return {kQK_K, 16, false};
    case DType::Q2_K:
      return {kQK_K, 16, true};
    case DType::Q4_K: case DType::Q5_K:
      return {kQK_K, 32, true};
    case DType::IQ4_NL: case DType::MXFP4:
      return {kQK, kQK, false};
    case DType::IQ2_XXS: case DType::IQ3_XXS: case DType::IQ3_S: case DType::IQ1_S: case DType::IQ4_XS:
      return {kQK_K, 32, false};
    case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ1_M:
      return {kQK_K, 16, false};
    default:
      fail(dtype_name(t), " is not a quantized block format");
  }
}

void unpack_blocks(DType t, const void* src, size_t nblocks, int8_t* q, float* scale, float* bias) {
#ifdef RF_QUANT_AVX2
  unpack<true>(t, src, nblocks, q, scale, bias);
#else
  unpack<false>(t, src, nblocks, q, scale, bias);
#endif
}

void unpack_blocks_scalar(DType t, const void* src, size_t nblocks, int8_t* q, float* scale,
                          float* bias) {
  unpack<false>(t, src, nblocks, q, scale, bias);
}

}  // namespace rf::qimpl
