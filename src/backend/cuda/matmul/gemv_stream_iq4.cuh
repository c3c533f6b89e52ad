// The streaming GEMV's 4-bit formats of non-linear levels (IQ4_NL, IQ4_XS,
// MXFP4): StreamFormat<T> as gemv_stream_format.cuh defines it (chunk c:
// weights 64c .. 64c + 63, the activations' 8-bit quants and (d, d * sum)
// per 32). Each 4-bit code becomes its int8 level (core/iq_grids.h: IQ4's
// 16 levels, MXFP4's E2M1 values doubled) by byte permutes of the 16-level
// table held in four words, then meets the activations in integer dot
// products; the block scale is applied per 32 in f32 (IQ4_NL: f16 d; IQ4_XS:
// f16 d times a 6-bit sub-scale - 32; MXFP4: the E8M0 scale halved, as the
// levels are doubled).
#pragma once

#include "backend/cuda/matmul/gemv_stream_format.cuh"
#include "core/iq_grids.h"

namespace rf::gpu {
namespace {

// A 16-entry int8 table in four words: entry i is byte i % 4 of word i / 4.
struct Levels16 {
  uint32_t w[4];
};
constexpr uint32_t pack_levels4(const int8_t (&l)[16], int word) {
  return uint32_t(uint8_t(l[4 * word])) | (uint32_t(uint8_t(l[4 * word + 1])) << 8) |
         (uint32_t(uint8_t(l[4 * word + 2])) << 16) | (uint32_t(uint8_t(l[4 * word + 3])) << 24);
}
template <DType T>
__device__ __forceinline__ Levels16 levels16() {
  constexpr const int8_t(&l)[16] = T == DType::MXFP4 ? iq::kMxfp4Levels : iq::kIq4nlLevels;
  constexpr Levels16 t{{pack_levels4(l, 0), pack_levels4(l, 1), pack_levels4(l, 2), pack_levels4(l, 3)}};
  return t;
}

// The levels of the four 4-bit codes in bits 0..15 of `codes`, byte j the
// level of code j: a byte permute reads only a selector nibble's low three
// bits, so one permute picks among entries 0..7, one among 8..15, and a
// third takes byte j from the second where bit 3 of code j is set.
__device__ __forceinline__ uint32_t levels4(uint32_t codes, const Levels16& t) {
  const uint32_t lo = __byte_perm(t.w[0], t.w[1], codes);
  const uint32_t hi = __byte_perm(t.w[2], t.w[3], codes);
  return __byte_perm(lo, hi, 0x3210u | ((codes & 0x8888u) >> 1));
}

// Sum over one block of 32 codes (16 bytes: byte j holds element j in its
// low nibble, j + 16 in its high one) of level x activation quant. A word's
// two halves give levels (j, j + 16, j + 1, j + 17) and (j + 2, j + 18,
// j + 3, j + 19); two permutes regroup them as the activations lie.
__device__ __forceinline__ int levels_block_dot(const uint32_t (&qs)[4], const uint4 (&x)[2], const Levels16& t) {
  const uint32_t xw[8] = {x[0].x, x[0].y, x[0].z, x[0].w, x[1].x, x[1].y, x[1].z, x[1].w};
  int acc = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // word i: elements 4i .. 4i + 3 and 16 + 4i ..
    const uint32_t a = levels4(qs[i], t), b = levels4(qs[i] >> 16, t);
    acc = dot4_i8(int(__byte_perm(a, b, 0x6420u)), int(xw[i]), acc);
    acc = dot4_i8(int(__byte_perm(a, b, 0x7531u)), int(xw[4 + i]), acc);
  }
  return acc;
}

// IQ4_NL: Q4_0's layout (18-byte blocks: f16 d, 16 bytes of codes), chunk
// c blocks 2c and 2c + 1 as 9 words (see StreamQ40Q50); element d * level.
template <> struct StreamFormat<DType::IQ4_NL> : StreamBlockPair<BlockIQ4_NL> {
  __device__ static float dot(const Chunk& q, const XChunk& x, int /*p*/) {
    uint32_t w[kWords];
    words(q, w);
    const Levels16 t = levels16<DType::IQ4_NL>();
    const uint32_t qs0[4] = {__byte_perm(w[0], w[1], 0x5432), __byte_perm(w[1], w[2], 0x5432),
                             __byte_perm(w[2], w[3], 0x5432), __byte_perm(w[3], w[4], 0x5432)};
    const uint32_t qs1[4] = {w[5], w[6], w[7], w[8]};
    return h2f(uint16_t(w[0])) * x.ds.x * float(levels_block_dot(qs0, x.xl, t)) +
           h2f(uint16_t(w[4] >> 16)) * x.ds.z * float(levels_block_dot(qs1, x.xh, t));
  }
};

// IQ4_XS (136-byte super-blocks, 8-byte aligned in a row; read in 8-byte
// pieces): chunk c is sub-blocks 2p and 2p + 1 (p = c % 4) of super-block
// c / 4: the header's two words (f16 d, the high 2 bits of each sub-scale; their low 4 bits)
// and the 32 code bytes at 8 + 32p. Element d * (sub-scale - 32) * level.
template <> struct StreamFormat<DType::IQ4_XS> {
  struct Chunk {
    uint32_t head[2], qs[8];
  };
  using XChunk = StreamQ45K<false>::XChunk;
  __device__ static Chunk load(const uint8_t* row, int c, bool /*l1: always*/) {
    const uint8_t* sb = row + size_t(c / 4) * sizeof(BlockIQ4_XS);
    const uint8_t* qs = sb + offsetof(BlockIQ4_XS, qs) + 32 * (c % 4);
    Chunk q;
    const uint2 head = __ldg(reinterpret_cast<const uint2*>(sb));
    q.head[0] = head.x;
    q.head[1] = head.y;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(qs + 8 * j));
      q.qs[2 * j] = v.x;
      q.qs[2 * j + 1] = v.y;
    }
    return q;
  }
  __device__ static XChunk load_x(const int8_t* xq, const float2* xds, int c) {
    return StreamQ45K<false>::load_x(xq, xds, c);
  }
  __device__ static float dot(const Chunk& q, const XChunk& x, int p) {
    const Levels16 t = levels16<DType::IQ4_XS>();
    const uint32_t lo4 = q.head[1] >> (8 * p), hi2 = q.head[0] >> (16 + 4 * p);
    const int ls0 = int((lo4 & 0xFu) | ((hi2 & 3u) << 4)), ls1 = int(((lo4 >> 4) & 0xFu) | (((hi2 >> 2) & 3u) << 4));
    const uint32_t qs0[4] = {q.qs[0], q.qs[1], q.qs[2], q.qs[3]}, qs1[4] = {q.qs[4], q.qs[5], q.qs[6], q.qs[7]};
    return h2f(uint16_t(q.head[0])) * (float(ls0 - 32) * x.ds.x * float(levels_block_dot(qs0, x.xl, t)) +
                                       float(ls1 - 32) * x.ds.z * float(levels_block_dot(qs1, x.xh, t)));
  }
};

