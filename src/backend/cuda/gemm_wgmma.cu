// Hopper tensor-core GEMM for batched decode (9..64 activation rows a launch)
// straight from Q4_K, Q5_K, Q6_K and the 32-wide block formats (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0): wgmma_matmul_kernel, its launcher and
// shared-memory opt-in. The weights are wgmma's register operand: each
// warpgroup dequantizes its 64 weight rows into the A-fragment layout (k in
// natural order) while the tensor cores work on the previous 16-wide k step
// asynchronously. The activations are the shared-memory operand, staged
// K-major with the 128-byte swizzle: 64 columns, or 16 for launches (and
// MoE expert tiles) of up to 16 rows. Weights (packed) and activations stream
// through a ring of shared-memory stages by cp.async, so the latency of DRAM
// is covered by the ring instead of registers: gemm_mma.cu's mma.sync kernel
// held a chunk of weights in registers and waited on it every chunk. Long k
// ranges are split over blocks, the splits' f32 partials summed in a fixed
// order by a second launch (mma_sum_splits: deterministic results). sm_90a
// only; other targets keep gemm_mma.cu (wgmma_matmul_supported() is false
// there).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/gemm_args.cuh"
#include "backend/cuda/kernels.h"
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
template <DType T, int N> constexpr int kXStage = WgFormat<T>::kChunk / 64 * kAtomBytes<N>;  // activations a stage
// Ring depth: as many stages as fit 220 KB (Q4_K 3, Q5_K 2, Q6_K 2, Q4_0 / Q5_0 / Q5_1 5, Q4_1 6, Q8_0 3
// at N = 64).
template <DType T, int N>
constexpr int kStages = int((220 << 10) / (kXStage<T, N> + kRows * WgFormat<T>::kRowStride));
template <DType T, int N>
constexpr size_t smem_bytes() {
  return 1024 + size_t(kStages<T, N>) * (kXStage<T, N> + size_t(kRows) * WgFormat<T>::kRowStride);
}
static_assert(kStages<DType::Q4_K, 64> == 3 && kStages<DType::Q6_K, 64> == 2, "the measured ring depths");

// Shared-memory loads by shared-window address (ld.shared, whatever the
// compiler could prove about a generic pointer).
__device__ __forceinline__ uint32_t lds_u16(uint32_t a) {
  uint16_t v;
  asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(v) : "r"(a));
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

// ---- stage copies ---------------------------------------------------------------------

using WgArgs = QuantGemmArgs;  // dense and expert mode

