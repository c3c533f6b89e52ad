// Quantizers of the 1-bit i-quants: IQ1_S (an 11-bit index into a 2048-entry
// grid of values in {-1, 0, 1} per 8, a 3-bit odd multiplier and a shift
// of +-1/8 per 32) and IQ1_M (the same grid, the shift chosen per 8 values,
// a 3-bit multiplier per 16, the f16 scale spread over the scale bytes).
// Values decode to scale * (v +- 1/8), unpacked as (scale / 8) * (8 v +- 1).
// The search is core/quant_iq_search.h's; this file holds the formats'
// parameters and writes their blocks (layouts in core/quant_blocks.h).
#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "core/quant_iq_search.h"

namespace rf::qimpl {
namespace {

using iqs::BlockCode;

// The group scale (of q = 8 v +- 1) as quant_iquants.cpp decodes it.
float iq1_scale(float d, int l) { return d * float(2 * l + 1) * 0.125f; }

iqs::Format format(DType t) {
  if (t == DType::IQ1_S)
    return {t, &iqs::grid_iq1s(), {-8, 0, 8}, 32, 8, iq1_scale, iqs::Signs::kNone, iqs::Shift::kPerGroup};
  return {t, &iqs::grid_iq1s(), {-8, 0, 8}, 16, 8, iq1_scale, iqs::Signs::kNone, iqs::Shift::kPerCell};
}

void pack_iq1_s(const BlockCode& c, uint8_t* b) {
  b[0] = uint8_t(c.d), b[1] = uint8_t(c.d >> 8);
  uint8_t* qs = b + 2;
  uint8_t* qh = qs + 32;
  for (int g = 0; g < 8; ++g) {
    uint16_t h = uint16_t((c.g[g].l << 12) | ((c.g[g].shift_neg & 1) << 15));
    for (int k = 0; k < 4; ++k) {
      qs[4 * g + k] = uint8_t(c.g[g].entry[k]);
      h = uint16_t(h | ((c.g[g].entry[k] >> 8) << (3 * k)));
    }
    qh[2 * g] = uint8_t(h), qh[2 * g + 1] = uint8_t(h >> 8);
  }
}

void pack_iq1_m(const BlockCode& c, uint8_t* b) {
  uint8_t* qs = b;
  uint8_t* qh = b + 32;
  uint16_t sc[4] = {0, 0, 0, 0};
  for (int g = 0; g < 16; ++g) {
    for (int k = 0; k < 2; ++k) {
      const int cell = 2 * g + k;
      qs[cell] = uint8_t(c.g[g].entry[k]);
      const int nib = (c.g[g].entry[k] >> 8) | ((c.g[g].shift_neg >> k & 1) << 3);
      qh[cell / 2] = uint8_t(qh[cell / 2] | (nib << (4 * (cell % 2))));
    }
    // Group g is the first or second 16 of 32-block g / 2; two 32-blocks per scale word.
    const int ib = g / 2;
    sc[ib / 2] = uint16_t(sc[ib / 2] | (c.g[g].l << (6 * (ib % 2) + 3 * (g % 2))));
  }
  for (int k = 0; k < 4; ++k) {
    sc[k] = uint16_t(sc[k] | (((c.d >> (4 * k)) & 0xF) << 12));
    b[48 + 2 * k] = uint8_t(sc[k]), b[49 + 2 * k] = uint8_t(sc[k] >> 8);
  }
}

}  // namespace

bool quantize_iq1(DType t, const float* src, void* dst, size_t n, const float* importance, double* error) {
  if (t != DType::IQ1_S && t != DType::IQ1_M) return false;
  const double e = iqs::quantize_blocks(format(t), t == DType::IQ1_S ? pack_iq1_s : pack_iq1_m, info(t).type_size,
                                        src, dst, n, importance);
  if (error) *error = e;
  return true;
}

}  // namespace rf::qimpl
