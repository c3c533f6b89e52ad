// The streaming GEMVs' weight formats (k-quants and the 32-wide block formats; gemv_stream.cu, and one
// token's expert down + combine in moe_down.cu): how a lane loads its 64-weight
// chunk of a row straight into registers (StreamFormat<T>::load), the
// chunk's activations from a row's 8-bit quants (load_x) and their integer
// dot product (dot); the block shape (kStreamWarps) the kernels share.
#pragma once

#include <cstddef>
#include <type_traits>

#include "backend/cuda/gpu.h"
#include "backend/cuda/matmul/dequant.cuh"
#include "core/quant_blocks.h"

namespace rf::gpu {
namespace {

constexpr int kStreamWarps = 4;  // warps per block

// 16 bytes of weights: through L1 with `l1` (a lane's three loads share
// sectors with its neighbours'), else past it on NVIDIA.
__device__ __forceinline__ uint4 load_weights16(const uint8_t* p, bool l1) {
#if !defined(RF_PORTABLE) && defined(__CUDA_ARCH__)
  if (!l1) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
  }
#endif
  return __ldg(reinterpret_cast<const uint4*>(p));
}

// 4 bytes of weights at a 4-aligned address, and 2 at a 2-aligned one,
// through L1 (a lane's words share 32-byte sectors with its neighbours'
// and with its own next words).
__device__ __forceinline__ uint32_t load_weights4(const uint8_t* p) {
  return __ldg(reinterpret_cast<const uint32_t*>(p));
}
__device__ __forceinline__ uint32_t load_weights2(const uint8_t* p) {
  return __ldg(reinterpret_cast<const uint16_t*>(p));
}

// Sum of the four 8-bit products of a and b, plus c.
__device__ __forceinline__ int dot4_i8(int a, int b, int c) {
#if defined(RF_HIP)
  // (gfx90a and gfx1030 have a dot instruction; its builtin needs per-target
  // features, so the plain form for now.)
#pragma unroll
  for (int j = 0; j < 4; ++j) c += int(int8_t(a >> (8 * j))) * int(int8_t(b >> (8 * j)));
  return c;
#else
  return __dp4a(a, b, c);
#endif
}

// A weight format's streaming parts: Chunk, a lane's bytes of one row for
// chunk c (64 weights), loaded as raw words (Chunk load(row, c, l1), which
// must not wait for them; l1: Tuning::kq_stream_l1); XChunk, the
// chunk's activations (load_x from the row's quants and scales, shared by
// all rows); dot(chunk, x, p): their
// product, p = c % 4 (the same for all of a lane's chunks).
template <DType T> struct StreamFormat;

// Q4_K: chunk c = 32 quant bytes of super-block c / 4 (sub-block 2p in the
// low nibbles, 2p + 1 in the high ones; activations 64c .. 64c + 63) and the
// super-block's 16-byte header (d, dmin, packed 6-bit scales and mins).
// Q5_K (kFifthBit): the same, with the super-block's 32 bytes of fifth
// bits after the header (bit 2p of byte l: element l of sub-block 2p, bit
// 2p + 1: of sub-block 2p + 1), the quants after them; the four lanes of a
// super-block load the same fifth-bit words (their loads coalesce).
template <bool kFifthBit> struct StreamQ45K {
  using Block = std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>;
  struct NoFifthBits {};
  struct FifthBits {
    uint4 h0, h1;
  };
  struct Chunk {
    uint4 head, q0, q1;
    std::conditional_t<kFifthBit, FifthBits, NoFifthBits> fifth;
  };
  struct XChunk {
    uint4 xl[2], xh[2];  // 8-bit quants of the two sub-blocks
    float4 ds;           // (d, d * sum of quants) of each
  };
  __device__ static Chunk load(const uint8_t* row, int c, bool l1) {
    const uint8_t* sb = row + size_t(c / 4) * sizeof(Block);
    const uint8_t* qs = sb + offsetof(Block, qs) + 32 * (c % 4);
    Chunk q;
    q.head = load_weights16(sb, l1);
    q.q0 = load_weights16(qs, l1);
    q.q1 = load_weights16(qs + 16, l1);
    if constexpr (kFifthBit) {
      q.fifth.h0 = load_weights16(sb + offsetof(Block, qh), l1);
      q.fifth.h1 = load_weights16(sb + offsetof(Block, qh) + 16, l1);
    }
    return q;
  }
  __device__ static XChunk load_x(const int8_t* xq, const float2* xds, int c) {
    const uint4* xp = reinterpret_cast<const uint4*>(xq) + size_t(c) * 4;
    return {{__ldg(xp), __ldg(xp + 1)}, {__ldg(xp + 2), __ldg(xp + 3)},
            __ldg(reinterpret_cast<const float4*>(xds) + c)};
  }
  // The 6-bit scales and mins of the pair come out of the header in two
  // 16-bit lanes (core/quant_blocks.h has the layout); the nibbles (and
  // fifth bits) go four at a time into integer dot products.
  __device__ static float dot(const Chunk& q, const XChunk& x, int p) {
    const float2 dm = __half22float2(*reinterpret_cast<const __half2*>(&q.head.x));
    const int shift = (p & 1) * 16;
    const uint32_t s0 = q.head.y >> shift, s1 = q.head.z >> shift, s2 = q.head.w >> shift;
    const uint32_t sc = p < 2 ? (s0 & 0x3F3Fu) : ((s2 & 0x0F0Fu) | ((s0 >> 2) & 0x3030u));
    const uint32_t mn = p < 2 ? (s1 & 0x3F3Fu) : (((s2 >> 4) & 0x0F0Fu) | ((s1 >> 2) & 0x3030u));
    const uint32_t w[8] = {q.q0.x, q.q0.y, q.q0.z, q.q0.w, q.q1.x, q.q1.y, q.q1.z, q.q1.w};
    const uint32_t xa[8] = {x.xl[0].x, x.xl[0].y, x.xl[0].z, x.xl[0].w, x.xl[1].x, x.xl[1].y, x.xl[1].z, x.xl[1].w};
    const uint32_t xb[8] = {x.xh[0].x, x.xh[0].y, x.xh[0].z, x.xh[0].w, x.xh[1].x, x.xh[1].y, x.xh[1].z, x.xh[1].w};
    int lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // word i: elements 4i .. 4i + 3 of each sub-block
      uint32_t ql = w[i] & 0x0F0F0F0Fu, qh = (w[i] >> 4) & 0x0F0F0F0Fu;
      if constexpr (kFifthBit) {
        const uint32_t h[8] = {q.fifth.h0.x, q.fifth.h0.y, q.fifth.h0.z, q.fifth.h0.w,
                               q.fifth.h1.x, q.fifth.h1.y, q.fifth.h1.z, q.fifth.h1.w};
        ql |= ((h[i] >> (2 * p)) & 0x01010101u) << 4;
        qh |= ((h[i] >> (2 * p + 1)) & 0x01010101u) << 4;
      }
      lo = dot4_i8(int(ql), int(xa[i]), lo);
      hi = dot4_i8(int(qh), int(xb[i]), hi);
    }
    // Element = d * sc * q - dmin * m; activation = scale * quant.
    return dm.x * (small_uint_to_float(sc & 0xFFu) * x.ds.x * float(lo) +
                   small_uint_to_float(sc >> 8) * x.ds.z * float(hi)) -
           dm.y * (small_uint_to_float(mn & 0xFFu) * x.ds.y + small_uint_to_float(mn >> 8) * x.ds.w);
  }
};
template <> struct StreamFormat<DType::Q4_K> : StreamQ45K<false> {};
template <> struct StreamFormat<DType::Q5_K> : StreamQ45K<true> {};