// A thread's share of the stage copies, fixed for the whole k range: weight
// pieces tid + kThreads j of a stage (row-major, so a warp's copies are
// contiguous runs of rows) and the 16-byte pieces tid % kTpr + kTpr j of
// activation row tid / kTpr (N = 64: one in each 64-wide swizzle atom, at
// the same swizzled column; N = 16: one piece, threads past the stage's
// pieces idle). Source addresses are computed once.
template <DType T, int N>
struct StageCopier {
  using F = WgFormat<T>;
  static constexpr int kTpr = std::min(kThreads / N, F::kChunk / 8);  // threads an activation row
  static constexpr int kXPieces = F::kChunk / 8 / kTpr;                // 16-byte pieces a thread a stage
  static_assert(F::kChunk / 8 % kTpr == 0, "activation pieces share out evenly");
  static constexpr int kPieces = (kRows * F::kUnits + kThreads - 1) / kThreads;
  const uint8_t* w[kPieces];  // this thread's pieces' rows at super-block 0 (aligned formats: the pieces)
  uint32_t w_dst[kPieces];    // ... their offsets in a weight stage
  const uint8_t* x;           // its activation row at chunk 0
  int x_row, x_piece0;        // ... the row, the first piece
  bool x_valid;
  __device__ __forceinline__ StageCopier(const WgArgs& a, int row0) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int j = 0; j < kPieces; ++j) {
      const int i = tid + kThreads * j, r = min(i / F::kUnits, kRows - 1), u = i % F::kUnits;
      // Rows past m repeat row m - 1.
      w[j] = a.w + size_t(min(row0 + r, a.m - 1)) * a.row_bytes + (F::kAligned ? 16 * u : 0);
      w_dst[j] = uint32_t(r * F::kRowStride + 16 * u);
    }
    x_row = tid / kTpr;
    x_piece0 = tid % kTpr;
    x_valid = x_row < a.n;  // rows past n are zeros
    x = reinterpret_cast<const uint8_t*>(a.x + size_t(x_valid ? x_row : 0) * a.k);
  }
  __device__ __forceinline__ bool copies_activations() const { return N * kTpr == kThreads || x_row < N; }
  __device__ __forceinline__ void weights(int c, uint8_t* ws) const {
#pragma unroll
    for (int j = 0; j < kPieces; ++j) {
      if (kThreads * (j + 1) <= kRows * F::kUnits || int(threadIdx.x) + kThreads * j < kRows * F::kUnits) {
        const uint8_t* src = w[j] + size_t(c) * F::kStageBytes;
        if constexpr (!F::kAligned) {  // the piece's place in the window from the boundary below
          const uint32_t unit = w_dst[j] % F::kRowStride, lo = uint32_t(reinterpret_cast<uintptr_t>(src) & 15);
          // (A row's last unit can lie wholly past its stage bytes: then it is not copied.)
          if (16 * (F::kUnits - 1) >= F::kStageBytes && unit >= lo + F::kStageBytes) continue;
          src = src - lo + unit;
        }
        copy16_async(ws + w_dst[j], src);
      }
    }
  }
  __device__ __forceinline__ void activations(int c, uint8_t* xs) const {
    if (!copies_activations()) return;
    const uint8_t* src = x + size_t(c) * F::kChunk * 2;
#pragma unroll
    for (int j = 0; j < kXPieces; ++j) {
      const int u = x_piece0 + kTpr * j;  // piece u: swizzle atom u / 8, column u % 8
      const uint32_t dst = uint32_t((u / 8) * kAtomBytes<N> + x_row * 128 + (((u % 8) ^ (x_row & 7)) << 4));
      copy16_async_or_zero(xs + dst, src + 16 * u, x_valid);
    }
  }
};
// Where stage c of a thread's row starts in its stage row (0 for the
// aligned formats): the row's address modulo 16, moved on c stages.
template <DType T>
__device__ __forceinline__ uint32_t block_in_window(uint32_t row_addr_lo, int c) {
  if constexpr (WgFormat<T>::kAligned) return 0;
  return (row_addr_lo + uint32_t(c) * uint32_t(WgFormat<T>::kStageBytes)) & 15u;
}

