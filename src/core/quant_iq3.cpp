// Quantizers of the 3-bit i-quants: IQ3_XXS (an 8-bit index into a 256-entry
// grid of 4 magnitudes per 4 values, 7 sign bits with even parity per 8, a
// 4-bit scale per 32) and IQ3_S (9-bit index into 512 entries, a free sign
// per value, a 4-bit odd multiplier per 32). The search is
// core/quant_iq_search.h's; this file holds the formats' parameters and
// writes their blocks (layouts in core/quant_blocks.h).
#include <cstring>

#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "core/quant_iq_search.h"

namespace rf::qimpl {
namespace {

using iqs::BlockCode;

// The group scales as quant_iquants.cpp decodes them.
float iq3_xxs_scale(float d, int l) { return d * (0.5f + float(l)) * 0.5f; }
float iq3_s_scale(float d, int l) { return d * float(1 + 2 * l); }

iqs::Format format(DType t) {
  if (t == DType::IQ3_XXS)
    return {t, &iqs::grid_iq3xxs(), {4, 12, 20, 28, 36, 44, 52, 62}, 32, 16, iq3_xxs_scale, iqs::Signs::kEven,
            iqs::Shift::kNone};
  return {t, &iqs::grid_iq3s(), {1, 3, 5, 7, 9, 11, 13, 15}, 32, 16, iq3_s_scale, iqs::Signs::kFree,
          iqs::Shift::kNone};
}

void pack_iq3_xxs(const BlockCode& c, uint8_t* b) {
  b[0] = uint8_t(c.d), b[1] = uint8_t(c.d >> 8);
  uint8_t* qs = b + 2;
  for (int g = 0; g < 8; ++g) {
    for (int k = 0; k < 8; ++k) qs[8 * g + k] = uint8_t(c.g[g].entry[k]);
    uint32_t aux = uint32_t(c.g[g].l) << 28;
    for (int k = 0; k < 4; ++k) aux |= uint32_t(c.g[g].negative[k] & 127) << (7 * k);
    std::memcpy(qs + 64 + 4 * g, &aux, 4);  // little-endian hosts only (as the decoder)
  }
}

void pack_iq3_s(const BlockCode& c, uint8_t* b) {
  b[0] = uint8_t(c.d), b[1] = uint8_t(c.d >> 8);
  uint8_t* qs = b + 2;
  uint8_t* qh = qs + 64;
  uint8_t* signs = qh + 8;
  uint8_t* scales = signs + 32;
  for (int g = 0; g < 8; ++g) {
    for (int k = 0; k < 8; ++k) {
      qs[8 * g + k] = uint8_t(c.g[g].entry[k]);
      qh[g] = uint8_t(qh[g] | ((c.g[g].entry[k] >> 8) << k));
    }
    for (int k = 0; k < 4; ++k) signs[4 * g + k] = c.g[g].negative[k];
    scales[g / 2] = uint8_t(scales[g / 2] | (c.g[g].l << (4 * (g % 2))));
  }
}

}  // namespace

bool quantize_iq3(DType t, const float* src, void* dst, size_t n, const float* importance, double* error) {
  if (t != DType::IQ3_XXS && t != DType::IQ3_S) return false;
  const double e = iqs::quantize_blocks(format(t), t == DType::IQ3_XXS ? pack_iq3_xxs : pack_iq3_s,
                                        info(t).type_size, src, dst, n, importance);
  if (error) *error = e;
  return true;
}

}  // namespace rf::qimpl
