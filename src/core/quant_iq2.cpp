// Quantizers of the 2-bit i-quants: IQ2_XXS (an 8-bit index into a 256-entry
// grid per 8 values, 7 sign bits with even parity, a 4-bit scale per 32),
// IQ2_XS (9-bit index into 512 entries, 7 sign bits, a 4-bit scale per 16)
// and IQ2_S (10-bit index into 1024 entries, 8 free sign bits, a 4-bit scale
// per 16). The search is core/quant_iq_search.h's; this file holds the
// formats' parameters and writes their blocks (layouts in core/quant_blocks.h).
#include <cstring>

#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "core/quant_iq_search.h"

namespace rf::qimpl {
namespace {

using iqs::BlockCode;

// The group scale as quant_iquants.cpp decodes it.
float iq2_scale(float d, int l) { return d * (0.5f + float(l)) * 0.25f; }

iqs::Format format(DType t) {
  iqs::Format f{t, nullptr, {8, 25, 43}, 16, 16, iq2_scale, iqs::Signs::kEven, iqs::Shift::kNone};
  switch (t) {
    case DType::IQ2_XXS: f.grid = &iqs::grid_iq2xxs(), f.group = 32; break;
    case DType::IQ2_XS: f.grid = &iqs::grid_iq2xs(); break;
    default: f.grid = &iqs::grid_iq2s(), f.signs = iqs::Signs::kFree; break;
  }
  return f;
}

void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v), p[1] = uint8_t(v >> 8); }

void pack_iq2_xxs(const BlockCode& c, uint8_t* b) {
  put16(b, c.d);
  for (int g = 0; g < 8; ++g) {
    uint8_t* q = b + 2 + 8 * g;
    uint32_t aux = uint32_t(c.g[g].l) << 28;
    for (int k = 0; k < 4; ++k) {
      q[k] = uint8_t(c.g[g].entry[k]);
      aux |= uint32_t(c.g[g].negative[k] & 127) << (7 * k);
    }
    std::memcpy(q + 4, &aux, 4);  // little-endian hosts only (as the decoder)
  }
}

void pack_iq2_xs(const BlockCode& c, uint8_t* b) {
  put16(b, c.d);
  uint8_t* scales = b + 2 + 64;
  for (int g = 0; g < 16; ++g) {
    for (int k = 0; k < 2; ++k)
      put16(b + 2 + 2 * (2 * g + k), uint16_t(c.g[g].entry[k] | ((c.g[g].negative[k] & 127) << 9)));
    scales[g / 2] = uint8_t(scales[g / 2] | (c.g[g].l << (4 * (g % 2))));
  }
}

void pack_iq2_s(const BlockCode& c, uint8_t* b) {
  put16(b, c.d);
  uint8_t* qs = b + 2;
  uint8_t* signs = qs + 32;
  uint8_t* qh = b + 2 + 64;
  uint8_t* scales = qh + 8;
  for (int g = 0; g < 16; ++g) {
    for (int k = 0; k < 2; ++k) {
      const int cell = 2 * g + k;
      qs[cell] = uint8_t(c.g[g].entry[k]);
      signs[cell] = c.g[g].negative[k];
      qh[cell / 4] = uint8_t(qh[cell / 4] | ((c.g[g].entry[k] >> 8) << (2 * (cell % 4))));
    }
    scales[g / 2] = uint8_t(scales[g / 2] | (c.g[g].l << (4 * (g % 2))));
  }
}

}  // namespace

bool quantize_iq2(DType t, const float* src, void* dst, size_t n, const float* importance, double* error) {
  iqs::PackFn pack;
  switch (t) {
    case DType::IQ2_XXS: pack = pack_iq2_xxs; break;
    case DType::IQ2_XS: pack = pack_iq2_xs; break;
    case DType::IQ2_S: pack = pack_iq2_s; break;
    default: return false;
  }
  const double e = iqs::quantize_blocks(format(t), pack, info(t).type_size, src, dst, n, importance);
  if (error) *error = e;
  return true;
}

}  // namespace rf::qimpl
