// GEMV dot products, per weight format: one weight row against up to C
// activation rows (f16), for a thread's share of the row (row_dot), and the
// packed-half sub-block products of the hot k-quants (q4k_dot32, q6k_dot32)
// that the k-quant GEMV kernel calls, and FP8 weight rows 16 codes at a time
// (f8_dot16). Decoding goes through dequant.cuh.
#pragma once

#include "backend/cuda/matmul/dequant.cuh"

namespace rf::gpu {

__device__ __forceinline__ void half8_to_float(const uint4& u, float (&f)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 p = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
    f[2 * j] = p.x;
    f[2 * j + 1] = p.y;
  }
}

// w . x over 8 values, summed in order (as dot_span<8>).
__device__ __forceinline__ float dot8(const float (&w)[8], const float (&x)[8]) {
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) s = fmaf(w[j], x[j], s);
  return s;
}

__device__ __forceinline__ float dot32_half(const float (&v)[32], const __half* x) {
  const uint4* p = reinterpret_cast<const uint4*>(x);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float f[8];
    half8_to_float(p[i], f);
#pragma unroll
    for (int j = 0; j < 8; ++j) s = fmaf(v[8 * i + j], f[j], s);
  }
  return s;
}

// 16 bytes of a plain-format row as floats: 8 (f16/bf16) or 4 (f32) values.
template <DType T> struct PlainVec;
template <> struct PlainVec<DType::F16> {
  static constexpr int kElems = 8;
  __device__ static void load(const uint4& u, float (&f)[8]) { half8_to_float(u, f); }
};
template <> struct PlainVec<DType::BF16> {
  static constexpr int kElems = 8;
  __device__ static void load(const uint4& u, float (&f)[8]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      f[2 * j] = __uint_as_float(w[j] << 16);
      f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  }
};
template <> struct PlainVec<DType::F32> {
  static constexpr int kElems = 4;
  __device__ static void load(const uint4& u, float (&f)[8]) {
    f[0] = __uint_as_float(u.x); f[1] = __uint_as_float(u.y); f[2] = __uint_as_float(u.z); f[3] = __uint_as_float(u.w);
  }
};

// Dot of kElems weights (as floats) with the same span of activation row c.
template <int E>
__device__ __forceinline__ float dot_span(const float (&w)[8], const __half* x) {
  float s = 0.0f;
  if constexpr (E == 8) {
    float f[8];
    half8_to_float(*reinterpret_cast<const uint4*>(x), f);
#pragma unroll
    for (int j = 0; j < 8; ++j) s = fmaf(w[j], f[j], s);
  } else {
    const uint2 u = *reinterpret_cast<const uint2*>(x);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
    s = fmaf(w[0], a.x, fmaf(w[1], a.y, fmaf(w[2], b.x, w[3] * b.y)));
  }
  return s;
}

// Packed-half dot products for the hot k-quants. Two 4- or 6-bit quants
// become half2(1024 + q0, 1024 + q1) with one byte permute; subtracting the
// (exact) bias centers them, and the products with the activations run two
// per instruction in f16 over 16 elements; group scales and mins are applied
// in f32. The activations of a sub-block arrive in registers (xv: 32 halves),
// loaded once for all the rows a warp works on.
template <uint32_t kSel>
__device__ __forceinline__ __half2 quant_pair(uint32_t bytes, __half2 bias) {
  const uint32_t h = __byte_perm(bytes, 0x6464u, kSel);  // bytes (b_i, 0x64, b_j, 0x64)
  return __hsub2(*reinterpret_cast<const __half2*>(&h), bias);
}

// Q4_K sub-block `sb` of a row: d1*q - m1 = d1*(q - 8) + (8*d1 - m1), the
// second term times sum(x) (xsum, computed once per sub-block by the caller).
__device__ __forceinline__ float q4k_dot32(const uint8_t* row, int sb, const uint4 (&xv)[4], float xsum) {
  const Q4KSub q = q4k_sub_block(row, sb);
  const float d1 = q.d1, m1 = q.m1;
  const uint32_t(&w)[8] = q.w;
  const int shift = q.shift;
  const __half2 bias = __float2half2_rn(1032.0f);  // 1024 + 8
  float qx = 0.0f;
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    __half2 acc = __float2half2_rn(0.0f);
#pragma unroll
    for (int i = 2 * g; i < 2 * g + 2; ++i) {
      const __half2* xh = reinterpret_cast<const __half2*>(&xv[i]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t nib = (w[2 * i + h] >> shift) & 0x0F0F0F0Fu;  // 4 quants, one per byte
        acc = __hfma2(quant_pair<0x4140>(nib, bias), xh[2 * h], acc);
        acc = __hfma2(quant_pair<0x4342>(nib, bias), xh[2 * h + 1], acc);
      }
    }
    const float2 a = __half22float2(acc);
    qx += a.x + a.y;
  }
  return d1 * qx + (8.0f * d1 - m1) * xsum;
}

// sum(x) over a sub-block's 32 activations (q4k_dot32's xsum), in f16 pairs.
__device__ __forceinline__ float half_sum32(const uint4 (&xv)[4]) {
  __half2 s = __float2half2_rn(0.0f);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2* xh = reinterpret_cast<const __half2*>(&xv[i]);
    s = __hadd2(s, __hadd2(__hadd2(xh[0], xh[1]), __hadd2(xh[2], xh[3])));
  }
  const float2 f = __half22float2(s);
  return f.x + f.y;
}

