// The streaming GEMV's grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S): StreamFormat<T> as gemv_stream_format.cuh defines
// it (chunk c: sub-blocks 2p and 2p + 1, p = c % 4, of super-block c / 4;
// the activations' 8-bit quants and (d, d * sum) per 32). Each group of 8
// (or 4) weights names a grid entry (core/iq_grids.h: its magnitudes as
// bytes), read from a copy of the grid the block stages in shared memory
// (stage_tables(), which the kernel calls before its barrier; IQ1's from
// the device copy); the group's sign bits become byte masks (0xFF where
// negative) that negate those bytes, and the signed bytes meet the
// activations in integer dot products. Scales are applied per 32 (IQ2_XS, IQ2_S, IQ1_M: per 16) in f32
// as core/quant_iquants.cpp computes them.
//
// These super-blocks are 2-byte aligned (66, 74, 82, 98, 110 and 50 bytes;
// IQ1_M's 56 are 4-aligned), and every multi-word field a chunk reads sits
// 2 bytes past a 4-byte boundary of its super-block: a chunk's fields are
// read as aligned 4-byte words from the boundary at or below (the last one
// 16-bit where the field starts 2 bytes past one, so no load passes its
// end) and realigned by one byte permute per word in dot(), so that load()
// never waits for its bytes.
#pragma once

#include "backend/cuda/matmul/gemv_stream_format.cuh"
#include "core/iq_grids.h"