// MXFP4 (17-byte blocks: an E8M0 exponent, 16 bytes of E2M1 codes): chunk
// c's 34 bytes start 2-byte aligned (rows of whole chunks have an even
// length; the matrix starts 4-aligned), so they are read as 9 words from
// the 4-aligned address at or below (the last one 16-bit where that is the
// chunk's start, so that no load passes its end) and realigned by byte
// permutes. Element 2^(e - 128) * doubled level.
template <> struct StreamFormat<DType::MXFP4> {
  struct Chunk {
    uint32_t w[9];
    uint32_t sel;  // realigning permute: 2-byte offset or none
  };
  using XChunk = StreamQ45K<false>::XChunk;
  __device__ static Chunk load(const uint8_t* row, int c, bool /*l1: always*/) {
    const uint8_t* p = row + size_t(c) * (2 * sizeof(BlockMXFP4));
    const bool odd = (reinterpret_cast<uintptr_t>(p) & 2) != 0;
    const uint8_t* a = odd ? p - 2 : p;
    Chunk q;
#pragma unroll
    for (int j = 0; j < 8; ++j) q.w[j] = load_weights4(a + 4 * j);
    q.w[8] = odd ? load_weights4(a + 32) : load_weights2(a + 32);
    q.sel = odd ? 0x5432u : 0x3210u;
    return q;
  }
  __device__ static XChunk load_x(const int8_t* xq, const float2* xds, int c) {
    return StreamQ45K<false>::load_x(xq, xds, c);
  }
  __device__ static float dot(const Chunk& q, const XChunk& x, int /*p*/) {
    const Levels16 t = levels16<DType::MXFP4>();
    uint32_t v[9];  // the chunk's bytes 4j .. 4j + 3 (v[8]: bytes 32, 33)
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = __byte_perm(q.w[j], q.w[j + 1], q.sel);
    v[8] = __byte_perm(q.w[8], 0u, q.sel);
    // Block 2c: exponent byte 0, codes bytes 1..16; block 2c + 1: exponent
    // byte 17, codes bytes 18..33.
    const uint32_t qs0[4] = {__byte_perm(v[0], v[1], 0x4321), __byte_perm(v[1], v[2], 0x4321),
                             __byte_perm(v[2], v[3], 0x4321), __byte_perm(v[3], v[4], 0x4321)};
    const uint32_t qs1[4] = {__byte_perm(v[4], v[5], 0x5432), __byte_perm(v[5], v[6], 0x5432),
                             __byte_perm(v[6], v[7], 0x5432), __byte_perm(v[7], v[8], 0x5432)};
    const float s0 = __uint_as_float(e8m0_half_bits(uint8_t(v[0]))), s1 = __uint_as_float(e8m0_half_bits(uint8_t(v[4] >> 8)));
    return s0 * x.ds.x * float(levels_block_dot(qs0, x.xl, t)) + s1 * x.ds.z * float(levels_block_dot(qs1, x.xh, t));
  }
};

}  // namespace
}  // namespace rf::gpu