// The 32-wide block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): chunk c is
// blocks 2c and 2c + 1, loaded as raw 8-byte pieces (and one 4-byte word
// where a chunk is an odd number of words: Q4_0, Q5_0, Q8_0, IQ4_NL; such
// chunks alternate between 8-byte alignment and 4 past it, so the lone
// word is the chunk's last or first, the pieces the rest); words() gives
// the chunk's words in order. The activations are Q4_K's (the quants of the
// two blocks' 64 elements and (d, d * sum) of each 32).
template <typename Block>
struct StreamBlockPair {
  static constexpr int kWords = int(2 * sizeof(Block) / 4);
  struct Chunk {
    uint32_t raw[kWords];
    bool a8;  // the chunk 8-aligned (always for an even kWords)
  };
  using XChunk = StreamQ45K<false>::XChunk;
  __device__ static Chunk load(const uint8_t* row, int c, bool /*l1: always*/) {
    const uint8_t* p = row + size_t(c) * (2 * sizeof(Block));
    Chunk q;
    q.a8 = kWords % 2 == 0 || (reinterpret_cast<uintptr_t>(p) & 4) == 0;
    const uint8_t* pieces = q.a8 ? p : p + 4;
#pragma unroll
    for (int j = 0; j < kWords / 2; ++j) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(pieces + 8 * j));
      q.raw[2 * j] = v.x;
      q.raw[2 * j + 1] = v.y;
    }
    if constexpr (kWords % 2 != 0) q.raw[kWords - 1] = load_weights4(q.a8 ? p + 4 * (kWords - 1) : p);
    return q;
  }
  // Word j of the chunk is raw[j], or (a chunk 4 past 8-alignment) raw[j - 1], raw[kWords - 1] for j = 0.
  __device__ static void words(const Chunk& q, uint32_t (&w)[kWords]) {
#pragma unroll
    for (int j = 0; j < kWords; ++j) w[j] = q.a8 ? q.raw[j] : q.raw[j == 0 ? kWords - 1 : j - 1];
  }
  __device__ static XChunk load_x(const int8_t* xq, const float2* xds, int c) {
    return StreamQ45K<false>::load_x(xq, xds, c);
  }
};

