// The Hopper GEMM's building blocks, for gemm_wgmma.cu only (its header
// comment says how the kernel works): the block shape, each weight format's
// layout in a shared-memory stage (WgFormat) and the ring depth it leaves,
// shared-memory loads by address, the wgmma instructions (fence, commit,
// wait, the shared-memory operand's descriptor, one 16-wide k step), and
// per format the builders of the A fragments a thread's two weight rows
// give for one stage. sm_90a only (empty for RF_PORTABLE).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/matmul/gemm_args.cuh"
#include "backend/cuda/ptx.cuh"
#include "core/quant_blocks.h"

namespace rf::gpu {

#if !defined(RF_PORTABLE)
namespace {

constexpr int kCols = 64;                  // activation rows a launch at most: wgmma's N
constexpr int kGroups = 4;                 // warpgroups a block, 64 weight rows each
constexpr int kRows = 64 * kGroups;        // weight rows a block
constexpr int kThreads = 128 * kGroups;
// A kernel of N activation columns (wgmma's N: 64, or 16 for launches of
// 16 rows at most: a quarter of the tensor work and of the activations'
// shared memory, which goes to more stages).
template <int N> constexpr int kAtomBytes = N * 128;  // a swizzle atom: 64 k (128 bytes) of all N rows

// Per format: k a stage (kChunk: a k-quant super-block, four Q8_0 blocks)
// and a row's bytes of it (kStageBytes), bytes a weight row takes in a
// stage (a stride free of bank conflicts for the fragment loads), 16-byte
// copies a row, and whether each row's stage bytes start on 16-byte
// boundaries.
template <DType T> struct WgFormat;
template <> struct WgFormat<DType::Q4_K> {
  static constexpr int kChunk = kQuantGemmChunk, kStageBytes = sizeof(BlockQ4_K);
  static constexpr int kRowStride = 144, kUnits = 9;
  static constexpr bool kAligned = true;  // 144-byte super-blocks
};
template <> struct WgFormat<DType::Q5_K> {
  static constexpr int kChunk = kQuantGemmChunk, kStageBytes = sizeof(BlockQ5_K);
  static constexpr int kRowStride = 176, kUnits = 11;
  static constexpr bool kAligned = true;  // 176-byte super-blocks
};
// Unaligned formats: a row's stage copy takes the 16-byte units from the
// boundary at or below its stage bytes (which start 0..14 bytes in) that
// hold any of them, so the copy past the matrix's last byte stays below the
// next 16-byte boundary, inside the allocation (CudaBackend::alloc: whole
// 256-byte units). Q6_K super-blocks are 210 bytes (14 units always).
template <> struct WgFormat<DType::Q6_K> {
  static constexpr int kChunk = kQuantGemmChunk, kStageBytes = sizeof(BlockQ6_K);
  static constexpr int kRowStride = 240, kUnits = 14;
  static constexpr bool kAligned = false;
};
// The 32-wide block formats: four blocks (128 k) a stage.
template <typename Block, int kStride, int kUnitCount, bool kWholeUnits>
struct WgBlock32Format {
  static constexpr int kChunk = 4 * kQK, kStageBytes = 4 * sizeof(Block);
  static constexpr int kRowStride = kStride, kUnits = kUnitCount;
  static constexpr bool kAligned = kWholeUnits;
};
// Q8_0: four 34-byte blocks (128 k) a stage, 9 or 10 units; k need only be
// a multiple of 128 (glm4-9b's 13,696-wide down rows, which k-quants cannot
// take). The stride keeps the 8 rows of a fragment load on distinct banks
// when alternate rows start 8 bytes apart in their windows.
template <> struct WgFormat<DType::Q8_0> : WgBlock32Format<BlockQ8_0, 176, 10, false> {};
// Q5_0 and Q4_0: four 22- or 18-byte blocks (128 k) a stage, 6 or 7 units,
// rows and stages at any even byte; a stride that keeps a fragment load's
// rows on distinct banks with alternate rows 8 bytes apart (glm4-9b's down
// rows as llama.cpp's Q4_K_M stores them).
template <> struct WgFormat<DType::Q5_0> : WgBlock32Format<BlockQ5_0, 112, 7, false> {};
template <> struct WgFormat<DType::Q4_0> : WgBlock32Format<BlockQ4_0, 112, 6, false> {};
// Q4_1 and Q5_1: 20- and 24-byte blocks, so 80 and 96 bytes a stage and
// rows of whole stages on 16-byte boundaries.
template <> struct WgFormat<DType::Q4_1> : WgBlock32Format<BlockQ4_1, 80, 5, true> {};
template <> struct WgFormat<DType::Q5_1> : WgBlock32Format<BlockQ5_1, 112, 6, true> {};
// MXFP4 (expert mode: gpt-oss): four 17-byte blocks (68 bytes) a stage,
// rows at any byte, 6 units; k need only be a multiple of 32 (gpt-oss's
// 2880: the last stage holds two blocks, kPartialStage).
template <> struct WgFormat<DType::MXFP4> : WgBlock32Format<BlockMXFP4, 112, 6, false> {};
// Formats whose k may end in a partial stage (whole 32-wide blocks).
template <DType T> constexpr bool kPartialStage = T == DType::MXFP4;
template <DType T, int N> constexpr int kXStage = WgFormat<T>::kChunk / 64 * kAtomBytes<N>;  // activations a stage
// Ring depth: as many stages as fit 220 KB (Q4_K 3, Q5_K 2, Q6_K 2, Q4_0 / Q5_0 / Q5_1 5, Q4_1 6, Q8_0 3
// at N = 64).
template <DType T, int N>
constexpr int kStages = int((220 << 10) / (kXStage<T, N> + kRows * WgFormat<T>::kRowStride));
template <DType T, int N>
constexpr size_t smem_bytes() {
  return 1024 + size_t(kStages<T, N>) * (kXStage<T, N> + size_t(kRows) * WgFormat<T>::kRowStride);
}
static_assert(kStages<DType::Q4_K, 64> == 3 && kStages<DType::Q6_K, 64> == 2, "the ring depths the kernel is tuned for");

// Shared-memory loads by shared-window address (ld.shared, whatever the
// compiler could prove about a generic pointer).
__device__ __forceinline__ uint32_t lds_u16(uint32_t a) {
  uint16_t v;
  asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ uint32_t lds_u8(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u8 %0, [%1];\n" : "=r"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ uint32_t lds_u32(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(a));
  return v;
}
// The f16 at a in both halves.
__device__ __forceinline__ __half2 lds_h2_splat(uint32_t a) {
  const uint32_t d = lds_u16(a);
  return bits_h2(d | (d << 16));
}
__device__ __forceinline__ uint4 lds_v4(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
// Bytes p[0], p[8], p[1], p[9] (in that order): a lane's k 2t, 2t + 8, 2t + 1,
// 2t + 9 of a 16-wide step whose quants start at p - 2t, so that bits 0-7
// and 16-23 hold the A register for k 2t, 2t + 1 and bits 8-15, 24-31 the
// one for k 2t + 8, 2t + 9.
__device__ __forceinline__ uint32_t lds_quad(uint32_t p) {
  return __byte_perm(lds_u16(p), lds_u16(p + 8), 0x5140);
}
// lds_quad's bytes at any address (byte loads).
__device__ __forceinline__ uint32_t lds_quad_u8(uint32_t p) {
  return lds_u8(p) | (lds_u8(p + 8) << 8) | (lds_u8(p + 1) << 16) | (lds_u8(p + 9) << 24);
}
// The fields x & mask at bits 0 and 16 (values v < 1024) -> half2(v_lo,
// v_hi) + 1024, exactly.
__device__ __forceinline__ __half2 magic_h2(uint32_t x, uint32_t mask) { return bits_h2((x & mask) | 0x64006400u); }
// An A fragment of two rows' quants in lds_quad's byte order (v0: row g,
// v8: row g + 8; the fields at bytes 0 and 2, then 1 and 3, below mask + 1):
// (quant + 1024 - bias) * scale, each product rounded once.
__device__ __forceinline__ void scaled_fragment(uint32_t (&f)[4], uint32_t v0, uint32_t v8, uint32_t mask,
                                                __half2 bias, __half2 s0, __half2 s8) {
  f[0] = h2_bits(__hmul2(__hsub2(magic_h2(v0, mask), bias), s0));
  f[1] = h2_bits(__hmul2(__hsub2(magic_h2(v8, mask), bias), s8));
  f[2] = h2_bits(__hmul2(__hsub2(magic_h2(v0 >> 8, mask), bias), s0));
  f[3] = h2_bits(__hmul2(__hsub2(magic_h2(v8 >> 8, mask), bias), s8));
}
// ... quant * d + m instead, rounded once (an FMA).
__device__ __forceinline__ void affine_fragment(uint32_t (&f)[4], uint32_t v0, uint32_t v8, uint32_t mask,
                                                __half2 d0, __half2 m0, __half2 d8, __half2 m8) {
  const __half2 k1024 = __float2half2_rn(1024.0f);
  f[0] = h2_bits(__hfma2(__hsub2(magic_h2(v0, mask), k1024), d0, m0));
  f[1] = h2_bits(__hfma2(__hsub2(magic_h2(v8, mask), k1024), d8, m8));
  f[2] = h2_bits(__hfma2(__hsub2(magic_h2(v0 >> 8, mask), k1024), d0, m0));
  f[3] = h2_bits(__hfma2(__hsub2(magic_h2(v8 >> 8, mask), k1024), d8, m8));
}

// ---- wgmma (PTX ISA: asynchronous warpgroup matrix multiply) -----------------------

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Shared-memory operand descriptor: K-major rows of 128 bytes, 128-byte
// swizzle, 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t swizzled_desc(uint32_t smem_addr) {
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}
// d (64 x 64, f32) += A (64 x 16, f16 registers: this warp's rows 16w .. 16w
// + 15 in mma.m16n8k16's A layout) . B (16 x 64 from shared memory).
__device__ __forceinline__ void wgmma_64x64x16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}
// The same for B 16 x 16 (launches of 16 activation rows at most).
__device__ __forceinline__ void wgmma_64x16x16(float (&d)[8], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, "
      "{%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}
// Keeps the compiler from moving accumulator accesses across wgmma calls.
template <int A>
__device__ __forceinline__ void fence_acc(float (&d)[A]) {
#pragma unroll
  for (int i = 0; i < A; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Makes this thread's generic-proxy shared-memory writes (cp.async) visible
// to the async proxy that wgmma reads through.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Issues k step q of the stage (its activation columns) with the A
// fragment a; the caller filled a after wgmma_wait<1>() (the step two back,
// which read the same registers, is done).
template <int N>
__device__ __forceinline__ void issue_step(float (&acc)[N / 2], const uint32_t (&a)[4], uint64_t desc0, int q) {
  const uint64_t desc = desc0 + uint64_t(((q / 4) * kAtomBytes<N> + (q % 4) * 32) >> 4);
  wgmma_fence();
  if constexpr (N == 64)
    wgmma_64x64x16(acc, a, desc);
  else
    wgmma_64x16x16(acc, a, desc);
  wgmma_commit();
}

// ---- per-format fragment builders: one stage of the two rows a thread holds ----
// A thread's rows are g and g + 8 of its warp's 16: A register 0 holds row
// g at k 2t, 2t + 1, register 1 row g + 8 there, registers 2 and 3 the same
// rows at k 2t + 8, 2t + 9 (mma.m16n8k16's A layout, wgmma's per warp).

// Q4_K: a row's 6-bit scales and mins of its 8 sub-blocks as bytes: sc[0]
// sub-blocks 0..3, sc[1] 4..7, mn[0], mn[1] the mins; dm = half2(d, -dmin).
struct Q4KScales {
  uint32_t sc[2], mn[2], dm;
  __device__ __forceinline__ explicit Q4KScales(const uint4& h) {
    sc[0] = h.y & 0x3f3f3f3fu;
    mn[0] = h.z & 0x3f3f3f3fu;
    sc[1] = (h.w & 0x0f0f0f0fu) | ((h.y >> 2) & 0x30303030u);
    mn[1] = ((h.w >> 4) & 0x0f0f0f0fu) | ((h.z >> 2) & 0x30303030u);
    dm = h.x ^ 0x80000000u;
  }
  // half2(d * sc_j, -dmin * m_j): each product of an f16 and a 6-bit integer
  // rounded once, as an f32 product converted to f16 would be.
  __device__ __forceinline__ __half2 sub_block(int j) const {
    const uint32_t b = uint32_t(j % 4);
    const uint32_t pair = __byte_perm(sc[j / 4], mn[j / 4], b | ((b + 4) << 8));  // sc_j in byte 0, m_j in byte 2
    return __hmul2(__hsub2(magic_h2(pair, 0x00ff00ffu), __float2half2_rn(1024.0f)), bits_h2(dm));
  }
};

// Q4_K: sub-block j (32 k) of a row is d * sc_j * q - dmin * m_j; k step 2j + s
// holds its elements 16 s .. 16 s + 15, whose quants are the low (j even) or
// high (j odd) nibbles of qs[32 (j / 2) + 16 s + i]. Q5_K (kFifthBit): the
// same header and nibbles (qs after the fifth bits), element i of the pair's
// 32 taking bit j of qh[i] as its bit 4.
template <bool kFifthBit, int N>
__device__ __forceinline__ void q45k_stage(uint32_t r0, uint32_t r8, int t, uint64_t desc0, float (&acc)[N / 2]) {
  constexpr int kQs = kFifthBit ? int(offsetof(BlockQ5_K, qs)) : int(offsetof(BlockQ4_K, qs));
  constexpr uint32_t kMask = kFifthBit ? 0x001f001fu : 0x000f000fu;
  uint32_t a[2][4];  // two A fragments in flight: buffer = issue order % 2
  const Q4KScales s0(lds_v4(r0)), s8(lds_v4(r8));
  const __half2 k1024 = __float2half2_rn(1024.0f);
  uint32_t h0[2] = {0, 0}, h8[2] = {0, 0};  // fifth bits of the same elements of every pair
  if constexpr (kFifthBit) {
    constexpr int kQh = int(offsetof(BlockQ5_K, qh));
    h0[0] = lds_quad(r0 + kQh + 2 * t), h0[1] = lds_quad(r0 + kQh + 16 + 2 * t);
    h8[0] = lds_quad(r8 + kQh + 2 * t), h8[1] = lds_quad(r8 + kQh + 16 + 2 * t);
  }
  // Bytes 0 and 2 of x >> sh (their low nibbles) with bit j of h's bytes 0 and 2 as bit 4.
  const auto quants = [](uint32_t x, int sh, uint32_t h, int j) {
    if constexpr (!kFifthBit) return x >> sh;
    return ((x >> sh) & 0x000f000fu) | (((h >> j) << 4) & 0x00100010u);
  };
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const int o = kQs + 32 * p + 2 * t;
    const uint32_t x0[2] = {lds_quad(r0 + o), lds_quad(r0 + o + 16)};
    const uint32_t x8[2] = {lds_quad(r8 + o), lds_quad(r8 + o + 16)};
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int j = 2 * p + hi;
      const __half2 dm0 = s0.sub_block(j), dm8 = s8.sub_block(j);
      const __half2 d0 = __low2half2(dm0), m0 = __high2half2(dm0), d8 = __low2half2(dm8), m8 = __high2half2(dm8);
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const int sh = 4 * hi;
        uint32_t(&f)[4] = a[s];  // issue order 2 j + s
        wgmma_wait<1>();
        f[0] = h2_bits(__hfma2(__hsub2(magic_h2(quants(x0[s], sh, h0[s], j), kMask), k1024), d0, m0));
        f[1] = h2_bits(__hfma2(__hsub2(magic_h2(quants(x8[s], sh, h8[s], j), kMask), k1024), d8, m8));
        f[2] = h2_bits(__hfma2(__hsub2(magic_h2(quants(x0[s], sh + 8, h0[s], j + 8), kMask), k1024), d0, m0));
        f[3] = h2_bits(__hfma2(__hsub2(magic_h2(quants(x8[s], sh + 8, h8[s], j + 8), kMask), k1024), d8, m8));
        issue_step<N>(acc, f, desc0, 2 * j + s);
      }
    }
  }
}

// Q6_K: element 128 n + 32 kk + l (l < 32) of a super-block is
// ((ql[64 n + 32 (kk & 1) + l] >> 4 (kk >= 2)) & 15) | (((qh[32 n + l] >> 2 kk)
// & 3) << 4), minus 32, times d * scales[8 n + 2 kk + l / 16]; k step q =
// 8 n + 2 kk + par holds l = 16 par .. 16 par + 15, so its scale is scales[q].
struct Q6KRow {
  uint32_t b;  // shared-window address of the super-block
  __half2 d2;
  __device__ __forceinline__ explicit Q6KRow(uint32_t row) : b(row) {
    d2 = lds_h2_splat(row + uint32_t(offsetof(BlockQ6_K, d)));
  }
  // half2(d * scales[q], d * scales[q + 1]) for even q: each product of an
  // f16 and an 8-bit integer rounded once.
  __device__ __forceinline__ __half2 scales(int q) const {
    const uint32_t u = lds_u16(b + offsetof(BlockQ6_K, scales) + q) ^ 0x8080u;  // + 128 each
    return __hmul2(__hsub2(magic_h2(__byte_perm(u, u, 0x7170), 0x00ff00ffu), __float2half2_rn(1152.0f)), d2);
  }
};

template <int N>
__device__ __forceinline__ void q6k_stage(uint32_t r0, uint32_t r8, int t, uint64_t desc0,
                                          float (&acc)[N / 2]) {
  constexpr int kQh = int(offsetof(BlockQ6_K, qh));
  uint32_t a[2][4];  // two A fragments in flight: buffer = issue order % 2
  const Q6KRow w0(r0), w8(r8);
  const __half2 k1056 = __float2half2_rn(1056.0f);  // 1024 + 32: quants are q - 32
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    __half2 sc0[4], sc8[4];  // scales of steps 8 n + 2 kk + {0, 1}
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      sc0[kk] = w0.scales(8 * n + 2 * kk);
      sc8[kk] = w8.scales(8 * n + 2 * kk);
    }
#pragma unroll
    for (int par = 0; par < 2; ++par) {
      const int l0 = 16 * par + 2 * t;
      const uint32_t h0 = lds_quad(r0 + kQh + 32 * n + l0), h8 = lds_quad(r8 + kQh + 32 * n + l0);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const int q = 8 * n + 2 * kk + par, ql = 64 * n + 32 * (kk & 1) + l0;
        const __half2 s0 = par ? __high2half2(sc0[kk]) : __low2half2(sc0[kk]);
        const __half2 s8 = par ? __high2half2(sc8[kk]) : __low2half2(sc8[kk]);
        const uint32_t l0v = lds_quad(r0 + ql) >> (4 * (kk / 2)), l8v = lds_quad(r8 + ql) >> (4 * (kk / 2));
        const uint32_t v0 = (l0v & 0x0f0f0f0fu) | (((h0 >> (2 * kk)) & 0x03030303u) << 4);
        const uint32_t v8 = (l8v & 0x0f0f0f0fu) | (((h8 >> (2 * kk)) & 0x03030303u) << 4);
        uint32_t(&f)[4] = a[kk % 2];  // issue order 8 n + 4 par + kk
        wgmma_wait<1>();
        scaled_fragment(f, v0, v8, 0x00ff00ffu, k1056, s0, s8);
        issue_step<N>(acc, f, desc0, q);
      }
    }
  }
}

