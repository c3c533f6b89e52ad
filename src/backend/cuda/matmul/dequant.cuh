// Device-side decoding of GGUF weight formats, 32 elements at a time: one
// decoder per format (WeightFormat<T>::load32), element loads of the plain
// formats (load1), and the sub-block readers of the hot k-quants
// (q4k_sub_block, q6k_sub_block), which the decoders here and the GEMV dot
// products (gemv_dot.cuh) share. FP8 weights (F8_E4M3_ROW) decode through
// e4m3.cuh. Used by dequant.cu, gemv.cu and the
// embedding lookup; gemm_mma.cu reads Q4_K/Q6_K in its own register layout.
// A row of k elements has k/32 "sub-blocks": for the 32-element formats a
// sub-block is one block; a 256-element k-quant super-block holds 8. Values
// follow core/quant_blocks.h: element = scale[group] * q + bias[group].
#pragma once

#include "backend/cuda/gpu.h"
#include "backend/cuda/matmul/e4m3.cuh"
#include "core/dtype.h"
#include "core/quant_blocks.h"

namespace rf::gpu {

__device__ __forceinline__ float h2f(uint16_t h) {
  return __half2float(*reinterpret_cast<const __half*>(&h));
}
// Exact float of a small unsigned integer without an int->float instruction.
__device__ __forceinline__ float small_uint_to_float(uint32_t q) {
  return __uint_as_float(0x4B000000u | q) - 8388608.0f;
}
__device__ __forceinline__ uint16_t ld16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }

// Plain formats with k % 32 != 0 (tiny models): element-wise loads.
template <DType T> __device__ __forceinline__ float load1(const uint8_t* row, int i);
template <> __device__ __forceinline__ float load1<DType::F32>(const uint8_t* row, int i) {
  return reinterpret_cast<const float*>(row)[i];
}
template <> __device__ __forceinline__ float load1<DType::F16>(const uint8_t* row, int i) {
  return h2f(ld16(row + 2 * i));
}
template <> __device__ __forceinline__ float load1<DType::BF16>(const uint8_t* row, int i) {
  return __uint_as_float(uint32_t(ld16(row + 2 * i)) << 16);
}
template <DType T> constexpr bool kPlain = T == DType::F32 || T == DType::F16 || T == DType::BF16;

template <DType T> struct WeightFormat;

// Plain formats: a "sub-block" is 32 consecutive elements.
template <> struct WeightFormat<DType::F32> {
  static constexpr int kBlockElems = 32, kBlockBytes = 128;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const float4* p = reinterpret_cast<const float4*>(row + size_t(sub) * 128);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 f = p[i];
      v[4 * i] = f.x; v[4 * i + 1] = f.y; v[4 * i + 2] = f.z; v[4 * i + 3] = f.w;
    }
  }
};
template <> struct WeightFormat<DType::F16> {
  static constexpr int kBlockElems = 32, kBlockBytes = 64;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint4* p = reinterpret_cast<const uint4*>(row + size_t(sub) * 64);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 u = p[i];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[8 * i + 2 * j] = h2f(uint16_t(w[j] & 0xffff));
        v[8 * i + 2 * j + 1] = h2f(uint16_t(w[j] >> 16));
      }
    }
  }
};
template <> struct WeightFormat<DType::BF16> {
  static constexpr int kBlockElems = 32, kBlockBytes = 64;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint4* p = reinterpret_cast<const uint4*>(row + size_t(sub) * 64);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 u = p[i];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[8 * i + 2 * j] = __uint_as_float(w[j] << 16);
        v[8 * i + 2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
      }
    }
  }
};

template <> struct WeightFormat<DType::Q4_0> {
  static constexpr int kBlockElems = 32, kBlockBytes = 18;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub) * 18;
    const float d = h2f(ld16(b));
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = b[2 + j];
      v[j] = d * float((q & 15) - 8);
      v[j + 16] = d * float((q >> 4) - 8);
    }
  }
};
template <> struct WeightFormat<DType::Q4_1> {
  static constexpr int kBlockElems = 32, kBlockBytes = 20;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub) * 20;
    const float d = h2f(ld16(b)), m = h2f(ld16(b + 2));
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = b[4 + j];
      v[j] = d * float(q & 15) + m;
      v[j + 16] = d * float(q >> 4) + m;
    }
  }
};
template <> struct WeightFormat<DType::Q5_0> {
  static constexpr int kBlockElems = 32, kBlockBytes = 22;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub) * 22;
    const float d = h2f(ld16(b));
    const uint32_t qh = uint32_t(b[2]) | (uint32_t(b[3]) << 8) | (uint32_t(b[4]) << 16) | (uint32_t(b[5]) << 24);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = b[6 + j];
      v[j] = d * float(int((q & 15) | (((qh >> j) & 1u) << 4)) - 16);  // int before subtracting: qh is unsigned
      v[j + 16] = d * float(int((q >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16);
    }
  }
};
template <> struct WeightFormat<DType::Q5_1> {
  static constexpr int kBlockElems = 32, kBlockBytes = 24;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub) * 24;
    const float d = h2f(ld16(b)), m = h2f(ld16(b + 2));
    const uint32_t qh = uint32_t(b[4]) | (uint32_t(b[5]) << 8) | (uint32_t(b[6]) << 16) | (uint32_t(b[7]) << 24);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = b[8 + j];
      v[j] = d * float((q & 15) | (((qh >> j) & 1) << 4)) + m;
      v[j + 16] = d * float((q >> 4) | (((qh >> (j + 16)) & 1) << 4)) + m;
    }
  }
};
template <> struct WeightFormat<DType::Q8_0> {
  static constexpr int kBlockElems = 32, kBlockBytes = 34;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint16_t* b = reinterpret_cast<const uint16_t*>(row + size_t(sub) * 34);  // 2-byte aligned
    const float d = h2f(b[0]);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint16_t w = b[1 + j];
      v[2 * j] = d * float(int8_t(w & 0xff));
      v[2 * j + 1] = d * float(int8_t(w >> 8));
    }
  }
};