// Q6_K sub-block: two groups of 16 with their own scales; quants are q - 32.
__device__ __forceinline__ float q6k_dot32(const uint8_t* row, int sb, const uint4 (&xv)[4]) {
  const Q6KSub q = q6k_sub_block(row, sb);
  const __half2 bias = __float2half2_rn(1056.0f);  // 1024 + 32
  float total = 0.0f;
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    __half2 acc = __float2half2_rn(0.0f);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const __half2* xh = reinterpret_cast<const __half2*>(&xv[2 * g + i]);
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const uint32_t lw = q.ql[8 * g + 4 * i + p], hw = q.qh[8 * g + 4 * i + p];
        const uint32_t qv = ((lw >> q.lshift) & 0x0F0Fu) | (((hw >> q.hshift) & 0x0303u) << 4);
        acc = __hfma2(quant_pair<0x4140>(qv, bias), xh[p], acc);
      }
    }
    const float2 a = __half22float2(acc);
    total += q.d * float(q.scale[g]) * (a.x + a.y);
  }
  return total;
}

// FP8 weights: 16 e4m3 codes (elements [16 v, 16 v + 16) of a row) against
// the same span of each activation row, added to part (values / kFp8HalfScale).
template <int C>
__device__ __forceinline__ void f8_dot16(const uint4& codes, const __half* x, int k, int v, int n, float (&part)[C]) {
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
  float f[2][8];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 lo = half2_bits_to_float2(e4m3x2_to_half2_bits(w[j]));
    const float2 hi = half2_bits_to_float2(e4m3x2_to_half2_bits(w[j] >> 16));
    f[j / 2][4 * (j % 2)] = lo.x;
    f[j / 2][4 * (j % 2) + 1] = lo.y;
    f[j / 2][4 * (j % 2) + 2] = hi.x;
    f[j / 2][4 * (j % 2) + 3] = hi.y;
  }
#pragma unroll
  for (int c = 0; c < C; ++c)
    if (c < n) {
      const __half* xs = x + size_t(c) * k + size_t(v) * 16;
      part[c] += dot_span<8>(f[0], xs) + dot_span<8>(f[1], xs + 8);
    }
}

// Dot products of one weight row (all columns `n` of x) for this thread's
// share of the row (elements id, id + stride, ...), added to acc.
template <DType T, int C>
__device__ __forceinline__ void row_dot(const uint8_t* row, size_t row_bytes, int k, const __half* x, int n, int id,
                                        int stride, float (&acc)[C]) {
  if constexpr (kPlain<T>) {
    constexpr int E = PlainVec<T>::kElems;
    if (k % (E * 4) == 0 && row_bytes % 16 == 0) {
      const int nv = k / E;
      const uint4* rv = reinterpret_cast<const uint4*>(row);
      int v = id;
      // Two 16-byte loads in flight per lane (4 and 8 cost registers and
      // occupancy for no gain).
      for (; v + 1 * stride < nv; v += 2 * stride) {
        uint4 u[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) u[i] = rv[v + i * stride];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          float f[8];
          PlainVec<T>::load(u[i], f);
#pragma unroll
          for (int c = 0; c < C; ++c)
            if (c < n) acc[c] += dot_span<E>(f, x + size_t(c) * k + size_t(v + i * stride) * E);
        }
      }
      for (; v < nv; v += stride) {
        float f[8];
        PlainVec<T>::load(rv[v], f);
#pragma unroll
        for (int c = 0; c < C; ++c)
          if (c < n) acc[c] += dot_span<E>(f, x + size_t(c) * k + size_t(v) * E);
      }
    } else {
      for (int i = id; i < k; i += stride) {
        const float wv = load1<T>(row, i);
#pragma unroll
        for (int c = 0; c < C; ++c)
          if (c < n) acc[c] = fmaf(wv, __half2float(x[size_t(c) * k + i]), acc[c]);
      }
    }
  } else if constexpr (T == DType::F8_E4M3_ROW) {
    // 16 codes per 16-byte load, two loads in flight per lane (as the plain
    // formats); the row's scale once at the end.
    const uint4* rv = f8_row_codes(row);
    const int nv = k / 16;
    float part[C];
#pragma unroll
    for (int c = 0; c < C; ++c) part[c] = 0.0f;
    int v = id;
    for (; v + stride < nv; v += 2 * stride) {
      const uint4 u0 = rv[v], u1 = rv[v + stride];
      f8_dot16<C>(u0, x, k, v, n, part);
      f8_dot16<C>(u1, x, k, v + stride, n, part);
    }
    for (; v < nv; v += stride) f8_dot16<C>(rv[v], x, k, v, n, part);
    const float s = f8_row_scale(row) * kFp8HalfScale;
#pragma unroll
    for (int c = 0; c < C; ++c) acc[c] = fmaf(part[c], s, acc[c]);
  } else {
    for (int sb = id; sb < k / 32; sb += stride) {
      float v[32];
      WeightFormat<T>::load32(row, sb, v);
#pragma unroll
      for (int c = 0; c < C; ++c)
        if (c < n) acc[c] += dot32_half(v, x + size_t(c) * k + size_t(sb) * 32);
    }
  }
}

}  // namespace rf::gpu
