// quantize_row / can_quantize: argument checks, the plain float formats
// (f32, f16, bf16 with round-to-nearest-even) and dispatch to the legacy,
// k-quant, non-linear 4-bit and low-bit i-quant quantizers.
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "core/quant_blocks.h"

namespace rf {

bool can_quantize(DType t) { return can_dequantize(t); }

void quantize_row(DType t, const float* src, void* dst, size_t n, const float* importance) {
  RF_CHECK(can_quantize(t), "quantize_row: cannot quantize to ", dtype_name(t));
  row_bytes(t, n);  // throws on a partial block
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::F16: {
      auto* y = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) y[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* y = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) y[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1:
    case DType::Q8_0: case DType::Q8_1:
      qimpl::quantize_legacy(t, src, dst, n);
      return;
    case DType::F8_E4M3_ROW:
      qimpl::quantize_f8_row(src, dst, n);
      return;
    case DType::IQ1_S: case DType::IQ1_M:
      qimpl::quantize_iq1(t, src, dst, n, importance, nullptr);
      return;
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S:
      qimpl::quantize_iq2(t, src, dst, n, importance, nullptr);
      return;
    case DType::IQ3_XXS: case DType::IQ3_S:
      qimpl::quantize_iq3(t, src, dst, n, importance, nullptr);
      return;
    case DType::IQ4_NL: case DType::IQ4_XS: case DType::MXFP4:
      qimpl::quantize_iq4(t, src, dst, n, importance);
      return;
    default:
      qimpl::quantize_kquant(t, src, dst, n);
      return;
  }
}

}  // namespace rf