// kExperts: expert mode (a.tiles set; compiled apart so that the dense
// kernel's registers stay as measured).
template <DType T, typename OutT, bool kExperts, int N>
__global__ void __launch_bounds__(kThreads, 1) wgmma_matmul_kernel(WgArgs a) {
  using F = WgFormat<T>;
  constexpr int S = kStages<T, N>;
  constexpr int kXS = kXStage<T, N>;
  constexpr int kWStage = kRows * F::kRowStride;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  uint8_t* xs = smem_raw + ((1024 - (raw_addr & 1023)) & 1023);  // swizzle atoms 1024-byte aligned
  uint8_t* ws = xs + S * kXS;
  const uint32_t xs_addr = static_cast<uint32_t>(__cvta_generic_to_shared(xs)), ws_addr = xs_addr + S * kXS;

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kRows;
  const int n_chunks = a.k / F::kChunk;
  if constexpr (kExperts) {  // the tiles are the previous kernel's output
    pdl_wait();
    if (int(blockIdx.y) >= *a.n_tiles) return;
    const int4 tile = a.tiles[blockIdx.y];
    a.w += size_t(tile.x) * a.expert_bytes;
    a.x += size_t(tile.y) * a.k;
    a.out = static_cast<OutT*>(a.out) + size_t(tile.y) * a.m;
    a.n = tile.z;
  }
  const bool split = !kExperts && gridDim.y > 1;
  const int c_begin = kExperts ? 0 : blockIdx.y * a.chunks_per_split;
  const int count = min(n_chunks, c_begin + a.chunks_per_split) - c_begin;

  // Weights are constant: the first stages' copies start before the wait on
  // the previous kernel (in expert mode, after it: the tile names the expert). Group s holds stage s's activations (group 0 also
  // the weights of stages 0 .. S - 2).
  const StageCopier<T, N> copier(a, row0);
#pragma unroll
  for (int s = 0; s < S - 1; ++s)
    if (s < count) copier.weights(c_begin + s, ws + s * kWStage);
  pdl_wait();
  pdl_trigger();
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < count) copier.activations(c_begin + s, xs + s * kXS);
    copy_commit();
  }

  float acc[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  const int r_local = warp * 16 + g;
  // Low address bits of this thread's two rows (where unaligned super-blocks sit in their windows).
  const auto row_lo = [&](int r) {
    return uint32_t(reinterpret_cast<uintptr_t>(a.w + size_t(min(row0 + r, a.m - 1)) * a.row_bytes)) & 15u;
  };
  const uint32_t row_lo0 = row_lo(r_local), row_lo8 = row_lo(r_local + 8);
  for (int i = 0; i < count; ++i) {
    const int slot = i % S;
    copy_wait<S - 2>();
    fence_proxy_async();
    __syncthreads();  // stage i landed everywhere; every warpgroup is done with stage i - 1's slot
    if (i + S - 1 < count) {
      const int refill = (i + S - 1) % S;
      copier.weights(c_begin + i + S - 1, ws + refill * kWStage);
      copier.activations(c_begin + i + S - 1, xs + refill * kXS);
    }
    copy_commit();
    const uint32_t wst = ws_addr + slot * kWStage;
    const uint32_t r0 = wst + r_local * F::kRowStride + block_in_window<T>(row_lo0, c_begin + i);
    const uint32_t r8 = wst + (r_local + 8) * F::kRowStride + block_in_window<T>(row_lo8, c_begin + i);
    const uint64_t desc0 = swizzled_desc(xs_addr + slot * kXS);
    fence_acc(acc);
    if constexpr (T == DType::Q4_K || T == DType::Q5_K)
      q45k_stage<T == DType::Q5_K, N>(r0, r8, t, desc0, acc);
    else if constexpr (T == DType::Q6_K)
      q6k_stage<N>(r0, r8, t, desc0, acc);
    else if constexpr (T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q5_0 || T == DType::Q5_1)
      nibble_stage<T, N>(r0, r8, t, desc0, acc);
    else
      q8_0_stage<N>(r0, r8, t, desc0, acc);
    wgmma_wait<0>();  // the slot is refilled after the next barrier
    fence_acc(acc);
  }

  // D fragment: acc[4 i + e] = out^T row g (e < 2) or g + 8, column 8 i + 2 t + (e & 1).
#pragma unroll
  for (int i = 0; i < N / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * i + 2 * t + (e & 1), row = row0 + r_local + (e < 2 ? 0 : 8);
      if (col >= a.n || row >= a.m) continue;
      const size_t o = size_t(col) * a.m + row;
      if (split)
        a.partials[size_t(blockIdx.y) * a.n * a.m + o] = acc[4 * i + e];
      else
        static_cast<OutT*>(a.out)[o] = from_float<OutT>(acc[4 * i + e]);
    }
  }
}

template <DType T, typename OutT>
void opt_in_smem() {
  const auto opt_in = [](auto* kernel, size_t bytes) {
    RF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  };
  opt_in(wgmma_matmul_kernel<T, OutT, false, 64>, smem_bytes<T, 64>());
  opt_in(wgmma_matmul_kernel<T, OutT, true, 64>, smem_bytes<T, 64>());
  opt_in(wgmma_matmul_kernel<T, OutT, false, 16>, smem_bytes<T, 16>());
  opt_in(wgmma_matmul_kernel<T, OutT, true, 16>, smem_bytes<T, 16>());
}