// Q8_0: block b of the stage is d * q over its 32 int8 quants; k step 2b + s
// holds quants 16 s .. 16 s + 15 (after the block's 2-byte scale).
template <int N>
__device__ __forceinline__ void q8_0_stage(uint32_t r0, uint32_t r8, int t, uint64_t desc0, float (&acc)[N / 2]) {
  uint32_t a[2][4];  // two A fragments in flight: buffer = issue order % 2
  const __half2 k1152 = __float2half2_rn(1152.0f);  // 1024 + 128: the quants' sign bits flipped
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    const int blk = b * int(sizeof(BlockQ8_0));
    const __half2 d0 = lds_h2_splat(r0 + blk), d8 = lds_h2_splat(r8 + blk);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int o = blk + int(offsetof(BlockQ8_0, qs)) + 16 * s + 2 * t;
      const uint32_t v0 = lds_quad(r0 + o) ^ 0x80808080u, v8 = lds_quad(r8 + o) ^ 0x80808080u;
      uint32_t(&f)[4] = a[s];  // issue order 2 b + s
      wgmma_wait<1>();
      scaled_fragment(f, v0, v8, 0x00ff00ffu, k1152, d0, d8);
      issue_step<N>(acc, f, desc0, 2 * b + s);
    }
  }
}

