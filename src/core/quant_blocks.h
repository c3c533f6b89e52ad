// GGUF/ggml quantized block layouts, bit-exact with the files llama.cpp
// writes, plus the "unpacked" form the quant_*.cpp files share.
//
// Invariants: each struct's size equals the type_size in core/dtype.cpp's
// table (static_asserted below, checked against the table in the tests);
// half-precision fields hold raw IEEE f16 bits (see core/fp16.h). Blocks are
// read in place, so a row pointer must be aligned to alignof(block) (2, or 4
// for Q8_K); GGUF tensor data always is.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/host_device.h"

// The SIMD paths need x86-64-v3's AVX2, FMA and F16C (the release build's
// -march=x86-64-v3); without them the portable scalar code is used.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define RF_QUANT_AVX2 1
#endif

namespace rf {

constexpr int kQK = 32;    // elements per block of the legacy formats
constexpr int kQK_K = 256; // elements per super-block of the k-quants

struct BlockQ4_0 {
  uint16_t d;             // scale (f16); value = d * (q - 8)
  uint8_t qs[kQK / 2];    // element j in the low nibble of qs[j], j+16 in the high nibble
};
struct BlockQ4_1 {
  uint16_t d, m;          // value = d * q + m (both f16)
  uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {
  uint16_t d;             // value = d * (q - 16)
  uint8_t qh[4];          // bit j (little-endian u32) = 5th bit of element j
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  uint16_t d, m;          // value = d * q + m
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;             // value = d * q
  int8_t qs[kQK];
};
struct BlockQ8_1 {
  uint16_t d, s;          // value = d * q; s = d * sum(q)
  int8_t qs[kQK];
};
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // per 16 elements: low nibble scale, high nibble min
  uint8_t qs[kQK_K / 4];       // 2-bit quants
  uint16_t d, dmin;            // value = d*sc * q - dmin*m
};
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];    // high bit of each 3-bit quant (set means +4)
  uint8_t qs[kQK_K / 4];       // low 2 bits
  uint8_t scales[12];          // 16 six-bit scales, stored +32
  uint16_t d;                  // value = d*(sc-32) * (q-4)
};
struct BlockQ4_K {
  uint16_t d, dmin;            // value = d*sc * q - dmin*m, 8 sub-blocks of 32
  uint8_t scales[12];          // 8 six-bit scales and 8 six-bit mins
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];       // 5th bits
  uint8_t qs[kQK_K / 2];       // low 4 bits
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];       // low 4 bits
  uint8_t qh[kQK_K / 4];       // high 2 bits
  int8_t scales[kQK_K / 16];   // 16 signed 8-bit scales
  uint16_t d;                  // value = d*sc * (q-32)
};
struct BlockQ8_K {
  float d;                     // value = d * q (f32 scale)
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];   // sum of each 16 quants
};

// The i-quants: values come from lookup grids (core/iq_grids.h) chosen by
// stored indices, with signs and small per-group scales. Blocks of 256
// elements except IQ4_NL (32); all fields are read bytewise, so rows need
// no alignment beyond 2 bytes (1 for IQ1_M and MXFP4).
struct BlockIQ2_XXS {
  uint16_t d;
  uint16_t qs[kQK_K / 8];      // per 32: 4 grid indices (bytes), then 4x7 sign bits + 4-bit scale
};
struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[kQK_K / 8];      // per 8 values: 9-bit grid index + 7 sign bits
  uint8_t scales[kQK_K / 32];  // two 4-bit scales per 32
};
struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];       // 32 low bytes of 10-bit grid indices, then 32 sign bytes
  uint8_t qh[kQK_K / 32];      // the indices' top 2 bits
  uint8_t scales[kQK_K / 32];
};
struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * kQK_K / 8];   // 64 grid indices, then per 32: 4x7 sign bits + 4-bit scale
};
struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];       // low bytes of 9-bit grid indices
  uint8_t qh[kQK_K / 32];      // their 9th bits
  uint8_t signs[kQK_K / 8];    // one sign bit per value
  uint8_t scales[kQK_K / 64];  // 4-bit scales, one per 32
};
struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[kQK_K / 8];       // low bytes of 11-bit grid indices
  uint16_t qh[kQK_K / 32];     // per 32: 4x3 index bits, 3-bit scale, delta sign
};
struct BlockIQ1_M {
  uint8_t qs[kQK_K / 8];       // low bytes of 11-bit grid indices
  uint8_t qh[kQK_K / 16];      // per 8 values a nibble: 3 more index bits and the delta sign
  uint8_t scales[kQK_K / 32];  // 3-bit scales per 16, and the f16 super-block scale in the top nibbles
};
struct BlockIQ4_NL {
  uint16_t d;                  // value = d * kIq4nlLevels[nibble]
  uint8_t qs[kQK / 2];         // element j in the low nibble of qs[j], j+16 in the high nibble
};
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;           // top 2 bits of the eight 6-bit scales (stored +32)
  uint8_t scales_l[kQK_K / 64];// their low 4 bits
  uint8_t qs[kQK_K / 2];       // nibbles as IQ4_NL, per 32
};
// MXFP4 (OCP microscaling): 32 E2M1 values sharing one power-of-two scale.
struct BlockMXFP4 {
  uint8_t e;                   // E8M0 exponent: value = 2^(e - 128) * kMxfp4Levels[nibble]
  uint8_t qs[kQK / 2];
};

// Sizes as listed in core/dtype.cpp (block_size elements in type_size bytes).
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50 && sizeof(BlockIQ1_M) == 56);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136 && sizeof(BlockMXFP4) == 17);

