// The search shared by the quantizers of the i-quants below 4 bits (IQ3_S,
// IQ3_XXS, IQ2_S, IQ2_XS, IQ2_XXS, IQ1_M, IQ1_S): internal to
// quant_iq_search.cpp and the per-family packers (quant_iq1.cpp,
// quant_iq2.cpp, quant_iq3.cpp).
//
// Every one of these formats stores a super-block of 256 values as an f16
// scale d, a small odd multiplier (2l + 1) per group of 16 or 32 values, and
// per cell of 8 or 4 values an index into a restricted grid (core/iq_grids.h)
// plus signs (all free, or with an even number of negatives per 8 values,
// the 8th sign implied) or, for IQ1, a shift of +-1/8. A value decodes to
// scale_of_group * q with q a small integer: +-grid magnitude, or
// 8 * grid value +- 1 for IQ1 (the unpacked form of quant_iquants.cpp).
//
// solve_block() chooses all of it to minimize sum_i w_i (x_i - decoded_i)^2:
//   1. per group, the best unconstrained scale: candidate scales around the
//      one mapping the largest magnitude onto the top level, each followed by
//      the least-squares scale of the assignment it gave, refined;
//   2. the super-block scale: candidates ranked by how well d (2l + 1) can
//      approach every group's best scale (weighted by that group's sum w q^2),
//      the best few then evaluated exactly: d rounded to f16, each group at
//      the two multipliers around its best scale, every cell searched again
//      against the scale exactly as the decoder computes it.
// A cell's search rounds each value to its nearest level (a point of the
// full lattice of levels^cell points); when that point is a grid entry it is
// the exact answer, otherwise the entries no other entry dominates there
// (precomputed once for every lattice point; quant_iq_lattice.cpp) are
// compared, which is exact too, for any weights. The parity constraint is
// solved exactly per 8 values: with an odd number of negatives, the flip of
// each element is considered in order of a lower bound of its cost.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace rf::qimpl::iqs {

// A grid with, for every lattice point, its entry or the candidates for it.
struct Grid {
  int cell = 0;                 // values per entry: 8 or 4
  int radix = 0;                // levels per value
  int count = 0;                // entries
  std::vector<uint8_t> level;   // [count][cell]: level index of each value
  std::vector<int32_t> map;     // lattice point -> entry, or -1 - offset of its list in `near`
  // At an offset: for nd = 1 .. cell the number of entries differing from
  // the point in nd values (2 bytes each, little-endian), then those entries in that order,
  // each as its index (2 bytes, little-endian) and, per differing value,
  // value * radix + level.
  std::vector<uint8_t> near;
};

enum class Signs { kFree, kEven, kNone };  // kNone: the grid is signed (IQ1)
enum class Shift { kNone, kPerGroup, kPerCell };

struct Format {
  DType type;
  const Grid* grid;
  float levels[8];    // the value q of each level index (magnitudes, or 8 v for IQ1)
  int group;          // values per multiplier: 16 or 32
  int codes;          // multipliers: 2l + 1 for l < codes
  float (*scale)(float d, int l);  // the group scale exactly as the decoder computes it
  Signs signs;
  Shift shift;        // IQ1: q = 8 v + 1 or 8 v - 1
};

// What one group decodes to.
struct GroupCode {
  uint16_t entry[8];   // grid index per cell
  uint8_t negative[4]; // per 8 values, bit j: value j is negated
  uint8_t shift_neg;   // IQ1: bit c: cell c (bit 0: the group) uses -1
  uint8_t l;           // multiplier code
};

struct BlockCode {
  uint16_t d = 0;      // f16 bits
  GroupCode g[16];
  double error = 0;    // sum w (x - decoded)^2 with the scales as decoded
};

// The grids, built on first use (thread-safe).
const Grid& grid_iq2xxs();
const Grid& grid_iq2xs();
const Grid& grid_iq2s();
const Grid& grid_iq3xxs();
const Grid& grid_iq3s();
const Grid& grid_iq1s();

// Weights of one block's 256 values: the importances (null, or none
// positive: all 1); a zero importance gets a small share (1e-6) of the
// block's mean, so that every value still counts a little.
void block_weights(const float* importance, float* w);

// Chooses the code of one super-block of 256 finite values x with weights w.
void solve_block(const Format& f, const float* x, const float* w, BlockCode* out);

// x made finite: NaN -> 0, +-inf -> +-(largest finite magnitude).
void finite_block(const float* src, float* x);

// Quantizes n values (a multiple of 256) block by block: finite_block,
// block_weights, solve_block, then pack() writes the block_bytes of each.
// Returns the sum of the blocks' errors (BlockCode::error).
using PackFn = void (*)(const BlockCode& code, uint8_t* block);
double quantize_blocks(const Format& f, PackFn pack, size_t block_bytes, const float* src, void* dst, size_t n,
                       const float* importance);

}  // namespace rf::qimpl::iqs
