// The plain C++ kernel set (any CPU) and the scalar activation quantizers:
// every quantized format through qimpl::unpack_blocks_scalar (small integers
// plus per-group scale and bias) and an integer dot per group; float weights
// against f32 activations.
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_qdot.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"

namespace rf::cpu::qdot {
namespace {

// d = max|x| / 127, q = round(x * 127 / max|x|) (ties to even, as the SIMD
// conversion rounds); all-zero input gives d = 0 and q = 0.
inline float quant_scale(const float* x, size_t n, float* inv) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  *inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  return amax / 127.0f;
}

template <DType T>
float to_float(const uint8_t* p, size_t i) {
  if constexpr (T == DType::F32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  } else {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return T == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
  }
}

template <DType T>
void dot_float(const void* w, const void* x, size_t x_stride, int nr, size_t k, float* out, size_t out_stride) {
  const auto* wp = static_cast<const uint8_t*>(w);
  for (int j = 0; j < nr; ++j) {
    const float* xr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(x) + size_t(j) * x_stride);
    float s = 0.0f;
    for (size_t i = 0; i < k; ++i) s += to_float<T>(wp, i) * xr[i];
    out[size_t(j) * out_stride] = s;
  }
}

// Any quantized format: unpack a chunk of blocks, then per group
// scale * (d_x * sum(q * q_x)) + bias * (d_x * sum(q_x)).
template <DType T>
void dot_unpacked(const void* w, const void* x, size_t x_stride, int nr, size_t k, float* out, size_t out_stride) {
  const qimpl::Layout l = qimpl::layout(T);
  const size_t bs = size_t(l.block_size), gs = size_t(l.group_size), bbytes = info(T).type_size;
  alignas(32) int8_t q[qimpl::kUnpackChunk];
  float scale[qimpl::kUnpackChunk / 16], bias[qimpl::kUnpackChunk / 16];
  float acc[kMaxRows] = {};
  const auto* wp = static_cast<const uint8_t*>(w);
  for (size_t done = 0; done < k; done += qimpl::kUnpackChunk) {
    const size_t len = std::min<size_t>(k - done, qimpl::kUnpackChunk), nb = len / bs;
    qimpl::unpack_blocks_scalar(T, wp + (done / bs) * bbytes, nb, q, scale, bias);
    for (int j = 0; j < nr; ++j) {
      const auto* xr = static_cast<const uint8_t*>(x) + size_t(j) * x_stride;
      for (size_t g = 0; g < len / gs; ++g) {
        const size_t e0 = done + g * gs;  // first element of the group
        const int8_t* xq;
        float xd, xsum;
        if (bs == 32) {
          const auto* b = reinterpret_cast<const BlockQ8_32*>(xr) + e0 / 32;
          xq = b->qs + e0 % 32;
          xd = b->d;
          xsum = b->s;  // gs == 32 for every 32-element format
        } else {
          const auto* b = reinterpret_cast<const BlockQ8_K*>(xr) + e0 / 256;
          xq = b->qs + e0 % 256;
          xd = b->d;
          int s = b->bsums[(e0 % 256) / 16];
          if (gs == 32) s += b->bsums[(e0 % 256) / 16 + 1];
          xsum = xd * float(s);
        }
        int isum = 0;
        for (size_t i = 0; i < gs; ++i) isum += int(q[g * gs + i]) * int(xq[i]);
        acc[j] += scale[g] * (xd * float(isum));
        if (l.has_bias) acc[j] += bias[g] * xsum;
      }
    }
  }
  for (int j = 0; j < nr; ++j) out[size_t(j) * out_stride] = acc[j];
}

}  // namespace

void quantize_q8_32_scalar(const float* x, BlockQ8_32* dst, size_t n) {
  for (size_t b = 0; b < n / 32; ++b, x += 32) {
    float inv;
    dst[b].d = quant_scale(x, 32, &inv);
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      dst[b].qs[i] = int8_t(std::nearbyintf(x[i] * inv));
      sum += dst[b].qs[i];
    }
    dst[b].s = dst[b].d * float(sum);
  }
}

void quantize_q8_k_scalar(const float* x, void* dst, size_t n) {
  auto* out = static_cast<BlockQ8_K*>(dst);
  for (size_t b = 0; b < n / 256; ++b, x += 256) {
    float inv;
    out[b].d = quant_scale(x, 256, &inv);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) {
        const int8_t v = int8_t(std::nearbyintf(x[g * 16 + i] * inv));
        out[b].qs[g * 16 + i] = v;
        sum += v;
      }
      out[b].bsums[g] = int16_t(sum);
    }
  }
}

// The scalar kernel for each format (None for F8_E4M3_ROW and unknown types).
WeightKernel scalar_lookup(DType t) {
  switch (t) {
    case DType::F32: return {ActFormat::F32, dot_float<DType::F32>};
    case DType::F16: return {ActFormat::F32, dot_float<DType::F16>};
    case DType::BF16: return {ActFormat::F32, dot_float<DType::BF16>};
#define RF_UNPACKED(T, A) \
  case DType::T: return {ActFormat::A, dot_unpacked<DType::T>};
    RF_UNPACKED(Q4_0, Q8_32) RF_UNPACKED(Q4_1, Q8_32) RF_UNPACKED(Q5_0, Q8_32) RF_UNPACKED(Q5_1, Q8_32)
    RF_UNPACKED(Q8_0, Q8_32) RF_UNPACKED(IQ4_NL, Q8_32) RF_UNPACKED(MXFP4, Q8_32)
    RF_UNPACKED(Q2_K, Q8_K) RF_UNPACKED(Q3_K, Q8_K) RF_UNPACKED(Q4_K, Q8_K) RF_UNPACKED(Q5_K, Q8_K)
    RF_UNPACKED(Q6_K, Q8_K) RF_UNPACKED(Q8_K, Q8_K) RF_UNPACKED(IQ2_XXS, Q8_K) RF_UNPACKED(IQ2_XS, Q8_K)
    RF_UNPACKED(IQ2_S, Q8_K) RF_UNPACKED(IQ3_XXS, Q8_K) RF_UNPACKED(IQ3_S, Q8_K) RF_UNPACKED(IQ1_S, Q8_K)
    RF_UNPACKED(IQ1_M, Q8_K) RF_UNPACKED(IQ4_XS, Q8_K)
#undef RF_UNPACKED
    default: return {};
  }
}

}  // namespace rf::cpu::qdot