// Bits 0..3 of b as bit 4 of bytes 0..3.
__device__ __forceinline__ uint32_t fifth_bits(uint32_t b) {
  return ((b << 4) & 0x10u) | ((b << 11) & 0x1000u) | ((b << 18) & 0x100000u) | ((b << 25) & 0x10000000u);
}
// Sum over one 4/5-bit block of quant (0..15 or 0..31) x activation quant:
// quant byte j holds element j (low nibble) and j + 16 (high), bit j of qh
// element j's bit 4 (kFifthBit).
template <bool kFifthBit>
__device__ __forceinline__ int nibble_block_dot(uint32_t qh, const uint32_t (&qs)[4], const uint4 (&x)[2]) {
  const uint32_t xw[8] = {x[0].x, x[0].y, x[0].z, x[0].w, x[1].x, x[1].y, x[1].z, x[1].w};
  int acc = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // word i: elements 4i .. 4i + 3 and 16 + 4i ..
    uint32_t lo = qs[i] & 0x0F0F0F0Fu, hi = (qs[i] >> 4) & 0x0F0F0F0Fu;
    if constexpr (kFifthBit) {
      lo |= fifth_bits(qh >> (4 * i));
      hi |= fifth_bits(qh >> (16 + 4 * i));
    }
    acc = dot4_i8(int(lo), int(xw[i]), acc);
    acc = dot4_i8(int(hi), int(xw[4 + i]), acc);
  }
  return acc;
}

// Q4_0 (18-byte blocks, 36 bytes a chunk: 9 words) and Q5_0 (22, 44: 11),
// element d * (q - offset). Block 2c: its scale the low half of word 0, its
// fifth bits (Q5_0) and quants two bytes on (realigned by byte permutes);
// block 2c + 1 from the middle word's high half on, word-aligned.
template <bool kFifthBit>
struct StreamQ40Q50 : StreamBlockPair<std::conditional_t<kFifthBit, BlockQ5_0, BlockQ4_0>> {
  using Base = StreamBlockPair<std::conditional_t<kFifthBit, BlockQ5_0, BlockQ4_0>>;
  using typename Base::Chunk;
  using typename Base::XChunk;
  __device__ static float dot(const Chunk& q, const XChunk& x, int /*p*/) {
    uint32_t w[Base::kWords];
    Base::words(q, w);
    constexpr int H = kFifthBit ? 1 : 0;  // words of fifth bits
    constexpr int M = Base::kWords / 2;   // the word whose high half is block 2c + 1's scale
    constexpr float kOffset = kFifthBit ? 16.0f : 8.0f;
    const uint32_t qs0[4] = {__byte_perm(w[H], w[H + 1], 0x5432), __byte_perm(w[H + 1], w[H + 2], 0x5432),
                             __byte_perm(w[H + 2], w[H + 3], 0x5432), __byte_perm(w[H + 3], w[H + 4], 0x5432)};
    const uint32_t qs1[4] = {w[M + 1 + H], w[M + 2 + H], w[M + 3 + H], w[M + 4 + H]};
    const uint32_t qh0 = kFifthBit ? __byte_perm(w[0], w[1], 0x5432) : 0u, qh1 = kFifthBit ? w[M + 1] : 0u;
    const int a0 = nibble_block_dot<kFifthBit>(qh0, qs0, x.xl);
    const int a1 = nibble_block_dot<kFifthBit>(qh1, qs1, x.xh);
    // Element = d * (q - offset); activation = scale * quant.
    return h2f(uint16_t(w[0])) * (x.ds.x * float(a0) - kOffset * x.ds.y) +
           h2f(uint16_t(w[M] >> 16)) * (x.ds.z * float(a1) - kOffset * x.ds.w);
  }
};
template <> struct StreamFormat<DType::Q4_0> : StreamQ40Q50<false> {};
template <> struct StreamFormat<DType::Q5_0> : StreamQ40Q50<true> {};