namespace rf::gpu {
namespace {

// Byte masks of sign bits: byte j of a mask is 0xFF where sign bit j is
// set. Multiplying 4 bits by 0x10204080 (bits 0..3; bits 4..7 by 0x01020408)
// moves bit j to the top of byte j without carries; a byte permute in its
// sign-replicating mode (selector nibbles 8..B) then spreads each top bit
// over its byte.
__device__ __forceinline__ uint32_t top_bits_to_bytes(uint32_t w) {
#if !defined(RF_HIP) && defined(__CUDA_ARCH__)
  uint32_t r;
  asm("prmt.b32 %0, %1, 0, 0xBA98;" : "=r"(r) : "r"(w));
  return r;
#else
  return ((w >> 7) & 0x01010101u) * 0xFFu;
#endif
}
// The masks of 8 sign bits s (bits 0..3 in .x, 4..7 in .y).
__device__ __forceinline__ uint2 sign_masks8(uint32_t s) {
  return make_uint2(top_bits_to_bytes((s & 0xFu) * 0x10204080u), top_bits_to_bytes((s & 0xF0u) * 0x01020408u));
}
// The same for a 7-bit pattern, extended by its parity bit (the count of
// negative values is even; core/iq_grids.h: kSigns7).
__device__ __forceinline__ uint2 sign_masks7(uint32_t s7) {
  return sign_masks8(s7 | ((uint32_t(__popc(s7)) & 1u) << 7));
}

// Magnitude bytes g (each 1..127) with the bytes under mask m negated:
// (g ^ 0xFF) + 1 = -g per byte, which never carries since no byte of g is 0.
__device__ __forceinline__ int signed_bytes(uint32_t g, uint32_t m) { return int((g ^ m) + (m & 0x01010101u)); }

// Sum over 8 weights (grid entry g of 8 magnitudes, sign masks m) of weight
// x activation quant (activation words a, b).
__device__ __forceinline__ int grid8_dot(uint64_t g, uint2 m, uint32_t a, uint32_t b, int acc) {
  acc = dot4_i8(signed_bytes(uint32_t(g), m.x), int(a), acc);
  return dot4_i8(signed_bytes(uint32_t(g >> 32), m.y), int(b), acc);
}

// A grid staged in shared memory (the grid formats but IQ1's: their 1-8 KB
// against IQ1's 16 KB): every thread of the block copies its share
// (stage(), before the block's barrier), and dot() looks entries up there,
// where a warp's 32 scattered reads cost a few bank cycles instead of a
// cache-line lookup each.
template <typename E, int N>
struct SharedGrid {
  __device__ static E* table() {
    __shared__ E t[N];
    return t;
  }
  __device__ static void stage(const E* grid) {
    E* t = table();
    for (int i = int(threadIdx.x); i < N; i += int(blockDim.x)) t[i] = grid[i];
  }
};
// The IQ1 grid, read from the device copy.
__device__ __forceinline__ uint64_t iq1_grid_entry(uint32_t i) {
  return __ldg(reinterpret_cast<const unsigned long long*>(iq::kIq1sGrid) + i);
}
using Iq2xxsGrid = SharedGrid<uint64_t, 256>;
using Iq2xsGrid = SharedGrid<uint64_t, 512>;
using Iq2sGrid = SharedGrid<uint64_t, 1024>;
using Iq3xxsGrid = SharedGrid<uint32_t, 256>;
using Iq3sGrid = SharedGrid<uint32_t, 512>;

// A chunk's field of N words at f (2 bytes past a 4-byte boundary when odd,
// the same for every field of the chunk): raw words, realigned by word().
template <int N>
struct FieldWords {
  uint32_t w[N + 1];
  __device__ __forceinline__ void load(const uint8_t* f, bool odd) {
    const uint8_t* a = odd ? f - 2 : f;
#pragma unroll
    for (int j = 0; j < N; ++j) w[j] = load_weights4(a + 4 * j);
    w[N] = odd ? load_weights2(a + 4 * N) : 0u;
  }
  // Word j of the field (sel: realign_sel(odd)).
  __device__ __forceinline__ uint32_t word(int j, uint32_t sel) const { return __byte_perm(w[j], w[j + 1], sel); }
};
__device__ __forceinline__ uint32_t realign_sel(bool odd) { return odd ? 0x5432u : 0x3210u; }
// Whether a super-block's fields at 2 past a 4-byte multiple of its start
// sit 2 bytes past a 4-byte boundary.
__device__ __forceinline__ bool fields_odd(const uint8_t* sb) { return (reinterpret_cast<uintptr_t>(sb) & 2) == 0; }

// The 8 activation words of a sub-block.
__device__ __forceinline__ void x_words(const uint4 (&x)[2], uint32_t (&w)[8]) {
  w[0] = x[0].x, w[1] = x[0].y, w[2] = x[0].z, w[3] = x[0].w;
  w[4] = x[1].x, w[5] = x[1].y, w[6] = x[1].z, w[7] = x[1].w;
}

// The parts every grid format shares: the super-block of chunk c, its
// activations (those of the k-quants).
struct StreamGridBase {
  using XChunk = StreamQ45K<false>::XChunk;
  __device__ static XChunk load_x(const int8_t* xq, const float2* xds, int c) {
    return StreamQ45K<false>::load_x(xq, xds, c);
  }
};

// IQ2_XXS (66 bytes: f16 d, then per 32 four grid-index bytes and a word
// of four 7-bit sign patterns and a 4-bit scale s): element d (0.5 + s) / 4
// x sign x magnitude. Chunk: d, sub-blocks 2p, 2p + 1 as 16 bytes at 2 + 16p.
template <> struct StreamFormat<DType::IQ2_XXS> : StreamGridBase {
  __device__ static void stage_tables() { Iq2xxsGrid::stage(iq::kIq2xxsGrid); }
  struct Chunk {
    uint32_t d;
    FieldWords<4> q;
    bool odd;
  };
  __device__ static Chunk load(const uint8_t* row, int c, bool /*l1: always*/) {
    const uint8_t* sb = row + size_t(c / 4) * sizeof(BlockIQ2_XXS);
    Chunk q;
    q.odd = fields_odd(sb);
    q.d = load_weights2(sb);
    q.q.load(sb + 2 + 16 * (c % 4), q.odd);
    return q;
  }
  __device__ static float sub_dot(uint32_t idx, uint32_t aux, const uint4 (&x)[2], float d, float xd) {
    uint32_t xw[8];
    x_words(x, xw);
    int acc = 0;
#pragma unroll
    for (int l = 0; l < 4; ++l)
      acc = grid8_dot(Iq2xxsGrid::table()[(idx >> (8 * l)) & 0xFFu], sign_masks7((aux >> (7 * l)) & 127u),
                      xw[2 * l], xw[2 * l + 1], acc);
    return d * (0.5f + float(aux >> 28)) * 0.25f * xd * float(acc);
  }
  __device__ static float dot(const Chunk& q, const XChunk& x, int /*p*/) {
    const uint32_t sel = realign_sel(q.odd);
    const float d = h2f(uint16_t(q.d));
    return sub_dot(q.q.word(0, sel), q.q.word(1, sel), x.xl, d, x.ds.x) +
           sub_dot(q.q.word(2, sel), q.q.word(3, sel), x.xh, d, x.ds.z);
  }
};

// IQ2_XS (74 bytes: f16 d, per 8 weights a 16-bit 9-bit grid index + 7-bit
// sign pattern, then a byte of two 4-bit scales per 32, one per 16):
// element d (0.5 + s) / 4 x sign x magnitude. Chunk: d, the 16 bytes of
// indices at 2 + 16p, the scale bytes 2p, 2p + 1 at 66 + 2p.
template <> struct StreamFormat<DType::IQ2_XS> : StreamGridBase {
  __device__ static void stage_tables() { Iq2xsGrid::stage(iq::kIq2xsGrid); }
  struct Chunk {
    uint32_t d, scales;
    FieldWords<4> q;
    bool odd;
  };
  __device__ static Chunk load(const uint8_t* row, int c, bool /*l1: always*/) {
    const uint8_t* sb = row + size_t(c / 4) * sizeof(BlockIQ2_XS);
    const int p = c % 4;
    Chunk q;
    q.odd = fields_odd(sb);
    q.d = load_weights2(sb);
    q.scales = load_weights2(sb + offsetof(BlockIQ2_XS, scales) + 2 * p);
    q.q.load(sb + 2 + 16 * p, q.odd);
    return q;
  }
  // Sub-block of index words w0, w1 (two 16-bit entries each) and scale byte sc.
  __device__ static float sub_dot(uint32_t w0, uint32_t w1, uint32_t sc, const uint4 (&x)[2], float d, float xd) {
    uint32_t xw[8];
    x_words(x, xw);
    const uint32_t e[4] = {w0 & 0xFFFFu, w0 >> 16, w1 & 0xFFFFu, w1 >> 16};
    int acc[2] = {0, 0};
#pragma unroll
    for (int l = 0; l < 4; ++l)
      acc[l / 2] = grid8_dot(Iq2xsGrid::table()[e[l] & 511u], sign_masks7(e[l] >> 9), xw[2 * l],
                             xw[2 * l + 1], acc[l / 2]);
    return xd * (d * (0.5f + float(sc & 0xFu)) * 0.25f * float(acc[0]) +
                 d * (0.5f + float((sc >> 4) & 0xFu)) * 0.25f * float(acc[1]));
  }
  __device__ static float dot(const Chunk& q, const XChunk& x, int /*p*/) {
    const uint32_t sel = realign_sel(q.odd);
    const float d = h2f(uint16_t(q.d));
    return sub_dot(q.q.word(0, sel), q.q.word(1, sel), q.scales & 0xFFu, x.xl, d, x.ds.x) +
           sub_dot(q.q.word(2, sel), q.q.word(3, sel), q.scales >> 8, x.xh, d, x.ds.z);
  }
};

// IQ2_S (82 bytes: f16 d, the low bytes of 10-bit grid indices (4 per 32),
// a sign byte per 8 weights, the indices' top 2 bits (a byte per 32), a
// byte of two 4-bit scales per 32): element d (0.5 + s) / 4 x sign x
// magnitude. Chunk: d, index bytes at 2 + 8p, sign bytes at 34 + 8p, the
// top-bit and scale bytes 2p, 2p + 1.
template <> struct StreamFormat<DType::IQ2_S> : StreamGridBase {
  __device__ static void stage_tables() { Iq2sGrid::stage(iq::kIq2sGrid); }
  struct Chunk {
    uint32_t d, qh, scales;
    FieldWords<2> idx, signs;
    bool odd;
  };
  __device__ static Chunk load(const uint8_t* row, int c, bool /*l1: always*/) {
    const uint8_t* sb = row + size_t(c / 4) * sizeof(BlockIQ2_S);
    const int p = c % 4;
    Chunk q;
    q.odd = fields_odd(sb);
    q.d = load_weights2(sb);
    q.qh = load_weights2(sb + offsetof(BlockIQ2_S, qh) + 2 * p);
    q.scales = load_weights2(sb + offsetof(BlockIQ2_S, scales) + 2 * p);
    q.idx.load(sb + 2 + 8 * p, q.odd);
    q.signs.load(sb + 2 + 32 + 8 * p, q.odd);
    return q;
  }
  __device__ static float sub_dot(uint32_t idx, uint32_t signs, uint32_t qh, uint32_t sc, const uint4 (&x)[2],
                                  float d, float xd) {
    uint32_t xw[8];
    x_words(x, xw);
    int acc[2] = {0, 0};
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t i = ((idx >> (8 * l)) & 0xFFu) | ((qh << (8 - 2 * l)) & 0x300u);
      acc[l / 2] = grid8_dot(Iq2sGrid::table()[i], sign_masks8((signs >> (8 * l)) & 0xFFu), xw[2 * l],
                             xw[2 * l + 1], acc[l / 2]);
    }
    return xd * (d * (0.5f + float(sc & 0xFu)) * 0.25f * float(acc[0]) +
                 d * (0.5f + float((sc >> 4) & 0xFu)) * 0.25f * float(acc[1]));
  }
  __device__ static float dot(const Chunk& q, const XChunk& x, int /*p*/) {
    const uint32_t sel = realign_sel(q.odd);
    const float d = h2f(uint16_t(q.d));
    return sub_dot(q.idx.word(0, sel), q.signs.word(0, sel), q.qh & 0xFFu, q.scales & 0xFFu, x.xl, d, x.ds.x) +
           sub_dot(q.idx.word(1, sel), q.signs.word(1, sel), q.qh >> 8, q.scales >> 8, x.xh, d, x.ds.z);
  }
};

// IQ3_XXS (98 bytes: f16 d, 8 grid-index bytes per 32 (4 magnitudes each),
// then per 32 a word of four 7-bit sign patterns and a 4-bit scale):
// element d (0.5 + s) / 2 x sign x magnitude. Chunk: d, index bytes at
// 2 + 16p, sign words at 66 + 8p.
template <> struct StreamFormat<DType::IQ3_XXS> : StreamGridBase {
  __device__ static void stage_tables() { Iq3xxsGrid::stage(iq::kIq3xxsGrid); }
  struct Chunk {
    uint32_t d;
    FieldWords<4> idx;
    FieldWords<2> aux;
    bool odd;
  };
  __device__ static Chunk load(const uint8_t* row, int c, bool /*l1: always*/) {
    const uint8_t* sb = row + size_t(c / 4) * sizeof(BlockIQ3_XXS);
    const int p = c % 4;
    Chunk q;
    q.odd = fields_odd(sb);
    q.d = load_weights2(sb);
    q.idx.load(sb + 2 + 16 * p, q.odd);
    q.aux.load(sb + 2 + 64 + 8 * p, q.odd);
    return q;
  }
  __device__ static float sub_dot(uint32_t i0, uint32_t i1, uint32_t aux, const uint4 (&x)[2], float d, float xd) {
    uint32_t xw[8];
    x_words(x, xw);
    int acc = 0;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t iw = l < 2 ? i0 : i1, sh = 16 * (l % 2);
      const uint32_t* grid = Iq3xxsGrid::table();
      const uint64_t g = uint64_t(grid[(iw >> sh) & 0xFFu]) | (uint64_t(grid[(iw >> (sh + 8)) & 0xFFu]) << 32);
      acc = grid8_dot(g, sign_masks7((aux >> (7 * l)) & 127u), xw[2 * l], xw[2 * l + 1], acc);
    }
    return d * (0.5f + float(aux >> 28)) * 0.5f * xd * float(acc);
  }
  __device__ static float dot(const Chunk& q, const XChunk& x, int /*p*/) {
    const uint32_t sel = realign_sel(q.odd);
    const float d = h2f(uint16_t(q.d));
    return sub_dot(q.idx.word(0, sel), q.idx.word(1, sel), q.aux.word(0, sel), x.xl, d, x.ds.x) +
           sub_dot(q.idx.word(2, sel), q.idx.word(3, sel), q.aux.word(1, sel), x.xh, d, x.ds.z);
  }
};