// k-quants: sub-block j of super-block s.
template <> struct WeightFormat<DType::Q2_K> {
  static constexpr int kBlockElems = 256, kBlockBytes = 84;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub / 8) * 84;
    const int j = sub % 8;
    const float d = h2f(ld16(b + 80)), dmin = h2f(ld16(b + 82));
    const uint8_t* qs = b + 16 + 32 * (j / 4);
    const int shift = 2 * (j % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int sc = b[2 * j + h];
      const float dl = d * float(sc & 15), ml = dmin * float(sc >> 4);
#pragma unroll
      for (int l = 0; l < 16; ++l) v[16 * h + l] = dl * float((qs[16 * h + l] >> shift) & 3) - ml;
    }
  }
};
template <> struct WeightFormat<DType::Q3_K> {
  static constexpr int kBlockElems = 256, kBlockBytes = 110;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub / 8) * 110;
    const int j = sub % 8;
    const uint8_t* hmask = b;
    const uint8_t* qs = b + 32 + 32 * (j / 4);
    const uint8_t* s = b + 96;
    const float d = h2f(ld16(b + 108));
    const int shift = 2 * (j % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int g = 2 * j + h;
      const int lo = g < 8 ? (s[g] & 15) : (s[g - 8] >> 4);
      const int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
      const float dl = d * float((lo | (hi << 4)) - 32);
#pragma unroll
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * h + l;
        const int q = ((qs[e] >> shift) & 3) - ((hmask[e] >> j) & 1 ? 0 : 4);
        v[e] = dl * float(q);
      }
    }
  }
};
__device__ __forceinline__ void k4_scale_min_dev(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
// Q4_K (144 bytes) and Q5_K (176 bytes) blocks are 16-byte aligned in a row.
__device__ __forceinline__ void k4_scales(const uint8_t* b, int j, float* d1, float* m1) {
  const uint32_t dm = *reinterpret_cast<const uint32_t*>(b);
  uint32_t s32[3];
  s32[0] = *reinterpret_cast<const uint32_t*>(b + 4);
  s32[1] = *reinterpret_cast<const uint32_t*>(b + 8);
  s32[2] = *reinterpret_cast<const uint32_t*>(b + 12);
  const uint8_t* s = reinterpret_cast<const uint8_t*>(s32);
  int sc, m;
  k4_scale_min_dev(s, j, &sc, &m);
  *d1 = h2f(uint16_t(dm & 0xffff)) * float(sc);
  *m1 = h2f(uint16_t(dm >> 16)) * float(m);
}
// Q4_K sub-block `sub` of a row: its scale d1 and min m1 (element =
// d1 * q - m1), the 32 bytes holding its quants and the nibble shift.
struct Q4KSub {
  float d1, m1;
  uint32_t w[8];
  int shift;
};
__device__ __forceinline__ Q4KSub q4k_sub_block(const uint8_t* row, int sub) {
  const uint8_t* b = row + size_t(sub / 8) * sizeof(BlockQ4_K);
  const int j = sub % 8;
  Q4KSub s;
  k4_scales(b, j, &s.d1, &s.m1);
  const uint4* qp = reinterpret_cast<const uint4*>(reinterpret_cast<const BlockQ4_K*>(b)->qs + 32 * (j / 2));
  const uint4 q0 = qp[0], q1 = qp[1];
  s.w[0] = q0.x; s.w[1] = q0.y; s.w[2] = q0.z; s.w[3] = q0.w;
  s.w[4] = q1.x; s.w[5] = q1.y; s.w[6] = q1.z; s.w[7] = q1.w;
  s.shift = (j & 1) * 4;
  return s;
}
template <> struct WeightFormat<DType::Q4_K> {
  static constexpr int kBlockElems = 256, kBlockBytes = 144;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const Q4KSub q = q4k_sub_block(row, sub);
    const float d1 = q.d1, m1 = q.m1;
    const uint32_t(&w)[8] = q.w;
    const int shift = q.shift;
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) v[4 * i + c] = d1 * small_uint_to_float((w[i] >> (8 * c + shift)) & 15u) - m1;
  }
};
template <> struct WeightFormat<DType::Q5_K> {
  static constexpr int kBlockElems = 256, kBlockBytes = 176;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const uint8_t* b = row + size_t(sub / 8) * 176;
    const int j = sub % 8;
    float d1, m1;
    k4_scales(b, j, &d1, &m1);
    const uint4* hp = reinterpret_cast<const uint4*>(b + 16);
    const uint4* qp = reinterpret_cast<const uint4*>(b + 48 + 32 * (j / 2));
    const uint4 h0 = hp[0], h1 = hp[1], q0 = qp[0], q1 = qp[1];
    const uint32_t hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
    const uint32_t w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    const int shift = (j & 1) * 4;
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const uint32_t q = ((w[i] >> (8 * c + shift)) & 15u) | (((hw[i] >> (8 * c + j)) & 1u) << 4);
        v[4 * i + c] = d1 * small_uint_to_float(q) - m1;
      }
  }
};
// Q6_K sub-block `sub` of a row (a BlockQ6_K holds 8): for its group g
// (0, 1) of 16 elements and pair p (0..7), the two bytes of ql[8 * g + p]
// shifted right by lshift give the low 4 bits of two quants, those of
// qh[8 * g + p] shifted by hshift the high 2 bits; element = d * scale[g] *
// (q - 32). Q6_K blocks (210 bytes) are only 2-byte aligned: 16-bit loads.
struct Q6KSub {
  const uint16_t* ql;
  const uint16_t* qh;
  const int8_t* scale;  // the two groups' scales
  float d;
  int lshift, hshift;
};
__device__ __forceinline__ Q6KSub q6k_sub_block(const uint8_t* row, int sub) {
  const auto* b = reinterpret_cast<const BlockQ6_K*>(row + size_t(sub / 8) * sizeof(BlockQ6_K));
  const int j = sub % 8, n = j / 4, k = j % 4;
  Q6KSub s;
  s.ql = reinterpret_cast<const uint16_t*>(b->ql + 64 * n + 32 * (k & 1));
  s.qh = reinterpret_cast<const uint16_t*>(b->qh + 32 * n);
  s.scale = b->scales + 2 * j;
  s.d = h2f(ld16(reinterpret_cast<const uint8_t*>(&b->d)));
  s.lshift = k < 2 ? 0 : 4;
  s.hshift = 2 * k;
  return s;
}
template <> struct WeightFormat<DType::Q6_K> {
  static constexpr int kBlockElems = 256, kBlockBytes = 210;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const Q6KSub q = q6k_sub_block(row, sub);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float dl = q.d * float(q.scale[h]);
#pragma unroll
      for (int p = 0; p < 8; ++p) {
        const uint32_t lw = q.ql[8 * h + p], hw = q.qh[8 * h + p];
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const uint32_t qv = ((lw >> (8 * c + q.lshift)) & 15u) | (((hw >> (8 * c + q.hshift)) & 3u) << 4);
          v[16 * h + 2 * p + c] = dl * (small_uint_to_float(qv) - 32.0f);
        }
      }
    }
  }
};