// Q4_1 (20-byte blocks, 40 bytes a chunk) and Q5_1 (24, 48), element d * q +
// m: every field word-aligned, a block's words (d, m), [qh,] quants.
template <bool kFifthBit>
struct StreamQ41Q51 : StreamBlockPair<std::conditional_t<kFifthBit, BlockQ5_1, BlockQ4_1>> {
  using Base = StreamBlockPair<std::conditional_t<kFifthBit, BlockQ5_1, BlockQ4_1>>;
  using typename Base::Chunk;
  using typename Base::XChunk;
  __device__ static float dot(const Chunk& q, const XChunk& x, int /*p*/) {
    uint32_t w[Base::kWords];
    Base::words(q, w);
    constexpr int H = kFifthBit ? 1 : 0, B = Base::kWords / 2;  // words of fifth bits, of a block
    const uint32_t qs0[4] = {w[1 + H], w[2 + H], w[3 + H], w[4 + H]};
    const uint32_t qs1[4] = {w[B + 1 + H], w[B + 2 + H], w[B + 3 + H], w[B + 4 + H]};
    const int a0 = nibble_block_dot<kFifthBit>(kFifthBit ? w[1] : 0u, qs0, x.xl);
    const int a1 = nibble_block_dot<kFifthBit>(kFifthBit ? w[B + 1] : 0u, qs1, x.xh);
    const float2 dm0 = __half22float2(*reinterpret_cast<const __half2*>(&w[0]));
    const float2 dm1 = __half22float2(*reinterpret_cast<const __half2*>(&w[B]));
    // Element = d * q + m; activation = scale * quant.
    return dm0.x * x.ds.x * float(a0) + dm0.y * x.ds.y + dm1.x * x.ds.z * float(a1) + dm1.y * x.ds.w;
  }
};
template <> struct StreamFormat<DType::Q4_1> : StreamQ41Q51<false> {};
template <> struct StreamFormat<DType::Q5_1> : StreamQ41Q51<true> {};

// Q8_0 (34-byte blocks, 68 bytes a chunk: 17 words). Block 2c's scale is
// the low half of word 0 and its quants start two bytes on (realigned by a
// byte permute); block 2c + 1's scale is the high half of word 8, its
// quants words 9..16.
template <> struct StreamFormat<DType::Q8_0> : StreamBlockPair<BlockQ8_0> {
  __device__ static float dot(const Chunk& q, const XChunk& x, int /*p*/) {
    uint32_t w[kWords];
    words(q, w);
    const uint32_t xa[8] = {x.xl[0].x, x.xl[0].y, x.xl[0].z, x.xl[0].w, x.xl[1].x, x.xl[1].y, x.xl[1].z, x.xl[1].w};
    const uint32_t xb[8] = {x.xh[0].x, x.xh[0].y, x.xh[0].z, x.xh[0].w, x.xh[1].x, x.xh[1].y, x.xh[1].z, x.xh[1].w};
    int lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      lo = dot4_i8(int(__byte_perm(w[i], w[i + 1], 0x5432)), int(xa[i]), lo);
      hi = dot4_i8(int(w[9 + i]), int(xb[i]), hi);
    }
    // Element = d * q; activation = scale * quant.
    return h2f(uint16_t(w[0])) * x.ds.x * float(lo) + h2f(uint16_t(w[8] >> 16)) * x.ds.z * float(hi);
  }
};