// IQ3_S (110 bytes: f16 d, low bytes of 9-bit grid indices (8 per 32, 4
// magnitudes each), their 9th bits (a byte per 32), a sign bit per weight,
// 4-bit scales s (one per 32)): element d (1 + 2s) x sign x magnitude.
// Chunk: d, index bytes at 2 + 16p, the 9th-bit bytes 2p, 2p + 1, sign
// bytes at 74 + 8p, the scale byte p.
template <> struct StreamFormat<DType::IQ3_S> : StreamGridBase {
  __device__ static void stage_tables() { Iq3sGrid::stage(iq::kIq3sGrid); }
  struct Chunk {
    uint32_t d, qh, scales;
    FieldWords<4> idx;
    FieldWords<2> signs;
    bool odd;
  };
  __device__ static Chunk load(const uint8_t* row, int c, bool /*l1: always*/) {
    const uint8_t* sb = row + size_t(c / 4) * sizeof(BlockIQ3_S);
    const int p = c % 4;
    Chunk q;
    q.odd = fields_odd(sb);
    q.d = load_weights2(sb);
    q.qh = load_weights2(sb + offsetof(BlockIQ3_S, qh) + 2 * p);
    q.scales = __ldg(sb + offsetof(BlockIQ3_S, scales) + p);
    q.idx.load(sb + 2 + 16 * p, q.odd);
    q.signs.load(sb + offsetof(BlockIQ3_S, signs) + 8 * p, q.odd);
    return q;
  }
  __device__ static float sub_dot(uint32_t i0, uint32_t i1, uint32_t signs, uint32_t qh, const uint4 (&x)[2],
                                  float db, float xd) {
    uint32_t xw[8];
    x_words(x, xw);
    int acc = 0;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t iw = l < 2 ? i0 : i1, sh = 16 * (l % 2);
      const uint32_t a = ((iw >> sh) & 0xFFu) | ((qh << (8 - 2 * l)) & 256u);
      const uint32_t b = ((iw >> (sh + 8)) & 0xFFu) | ((qh << (7 - 2 * l)) & 256u);
      const uint32_t* grid = Iq3sGrid::table();
      const uint64_t g = uint64_t(grid[a]) | (uint64_t(grid[b]) << 32);
      acc = grid8_dot(g, sign_masks8((signs >> (8 * l)) & 0xFFu), xw[2 * l], xw[2 * l + 1], acc);
    }
    return db * xd * float(acc);
  }
  __device__ static float dot(const Chunk& q, const XChunk& x, int /*p*/) {
    const uint32_t sel = realign_sel(q.odd);
    const float d = h2f(uint16_t(q.d));
    return sub_dot(q.idx.word(0, sel), q.idx.word(1, sel), q.signs.word(0, sel), q.qh & 0xFFu, x.xl,
                   d * float(1 + 2 * int(q.scales & 0xFu)), x.ds.x) +
           sub_dot(q.idx.word(2, sel), q.idx.word(3, sel), q.signs.word(1, sel), q.qh >> 8, x.xh,
                   d * float(1 + 2 * int(q.scales >> 4)), x.ds.z);
  }
};