// The 4/5-bit 32-wide block formats: element d * (q - offset) (Q4_0, Q5_0)
// or d * q + m (Q4_1, Q5_1); q's low 4 bits in the nibbles of qs (element
// i < 16 low, i + 16 high) and bit 4 (Q5_0, Q5_1) in bit i of qh.
template <DType T> struct NibbleBlock;
template <> struct NibbleBlock<DType::Q4_0> {
  using Block = BlockQ4_0;
  static constexpr bool kFifthBit = false, kMin = false;
  static constexpr float kOffset = 8.0f;
};
template <> struct NibbleBlock<DType::Q5_0> {
  using Block = BlockQ5_0;
  static constexpr bool kFifthBit = true, kMin = false;
  static constexpr float kOffset = 16.0f;
};
template <> struct NibbleBlock<DType::Q4_1> {
  using Block = BlockQ4_1;
  static constexpr bool kFifthBit = false, kMin = true;
  static constexpr float kOffset = 0.0f;
};
template <> struct NibbleBlock<DType::Q5_1> {
  using Block = BlockQ5_1;
  static constexpr bool kFifthBit = true, kMin = true;
  static constexpr float kOffset = 0.0f;
};
// qh >> (2t + 16 s) in lds_quad's byte order: bit 4 of bytes 0..3 = bits 0, 8, 1, 9.
__device__ __forceinline__ uint32_t fifth_bits_quad(uint32_t h) {
  return ((h << 4) & 0x10u) | ((h << 4) & 0x1000u) | ((h << 19) & 0x100000u) | ((h << 19) & 0x10000000u);
}