// Q6_K (210-byte super-blocks, so only 2-byte aligned: words are loaded
// from the 4-aligned address below and realigned with a byte permute).
// Chunk c: super-block c / 4, half n = (c % 4) / 2, l = 16 (c % 2) .. + 15;
// its 64 elements 128n + 32k + l (k = 0..3) take 6-bit quants from ql[64n +
// l] (k = 0 low nibble, 2 high), ql[64n + 32 + l] (k = 1, 3) and bits 2k of
// qh[32n + l], with scale scales[8n + 2k + c % 2] (core/quant_unpack.cpp).
template <> struct StreamFormat<DType::Q6_K> {
  struct Chunk {
    uint32_t lo[5], hi[5], qh[5], sc[3];  // raw words of ql[64n + l], ql[64n + 32 + l], qh, scales[8n ..]
    uint32_t d;                           // f16 bits
    uint32_t sel;                         // realigning permute: 2-byte offset or none
  };
  struct XChunk {
    uint4 xq[4];    // 16 quants of each group k
    float d[4];     // their block's scale
    float bias[4];  // 32 * scale * sum of the 16 quants (the weights' -32)
  };
  // 16 bytes at p (2-aligned), as raw words from the 4-aligned address below
  // (a fifth word only when p is not 4-aligned).
  __device__ static void load16(const uint8_t* p, bool odd, uint32_t (&w)[5]) {
    const uint8_t* a = odd ? p - 2 : p;
#pragma unroll
    for (int j = 0; j < 4; ++j) w[j] = load_weights4(a + 4 * j);
    w[4] = odd ? load_weights4(a + 16) : 0u;
  }
  __device__ static Chunk load(const uint8_t* row, int c, bool /*l1: always*/) {
    const uint8_t* sb = row + size_t(c / 4) * sizeof(BlockQ6_K);
    const int n = (c % 4) / 2, l = 16 * (c % 2);
    const bool odd = (reinterpret_cast<uintptr_t>(sb) & 2) != 0;
    Chunk q;
    load16(sb + 64 * n + l, odd, q.lo);
    load16(sb + 64 * n + 32 + l, odd, q.hi);
    load16(sb + 128 + 32 * n + l, odd, q.qh);
    const uint8_t* s = sb + 192 + 8 * n - (odd ? 2 : 0);
    q.sc[0] = load_weights4(s);
    q.sc[1] = load_weights4(s + 4);
    q.sc[2] = odd ? load_weights4(s + 8) : 0u;
    q.d = load_weights2(sb + 208);
    q.sel = odd ? 0x5432u : 0x3210u;
    return q;
  }
  __device__ static XChunk load_x(const int8_t* xq, const float2* xds, int c) {
    const int sblock = c / 4, n = (c % 4) / 2, l = 16 * (c % 2);
    XChunk x;
    const float4* ds = reinterpret_cast<const float4*>(xds + size_t(sblock) * 8 + 4 * n);
    const float4 d01 = __ldg(ds), d23 = __ldg(ds + 1);
    x.d[0] = d01.x, x.d[1] = d01.z, x.d[2] = d23.x, x.d[3] = d23.z;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      x.xq[k] = __ldg(reinterpret_cast<const uint4*>(xq + size_t(sblock) * 256 + 128 * n + 32 * k + l));
      int sum = dot4_i8(int(x.xq[k].x), 0x01010101, 0);
      sum = dot4_i8(int(x.xq[k].y), 0x01010101, sum);
      sum = dot4_i8(int(x.xq[k].z), 0x01010101, sum);
      sum = dot4_i8(int(x.xq[k].w), 0x01010101, sum);
      x.bias[k] = 32.0f * x.d[k] * float(sum);
    }
    return x;
  }
  __device__ static float dot(const Chunk& q, const XChunk& x, int p) {
    uint32_t lo[4], hi[4], qh[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      lo[j] = __byte_perm(q.lo[j], q.lo[j + 1], q.sel);
      hi[j] = __byte_perm(q.hi[j], q.hi[j + 1], q.sel);
      qh[j] = __byte_perm(q.qh[j], q.qh[j + 1], q.sel);
    }
    const uint32_t s03 = __byte_perm(q.sc[0], q.sc[1], q.sel), s47 = __byte_perm(q.sc[1], q.sc[2], q.sel);
    const int i = p % 2;  // scales 2k + i of the half: bytes i, i + 2 of s03 and of s47
    const float sc[4] = {float(int8_t(s03 >> (8 * i))), float(int8_t(s03 >> (8 * i + 16))),
                         float(int8_t(s47 >> (8 * i))), float(int8_t(s47 >> (8 * i + 16)))};
    const uint32_t xw[4][4] = {{x.xq[0].x, x.xq[0].y, x.xq[0].z, x.xq[0].w},
                               {x.xq[1].x, x.xq[1].y, x.xq[1].z, x.xq[1].w},
                               {x.xq[2].x, x.xq[2].y, x.xq[2].z, x.xq[2].w},
                               {x.xq[3].x, x.xq[3].y, x.xq[3].z, x.xq[3].w}};
    int acc[4] = {0, 0, 0, 0};
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // word j: l + 4j .. l + 4j + 3
      const uint32_t q0 = (lo[j] & 0x0F0F0F0Fu) | ((qh[j] << 4) & 0x30303030u);
      const uint32_t q1 = (hi[j] & 0x0F0F0F0Fu) | ((qh[j] << 2) & 0x30303030u);
      const uint32_t q2 = ((lo[j] >> 4) & 0x0F0F0F0Fu) | (qh[j] & 0x30303030u);
      const uint32_t q3 = ((hi[j] >> 4) & 0x0F0F0F0Fu) | ((qh[j] >> 2) & 0x30303030u);
      acc[0] = dot4_i8(int(q0), int(xw[0][j]), acc[0]);
      acc[1] = dot4_i8(int(q1), int(xw[1][j]), acc[1]);
      acc[2] = dot4_i8(int(q2), int(xw[2][j]), acc[2]);
      acc[3] = dot4_i8(int(q3), int(xw[3][j]), acc[3]);
    }
    // Element = d * scale * (q - 32); activation = scale * quant.
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) sum += sc[k] * (x.d[k] * float(acc[k]) - x.bias[k]);
    return h2f(uint16_t(q.d)) * sum;
  }
};
// The streaming kernels' chunk loop over a lane's chunks first, first +
// stride, ... (below `chunks`): two per trip, their buffers alternating, so
// that the next chunk's loads are in flight while one is computed.
// load(c, buf) issues chunk c's loads into buf (not waiting for them);
// step(c, buf) computes chunk c from buf. cur already holds the first
// chunk's loads (the caller issues them, before its PDL wait).
template <typename Buf, typename Load, typename Step>
__device__ __forceinline__ void stream_chunks(int first, int chunks, int stride, Buf& cur, Buf& next,
                                              const Load& load, const Step& step) {
  for (int c = first; c < chunks; c += 2 * stride) {
    if (c + stride < chunks) load(c + stride, next);
    step(c, cur);
    if (c + stride >= chunks) break;
    if (c + 2 * stride < chunks) load(c + 2 * stride, cur);
    step(c + stride, next);
  }
}