// The bits of MXFP4's block scale 2^(e - 128) as an f32 (E8M0 exponent e;
// the levels are E2M1 values doubled, so this is half of 2^(e - 127)).
RF_HOST_DEVICE inline uint32_t e8m0_half_bits(uint8_t e) {
  return e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
}
inline float e8m0_half_to_f32(uint8_t e) {
  const uint32_t b = e8m0_half_bits(e);
  float f;
  __builtin_memcpy(&f, &b, 4);
  return f;
}

// The 6-bit scale j and min j (j < 8) of a Q4_K/Q5_K block.
inline void k4_scale_min(const uint8_t* s, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = uint8_t((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *m = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// The 16 Q3_K scales, unpacked to their stored values 0..63 (subtract 32).
inline void q3k_scales(const uint8_t* s, uint8_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = uint8_t(lo | (hi << 4));
  }
}

// ---------------------------------------------------------------------------
// Internal to the quant_*.cpp files (not for other layers).
namespace qimpl {

// A quantized type decoded to small integers plus per-group affine terms:
// element i of group g is  scale[g] * q[i] + bias[g]  evaluated in f32 in
// exactly that order, which reproduces ggml's dequantization bit for bit.
// Groups are `group_size` consecutive elements.
struct Layout {
  int block_size;  // elements per block
  int group_size;  // elements sharing one scale/bias (16 or 32)
  bool has_bias;   // false: every bias is 0 and may be skipped
};

// Layout of a quantized type; throws rf::Error for plain or unknown types.
Layout layout(DType t);

// Largest run of elements unpack_blocks is asked to decode at once.
constexpr int kUnpackChunk = kQK_K;

// Decodes `nblocks` blocks (at most kUnpackChunk elements) into q, scale and
// bias (one entry per group). Uses AVX2 where compiled in (RF_QUANT_AVX2); the result is the
// same either way. The _scalar variant is the portable path.
void unpack_blocks(DType t, const void* src, size_t nblocks, int8_t* q, float* scale, float* bias);
void unpack_blocks_scalar(DType t, const void* src, size_t nblocks, int8_t* q, float* scale,
                          float* bias);
// The i-quants and MXFP4 (quant_iquants.cpp; one path, no SIMD variant):
// false for other types.
bool unpack_iquant(DType t, const void* src, size_t nblocks, int8_t* q, float* scale, float* bias);

// Rounds v to the nearest integer (ties to even) clamped to [lo, hi]; NaN
// gives lo. Safe for any input (no out-of-range float->int conversion).
inline int round_clamp(float v, int lo, int hi) {
  if (!(v > float(lo))) return lo;
  if (v >= float(hi)) return hi;
  return int(__builtin_nearbyintf(v));
}

// Scale search shared by the quantizers (quant_fit.cpp). Both minimize the
// weighted squared error sum w*(x - fit)^2 (w == nullptr: all weights 1) over
// a grid of candidate scales, each refitted by least squares, then refine by
// alternating re-rounding and refitting.
//
// x ~= s * L with integer L in [lo, hi] (lo <= 0 < hi); returns s, which is
// negative when mapping the largest magnitude to lo fits better. All-zero
// input gives s = 0 and L = 0.
float fit_symmetric(const float* x, const float* w, int n, int lo, int hi, int8_t* L);
// x ~= s * L + m with integer L in [0, nmax] and s >= 0; with m_nonpositive
// the offset is kept <= 0 (k-quant mins are subtracted magnitudes).
void fit_affine(const float* x, const float* w, int n, int nmax, bool m_nonpositive, uint8_t* L,
                float* s, float* m);

// x ~= scale * L - offset with L = round_clamp((x + offset) / scale, lo, hi)
// (L = 0 when scale is 0): the squared error (f32 sums), and the integers.
float requant_error(const float* x, int n, float scale, float offset, int lo, int hi);
void requant(const float* x, int n, float scale, float offset, int lo, int hi, int* L);

// Quantizer entry points per family (return false for a type they do not own).
// n is a positive multiple of the type's block size.
bool quantize_legacy(DType t, const float* src, void* dst, size_t n);  // quant_legacy.cpp
bool quantize_kquant(DType t, const float* src, void* dst, size_t n);  // quant_kquants.cpp
// IQ4_NL, IQ4_XS, MXFP4 (quant_iq4.cpp); importance may be null.
bool quantize_iq4(DType t, const float* src, void* dst, size_t n, const float* importance);

// The i-quants below 4 bits: IQ1_S, IQ1_M (quant_iq1.cpp), IQ2_XXS, IQ2_XS,
// IQ2_S (quant_iq2.cpp), IQ3_XXS, IQ3_S (quant_iq3.cpp), searched by
// quant_iq_search.cpp. importance may be null (all weights 1); error, when
// not null, receives the weighted squared error the search computed for
// what it wrote.
bool quantize_iq1(DType t, const float* src, void* dst, size_t n, const float* importance, double* error);
bool quantize_iq2(DType t, const float* src, void* dst, size_t n, const float* importance, double* error);
bool quantize_iq3(DType t, const float* src, void* dst, size_t n, const float* importance, double* error);

// F8_E4M3_ROW rows (quant_f8_row.cpp): n a positive multiple of 32, dst of
// row_bytes(F8_E4M3_ROW, n) bytes. A row holding a NaN gets a NaN scale (it
// reads back all NaN); infinities saturate to +-448 s.
void quantize_f8_row(const float* src, void* dst, size_t n);
// simd: AVX2 where compiled in (RF_QUANT_AVX2); the values are the same.
void dequantize_f8_row(const void* src, float* dst, size_t n, bool simd);
float dot_f8_row(const void* w, const float* x, size_t n, bool simd);

}  // namespace qimpl
}  // namespace rf