// Block b of the stage; k step 2b + s holds elements 16 s .. 16 s + 15.
template <DType T, int N>
__device__ __forceinline__ void nibble_stage(uint32_t r0, uint32_t r8, int t, uint64_t desc0, float (&acc)[N / 2]) {
  using F = NibbleBlock<T>;
  using Block = typename F::Block;
  constexpr uint32_t kMask = F::kFifthBit ? 0x001f001fu : 0x000f000fu;
  constexpr int kQs = int(offsetof(Block, qs));
  uint32_t a[2][4];  // two A fragments in flight: buffer = issue order % 2
  const __half2 bias = __float2half2_rn(1024.0f + F::kOffset);
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    const int blk = b * int(sizeof(Block));
    __half2 d0, d8, m0 = __float2half2_rn(0.0f), m8 = m0;
    if constexpr (F::kMin) {  // (d, m): 4-aligned (whole 20- or 24-byte blocks from a 16-byte boundary)
      const __half2 dm0 = bits_h2(lds_u32(r0 + blk)), dm8 = bits_h2(lds_u32(r8 + blk));
      d0 = __low2half2(dm0), m0 = __high2half2(dm0), d8 = __low2half2(dm8), m8 = __high2half2(dm8);
    } else {
      d0 = lds_h2_splat(r0 + blk), d8 = lds_h2_splat(r8 + blk);
    }
    uint32_t h0 = 0, h8 = 0;
    if constexpr (F::kFifthBit) {  // (a 2-aligned word in Q5_0)
      constexpr int kQh = int(offsetof(Block, qh));
      h0 = (lds_u16(r0 + blk + kQh) | (lds_u16(r0 + blk + kQh + 2) << 16)) >> (2 * t);
      h8 = (lds_u16(r8 + blk + kQh) | (lds_u16(r8 + blk + kQh + 2) << 16)) >> (2 * t);
    }
    const uint32_t x0 = lds_quad(r0 + blk + kQs + 2 * t), x8 = lds_quad(r8 + blk + kQs + 2 * t);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      uint32_t v0 = (x0 >> (4 * s)) & 0x0f0f0f0fu, v8 = (x8 >> (4 * s)) & 0x0f0f0f0fu;
      if constexpr (F::kFifthBit) {
        v0 |= fifth_bits_quad(h0 >> (16 * s));
        v8 |= fifth_bits_quad(h8 >> (16 * s));
      }
      uint32_t(&f)[4] = a[s];  // issue order 2 b + s
      wgmma_wait<1>();
      if constexpr (F::kMin)
        affine_fragment(f, v0, v8, kMask, d0, m0, d8, m8);
      else
        scaled_fragment(f, v0, v8, kMask, bias, d0, d8);
      issue_step<N>(acc, f, desc0, 2 * b + s);
    }
  }
}