// The same loop where cur and next already hold the first two chunks'
// loads (both issued before the PDL wait: a row of two chunks a lane is
// then wholly in flight before it; Tuning::kq_stream_early_two).
template <typename Buf, typename Load, typename Step>
__device__ __forceinline__ void stream_chunks_two_loaded(int first, int chunks, int stride, Buf& cur, Buf& next,
                                                         const Load& load, const Step& step) {
  for (int c = first; c < chunks; c += 2 * stride) {
    step(c, cur);
    if (c + stride >= chunks) break;
    if (c + 2 * stride < chunks) load(c + 2 * stride, cur);
    step(c + stride, next);
    if (c + 3 * stride < chunks) load(c + 3 * stride, next);
  }
}

// kSplit warps of a block sharing row sets (warp w: part w % kSplit of set
// w / kSplit) add their S sums (each already summed over the warp) through
// shared memory, in a fixed order, into the set's first warp; every thread
// of the block calls it (a barrier inside). False for the other warps:
// they are done.
template <int kSplit, int S>
__device__ __forceinline__ bool sum_split_parts(float (&acc)[S], int warp, int lane, int part) {
  if constexpr (kSplit > 1) {
    __shared__ float partial[kStreamWarps][S];
    if (lane == 0) {
#pragma unroll
      for (int s = 0; s < S; ++s) partial[warp][s] = acc[s];
    }
    __syncthreads();
    if (part != 0) return false;
#pragma unroll
    for (int s = 0; s < S; ++s) {
      acc[s] = partial[warp][s];
#pragma unroll
      for (int q = 1; q < kSplit; ++q) acc[s] += partial[warp + q][s];
    }
  }
  return true;
}

}  // namespace
}  // namespace rf::gpu