// The kernel for a launch of up to `cols` activation rows a tile.
template <DType T, bool kExperts>
void launch_wgmma(const WgArgs& a, dim3 grid, int cols, DType out_type, const LaunchCtx& ctx) {
  const bool f32 = out_type == DType::F32;
  if (cols <= 16 && ctx.options.wgmma_narrow)
    return f32 ? launch(wgmma_matmul_kernel<T, float, kExperts, 16>, grid, dim3(kThreads), smem_bytes<T, 16>(), ctx, a)
               : launch(wgmma_matmul_kernel<T, __half, kExperts, 16>, grid, dim3(kThreads), smem_bytes<T, 16>(), ctx,
                        a);
  f32 ? launch(wgmma_matmul_kernel<T, float, kExperts, 64>, grid, dim3(kThreads), smem_bytes<T, 64>(), ctx, a)
      : launch(wgmma_matmul_kernel<T, __half, kExperts, 64>, grid, dim3(kThreads), smem_bytes<T, 64>(), ctx, a);
}

// k a stage and a row's bytes of it, by weight format.
bool block32(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0;
}
int stage_k(DType t) { return block32(t) ? 4 * kQK : kQuantGemmChunk; }
int stage_row_bytes(DType t) {
  switch (t) {
    case DType::Q5_K: return WgFormat<DType::Q5_K>::kStageBytes;
    case DType::Q6_K: return WgFormat<DType::Q6_K>::kStageBytes;
    case DType::Q8_0: return WgFormat<DType::Q8_0>::kStageBytes;
    case DType::Q5_0: return WgFormat<DType::Q5_0>::kStageBytes;
    case DType::Q4_0: return WgFormat<DType::Q4_0>::kStageBytes;
    case DType::Q4_1: return WgFormat<DType::Q4_1>::kStageBytes;
    case DType::Q5_1: return WgFormat<DType::Q5_1>::kStageBytes;
    default: return WgFormat<DType::Q4_K>::kStageBytes;
  }
}

}  // namespace

bool wgmma_experts_supported(DType w_type, int k) { return wgmma_matmul_supported(w_type, k); }

void wgmma_matmul_experts(DType w_type, const void* w, size_t expert_bytes, size_t row_bytes, int m, int k,
                          const void* x, void* out, DType out_type, const int32_t* tiles, const int32_t* n_tiles,
                          int max_tiles, int tile_rows, const LaunchCtx& ctx) {
  RF_CHECK(wgmma_experts_supported(w_type, k), "wgmma matmul: unsupported expert weight type ", dtype_name(w_type),
           " or width ", k);
  RF_CHECK(tile_rows >= 1 && tile_rows <= kCols, "wgmma matmul: expert tiles of ", tile_rows, " rows");
  if (max_tiles <= 0) return;
  int splits = 1;
  WgArgs a = quant_gemm_args("wgmma matmul", w, row_bytes, m, k, x, kCols, kCols, out, out_type, splits, nullptr,
                             stage_k(w_type));
  a.tiles = reinterpret_cast<const int4*>(tiles);
  a.n_tiles = n_tiles;
  a.expert_bytes = expert_bytes;
  const dim3 grid(unsigned((m + kRows - 1) / kRows), unsigned(max_tiles));
  switch (w_type) {
    case DType::Q4_K: return launch_wgmma<DType::Q4_K, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q5_K: return launch_wgmma<DType::Q5_K, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q6_K: return launch_wgmma<DType::Q6_K, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q5_0: return launch_wgmma<DType::Q5_0, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q4_0: return launch_wgmma<DType::Q4_0, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q4_1: return launch_wgmma<DType::Q4_1, true>(a, grid, tile_rows, out_type, ctx);
    case DType::Q5_1: return launch_wgmma<DType::Q5_1, true>(a, grid, tile_rows, out_type, ctx);
    default: return launch_wgmma<DType::Q8_0, true>(a, grid, tile_rows, out_type, ctx);
  }
}

void wgmma_device_setup() {
  opt_in_smem<DType::Q4_K, float>();
  opt_in_smem<DType::Q4_K, __half>();
  opt_in_smem<DType::Q5_K, float>();
  opt_in_smem<DType::Q5_K, __half>();
  opt_in_smem<DType::Q6_K, float>();
  opt_in_smem<DType::Q6_K, __half>();
  opt_in_smem<DType::Q8_0, float>();
  opt_in_smem<DType::Q8_0, __half>();
  opt_in_smem<DType::Q5_0, float>();
  opt_in_smem<DType::Q5_0, __half>();
  opt_in_smem<DType::Q4_0, float>();
  opt_in_smem<DType::Q4_0, __half>();
  opt_in_smem<DType::Q4_1, float>();
  opt_in_smem<DType::Q4_1, __half>();
  opt_in_smem<DType::Q5_1, float>();
  opt_in_smem<DType::Q5_1, __half>();
}