// MXFP4: element 2^(e - 128) * level(q), q's nibbles laid out as Q4_0's;
// the level table (E2M1 doubled: 0, 1, 2, 3, 4, 6, 8, 12, bit 3 the sign)
// by a byte permute of the codes, exact small integers in f16, times the
// block scale (exact where the product is an f16). Blocks from `blocks` on
// (a partial last stage) are not read and their k steps not issued.
__device__ __forceinline__ void mxfp4_pairs(uint32_t v, __half2 d, uint32_t& lo, uint32_t& hi) {
  const uint32_t y = v | (v >> 4);
  const uint32_t sel = ((y & 0xFFu) | ((y >> 8) & 0xFF00u)) & 0x7777u;  // the codes' magnitudes, a nibble each
  const uint32_t mag = __byte_perm(0x03020100u, 0x0C080604u, sel);
  const uint32_t s = v & 0x08080808u;
  const __half2 k1024 = __float2half2_rn(1024.0f);
  lo = h2_bits(__hmul2(bits_h2(h2_bits(__hsub2(magic_h2(mag, 0x00ff00ffu), k1024)) ^ ((s & 0x00080008u) << 12)), d));
  hi = h2_bits(
      __hmul2(bits_h2(h2_bits(__hsub2(magic_h2(mag >> 8, 0x00ff00ffu), k1024)) ^ ((s & 0x08000800u) << 4)), d));
}
template <int N>
__device__ __forceinline__ void mxfp4_stage(uint32_t r0, uint32_t r8, int t, uint64_t desc0, float (&acc)[N / 2],
                                            int blocks) {
  constexpr int kQs = int(offsetof(BlockMXFP4, qs));
  uint32_t a[2][4];  // two A fragments in flight: buffer = issue order % 2
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    if (b >= blocks) break;
    const int blk = b * int(sizeof(BlockMXFP4));
    const __half2 d0 = __float2half2_rn(__uint_as_float(e8m0_half_bits(uint8_t(lds_u8(r0 + blk)))));
    const __half2 d8 = __float2half2_rn(__uint_as_float(e8m0_half_bits(uint8_t(lds_u8(r8 + blk)))));
    const uint32_t x0 = lds_quad_u8(r0 + blk + kQs + 2 * t), x8 = lds_quad_u8(r8 + blk + kQs + 2 * t);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const uint32_t v0 = (x0 >> (4 * s)) & 0x0f0f0f0fu, v8 = (x8 >> (4 * s)) & 0x0f0f0f0fu;
      uint32_t(&f)[4] = a[s];  // issue order 2 b + s
      wgmma_wait<1>();
      mxfp4_pairs(v0, d0, f[0], f[2]);
      mxfp4_pairs(v8, d8, f[1], f[3]);
      issue_step<N>(acc, f, desc0, 2 * b + s);
    }
  }
}

}  // namespace
#endif

}  // namespace rf::gpu