// FP8 weights (core/dtype.h): the row's f32 scale in its 16-byte header,
// then e4m3 codes; sub-block `sub` is codes [32 sub, 32 sub + 32).
__device__ __forceinline__ float f8_row_scale(const uint8_t* row) { return *reinterpret_cast<const float*>(row); }
__device__ __forceinline__ const uint4* f8_row_codes(const uint8_t* row) {
  return reinterpret_cast<const uint4*>(row + 16);
}
template <> struct WeightFormat<DType::F8_E4M3_ROW> {
  static constexpr int kBlockElems = 32, kBlockBytes = 32;
  __device__ static void load32(const uint8_t* row, int sub, float (&v)[32]) {
    const float s = f8_row_scale(row) * kFp8HalfScale;
    const uint4* p = f8_row_codes(row) + 2 * sub;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint4 u = p[i];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 lo = half2_bits_to_float2(e4m3x2_to_half2_bits(w[j]));
        const float2 hi = half2_bits_to_float2(e4m3x2_to_half2_bits(w[j] >> 16));
        v[16 * i + 4 * j] = lo.x * s;
        v[16 * i + 4 * j + 1] = lo.y * s;
        v[16 * i + 4 * j + 2] = hi.x * s;
        v[16 * i + 4 * j + 3] = hi.y * s;
      }
    }
  }
};

}  // namespace rf::gpu

// The i-quants and MXFP4 (WeightFormat specializations of their own).
#include "backend/cuda/matmul/dequant_iq.cuh"

// X(T) for every weight format the kernels read (the launchers' switch cases).
#define RF_FOR_EACH_WEIGHT_FORMAT(X)                                                                                \
  X(F32) X(F16) X(BF16) X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q8_0) X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) X(Q6_K)             \
  X(F8_E4M3_ROW) X(IQ1_S) X(IQ1_M) X(IQ2_XXS) X(IQ2_XS) X(IQ2_S) X(IQ3_XXS) X(IQ3_S) X(IQ4_NL) X(IQ4_XS) X(MXFP4)