bool wgmma_matmul_supported(DType w_type, int k) {
  return (w_type == DType::Q4_K || w_type == DType::Q5_K || w_type == DType::Q6_K || block32(w_type)) &&
         k % stage_k(w_type) == 0;
}

int wgmma_matmul_splits(DType w_type, int m, int k, int n, int n_sms, int split_cost) {
  // One block is resident an SM (its shared memory): a launch takes about
  // waves x (stages a block) stage-times, plus, when split, split_cost for
  // the partials' sum and the stage-times their bytes (written and read
  // back) would stream in. Each split keeps >= 2 stages; ties go to fewer
  // splits.
  const int row_blocks = (m + kRows - 1) / kRows, n_chunks = k / stage_k(w_type);
  const double block_bytes = double(stage_row_bytes(w_type));
  const double wave_stage_bytes = double(n_sms) * kRows * block_bytes;
  int best = 1;
  double best_cost = -1;
  for (int s = 1; s <= std::max(1, n_chunks / 2); ++s) {
    const int per = (n_chunks + s - 1) / s, splits = (n_chunks + per - 1) / per;
    const long waves = (long(row_blocks) * splits + n_sms - 1) / n_sms;
    const double partials = splits > 1 ? split_cost + double(splits) * n * m * 8 / wave_stage_bytes : 0.0;
    const double cost = double(waves * per) + partials;
    if (best_cost < 0 || cost < best_cost) best = splits, best_cost = cost;
  }
  return best;
}

void wgmma_matmul(DType w_type, const void* w, size_t row_bytes, int m, int k, const void* x, int n, void* out,
                  DType out_type, int splits, float* partials, const LaunchCtx& ctx) {
  RF_CHECK(wgmma_matmul_supported(w_type, k), "wgmma matmul: unsupported weight type ", dtype_name(w_type),
           " or width ", k);
  const WgArgs a =
      quant_gemm_args("wgmma matmul", w, row_bytes, m, k, x, n, kCols, out, out_type, splits, partials, stage_k(w_type));
  const dim3 grid(unsigned((a.m + kRows - 1) / kRows), unsigned(splits));
  switch (w_type) {
    case DType::Q4_K: launch_wgmma<DType::Q4_K, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q5_K: launch_wgmma<DType::Q5_K, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q6_K: launch_wgmma<DType::Q6_K, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q5_0: launch_wgmma<DType::Q5_0, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q4_0: launch_wgmma<DType::Q4_0, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q4_1: launch_wgmma<DType::Q4_1, false>(a, grid, a.n, out_type, ctx); break;
    case DType::Q5_1: launch_wgmma<DType::Q5_1, false>(a, grid, a.n, out_type, ctx); break;
    default: launch_wgmma<DType::Q8_0, false>(a, grid, a.n, out_type, ctx);
  }
  if (splits > 1) mma_sum_splits(a.partials, splits, int64_t(a.n) * a.m, a.out, out_type, ctx);
}

#else  // no wgmma: the mma.sync kernel (gemm_mma.cu) or dequantization + BLAS

void wgmma_device_setup() {}
bool wgmma_matmul_supported(DType, int) { return false; }
int wgmma_matmul_splits(DType, int, int, int, int, int) { return 1; }
void wgmma_matmul(DType, const void*, size_t, int, int, const void*, int, void*, DType, int, float*,
                  const LaunchCtx&) {
  fail("wgmma matmul: not available on this GPU");
}
bool wgmma_experts_supported(DType, int) { return false; }
void wgmma_matmul_experts(DType, const void*, size_t, size_t, int, int, const void*, void*, DType, const int32_t*,
                          const int32_t*, int, int, const LaunchCtx&) {
  fail("wgmma matmul: not available on this GPU");
}

#endif

}  // namespace rf::gpu