// IQ1_S (50 bytes: f16 d, low bytes of 11-bit grid indices (4 per 32, 8
// values in {-1, 0, 1} each), per 32 a 16-bit word of four 3-bit index
// tops, a 3-bit scale s and a delta sign): element d (2s + 1) (value +-
// 1/8). Chunk: d, index bytes at 2 + 8p, the words 2p, 2p + 1 at 34 + 4p.
template <> struct StreamFormat<DType::IQ1_S> : StreamGridBase {
  struct Chunk {
    uint32_t d;
    FieldWords<2> idx;
    FieldWords<1> qh;
    bool odd;
  };
  __device__ static Chunk load(const uint8_t* row, int c, bool /*l1: always*/) {
    const uint8_t* sb = row + size_t(c / 4) * sizeof(BlockIQ1_S);
    const int p = c % 4;
    Chunk q;
    q.odd = fields_odd(sb);
    q.d = load_weights2(sb);
    q.idx.load(sb + 2 + 8 * p, q.odd);
    q.qh.load(sb + offsetof(BlockIQ1_S, qh) + 4 * p, q.odd);
    return q;
  }
  // Sub-block: dl (d (2s + 1)) x (xd x sum of value x quant + delta x xs),
  // xs = xd x the sum of its quants.
  __device__ static float sub_dot(uint32_t idx, uint32_t h, const uint4 (&x)[2], float d, float xd, float xs) {
    uint32_t xw[8];
    x_words(x, xw);
    int acc = 0;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = iq1_grid_entry(((idx >> (8 * l)) & 0xFFu) | (((h >> (3 * l)) & 7u) << 8));
      acc = dot4_i8(int(uint32_t(g)), int(xw[2 * l]), acc);
      acc = dot4_i8(int(uint32_t(g >> 32)), int(xw[2 * l + 1]), acc);
    }
    const float dl = d * float(2 * int((h >> 12) & 7u) + 1), delta = h & 0x8000u ? -0.125f : 0.125f;
    return dl * (xd * float(acc) + delta * xs);
  }
  __device__ static float dot(const Chunk& q, const XChunk& x, int /*p*/) {
    const uint32_t sel = realign_sel(q.odd);
    const float d = h2f(uint16_t(q.d));
    const uint32_t h = q.qh.word(0, sel);
    return sub_dot(q.idx.word(0, sel), h & 0xFFFFu, x.xl, d, x.ds.x, x.ds.y) +
           sub_dot(q.idx.word(1, sel), h >> 16, x.xh, d, x.ds.z, x.ds.w);
  }
};

// IQ1_M (56 bytes, 4-aligned in a row: low bytes of 11-bit grid indices (4
// per 32), a nibble per 8 weights (3 index tops, a delta sign), four 16-bit
// words of 3-bit scales (one per 16) whose top nibbles are the f16 d):
// element d (2s + 1) (value +- 1/8). Chunk: index bytes at 8p, the top
// nibbles at 32 + 4p, all four scale words.
template <> struct StreamFormat<DType::IQ1_M> : StreamGridBase {
  struct Chunk {
    uint32_t idx[2], qh, sc[2];
  };
  __device__ static Chunk load(const uint8_t* row, int c, bool /*l1: always*/) {
    const uint8_t* sb = row + size_t(c / 4) * sizeof(BlockIQ1_M);
    const int p = c % 4;
    Chunk q;
    q.idx[0] = load_weights4(sb + 8 * p);
    q.idx[1] = load_weights4(sb + 8 * p + 4);
    q.qh = load_weights4(sb + offsetof(BlockIQ1_M, qh) + 4 * p);
    q.sc[0] = load_weights4(sb + offsetof(BlockIQ1_M, scales));
    q.sc[1] = load_weights4(sb + offsetof(BlockIQ1_M, scales) + 4);
    return q;
  }
  // Sub-block of index bytes idx, top-nibble bytes h (16 bits) and 6 bits
  // of scales sc (3 per 16).
  __device__ static float sub_dot(uint32_t idx, uint32_t h, uint32_t sc, const uint4 (&x)[2], float d, float xd) {
    uint32_t xw[8];
    x_words(x, xw);
    int acc[2] = {0, 0}, delta[2] = {0, 0};  // per 16: sum of value x quant, of +-quants
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t nib = (h >> (4 * l)) & 0xFu;
      const uint64_t g = iq1_grid_entry(((idx >> (8 * l)) & 0xFFu) | ((nib & 7u) << 8));
      acc[l / 2] = dot4_i8(int(uint32_t(g)), int(xw[2 * l]), acc[l / 2]);
      acc[l / 2] = dot4_i8(int(uint32_t(g >> 32)), int(xw[2 * l + 1]), acc[l / 2]);
      const int s = dot4_i8(0x01010101, int(xw[2 * l + 1]), dot4_i8(0x01010101, int(xw[2 * l]), 0));
      delta[l / 2] += nib & 8u ? -s : s;
    }
    const float dl1 = d * float(2 * int(sc & 7u) + 1), dl2 = d * float(2 * int((sc >> 3) & 7u) + 1);
    return xd * (dl1 * (float(acc[0]) + 0.125f * float(delta[0])) + dl2 * (float(acc[1]) + 0.125f * float(delta[1])));
  }
  __device__ static float dot(const Chunk& q, const XChunk& x, int p) {
    // d from the top nibbles of the four scale words.
    const uint32_t d16 = (q.sc[0] >> 12 & 0xFu) | (q.sc[0] >> 24 & 0xF0u) | (q.sc[1] >> 4 & 0xF00u) |
                         (q.sc[1] >> 16 & 0xF000u);
    const float d = h2f(uint16_t(d16));
    const uint32_t w = p < 2 ? q.sc[0] : q.sc[1];
    const uint32_t scw = (w >> (16 * (p % 2))) & 0xFFFFu;  // scale word p: sub-block 2p in bits 0..5, 2p + 1 in 6..11
    return sub_dot(q.idx[0], q.qh & 0xFFFFu, scw & 0x3Fu, x.xl, d, x.ds.x) +
           sub_dot(q.idx[1], q.qh >> 16, (scw >> 6) & 0x3Fu, x.xh, d, x.ds.z);
  }
};

}  // namespace
}  // namespace rf::gpu
