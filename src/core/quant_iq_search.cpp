// The grid search behind the quantizers of the i-quants below 4 bits: the
// search of one cell (on the lattice tables of quant_iq_lattice.cpp), of one
// group at a given scale (signs, the parity constraint, IQ1's shifts), and
// the choice of a super-block's scales (core/quant_iq_search.h describes the
// method).
#include "core/quant_iq_search.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/fp16.h"
#include "core/quant_blocks.h"

namespace rf::qimpl::iqs {
namespace {

// Level tables of one search: values ascending and the midpoints between them.
struct Levels {
  float v[8];
  float mid[7];
};

Levels make_levels(const float* v, int radix, float shift) {
  Levels l{};
  for (int r = 0; r < radix; ++r) l.v[r] = v[r] + shift;
  for (int r = 0; r + 1 < radix; ++r) l.mid[r] = 0.5f * (l.v[r] + l.v[r + 1]);
  return l;
}

// Scans n list entries that differ from the lattice point in ND values.
template <int ND>
inline void scan_run(int n, const float* extra, const uint8_t** list, float* best, int* best_e) {
  const uint8_t* p = *list;
  float b = *best;
  int be = *best_e;
  for (; n > 0; --n, p += 2 + ND) {
    float s = 0;
    for (int i = 0; i < ND; ++i) s += extra[p[2 + i]];
    const int e = p[0] | (p[1] << 8);
    be = s < b ? e : be;
    b = s < b ? s : b;
  }
  *list = p, *best = b, *best_e = be;
}

// The best entry for targets t (in units of the scale) with weights w:
// returns sum w (t - level)^2, the entry in *entry and, in b, each value's
// cost at its own nearest level (the lower bound the parity search uses).
template <int C, int R>
float search_cell(const Grid& g, const Levels& lv, const float* t, const float* w, int* entry, float* b) {
  int pt = 0;
  float base = 0;
  for (int j = C - 1; j >= 0; --j) {
    int k = 0;
    for (int r = 0; r < R - 1; ++r) k += t[j] > lv.mid[r];
    const float e = t[j] - lv.v[k];
    b[j] = w[j] * e * e;
    base += b[j];
    pt = pt * R + k;
  }
  const int32_t m = g.map[size_t(pt)];
  if (m >= 0) {
    *entry = m;
    return base;
  }
  // Off the grid: the candidate entries of the point, each costing `base` plus the
  // extra cost of the values where it differs from the point.
  float extra[C * R];
  for (int j = 0; j < C; ++j)
    for (int r = 0; r < R; ++r) {
      const float e = t[j] - lv.v[r];
      extra[j * R + r] = w[j] * e * e - b[j];
    }
  const uint8_t* counts = &g.near[size_t(-1 - m)];
  const uint8_t* p = counts + 2 * C;
  float best = FLT_MAX;
  int best_e = 0;
  [&]<int... ND>(std::integer_sequence<int, ND...>) {
    (scan_run<ND + 1>(counts[2 * ND] | (counts[2 * ND + 1] << 8), extra, &p, &best, &best_e), ...);
  }(std::make_integer_sequence<int, C>());
  best += base;
  *entry = best_e;
  return best;
}

// One group's values prepared for repeated trials.
struct GroupData {
  int n = 0;
  float x[32], w[32];
  float a[32];        // what the cells fit in units of the scale times s: |x| (x for a signed grid)
  uint8_t neg[4];     // sign bits of x per 8 values
  double sxx = 0;     // sum w x^2
};

struct Trial {
  GroupCode code;
  double sxq = 0, sqq = 0;  // sum w x q and sum w q^2 of the assignment
  double err = 0;           // sum w (x - s q)^2 with the products as the decoder forms them
};

template <int C, int R>
class Searcher {
 public:
  explicit Searcher(const Format& f) : f_(f) {
    if (f.shift == Shift::kNone) {
      lv_[0] = make_levels(f.levels, R, 0.0f);
    } else {
      lv_[0] = make_levels(f.levels, R, 1.0f);
      lv_[1] = make_levels(f.levels, R, -1.0f);
    }
  }

  // The best code of group gd at scale s > 0.
  void trial(const GroupData& gd, float s, Trial* tr) const {
    const float inv = 1.0f / s;
    float t[32], b[32];
    for (int i = 0; i < gd.n; ++i) t[i] = gd.a[i] * inv;
    const int cells = gd.n / C;
    int entry[8];
    GroupCode& code = tr->code;
    code.shift_neg = 0;
    if (f_.signs == Signs::kNone) {
      if (f_.shift == Shift::kPerCell) {
        for (int c = 0; c < cells; ++c) {
          int e0, e1;
          const float E0 = search_cell<C, R>(*f_.grid, lv_[0], t + C * c, gd.w + C * c, &e0, b);
          const float E1 = search_cell<C, R>(*f_.grid, lv_[1], t + C * c, gd.w + C * c, &e1, b);
          entry[c] = E1 < E0 ? e1 : e0;
          if (E1 < E0) code.shift_neg = uint8_t(code.shift_neg | (1 << c));
        }
      } else {
        int e1[8];
        float E0 = 0, E1 = 0;
        for (int c = 0; c < cells; ++c) {
          E0 += search_cell<C, R>(*f_.grid, lv_[0], t + C * c, gd.w + C * c, &entry[c], b);
          E1 += search_cell<C, R>(*f_.grid, lv_[1], t + C * c, gd.w + C * c, &e1[c], b);
        }
        if (E1 < E0) {
          std::memcpy(entry, e1, sizeof(entry));
          code.shift_neg = 1;
        }
      }
      for (int k = 0; k < gd.n / 8; ++k) code.negative[k] = 0;
    } else {
      float E[8];
      for (int c = 0; c < cells; ++c)
        E[c] = search_cell<C, R>(*f_.grid, lv_[0], t + C * c, gd.w + C * c, &entry[c], b + C * c);
      for (int k = 0; k < gd.n / 8; ++k) {
        code.negative[k] = gd.neg[k];
        if (f_.signs == Signs::kEven && (__builtin_popcount(gd.neg[k]) & 1)) flip_one(gd, k, t, b, E, entry, &code);
      }
    }
    for (int c = 0; c < cells; ++c) code.entry[c] = uint16_t(entry[c]);
    stats(gd, s, tr);
  }

 private:
  // An odd count of negatives among values 8k..8k+7: negate the one whose
  // negation costs least (cell searched again with that value's target
  // negated), trying elements in order of a lower bound of that cost.
  void flip_one(const GroupData& gd, int k, const float* t, const float* b, const float* E, int* entry,
                GroupCode* code) const {
    constexpr int kCellsPer8 = 8 / C;
    const int c0 = k * kCellsPer8;
    float lb[8];
    for (int i = 0; i < 8; ++i) {
      const int v = 8 * k + i, c = v / C;
      float rest = 0;
      for (int j = C * c; j < C * c + C; ++j)
        if (j != v) rest += b[j];
      const float e = t[v] + lv_[0].v[0];
      lb[i] = rest + gd.w[v] * e * e - E[c];  // relative to the unconstrained total
    }
    float best = FLT_MAX;
    int best_i = 0, best_entry = entry[c0];
    uint8_t tried = 0;
    for (int round = 0; round < 8; ++round) {
      int i = -1;
      for (int j = 0; j < 8; ++j)
        if (!(tried >> j & 1) && (i < 0 || lb[j] < lb[i])) i = j;
      if (lb[i] >= best) break;
      tried = uint8_t(tried | (1 << i));
      const int v = 8 * k + i, c = v / C;
      float tc[C], bc[C];
      std::memcpy(tc, t + C * c, sizeof(tc));
      tc[v - C * c] = -tc[v - C * c];
      int e;
      const float cost = search_cell<C, R>(*f_.grid, lv_[0], tc, gd.w + C * c, &e, bc) - E[c];
      if (cost < best) best = cost, best_i = i, best_entry = e;
    }
    entry[(8 * k + best_i) / C] = best_entry;
    code->negative[k] = uint8_t(code->negative[k] ^ (1 << best_i));
  }

  void stats(const GroupData& gd, float s, Trial* tr) const {
    const GroupCode& code = tr->code;
    double sxq = 0, sqq = 0, err = 0;
    for (int c = 0; c < gd.n / C; ++c) {
      const Levels& lv = lv_[f_.shift == Shift::kPerCell ? (code.shift_neg >> c & 1) : (code.shift_neg & 1)];
      const uint8_t* L = &f_.grid->level[size_t(code.entry[c]) * C];
      for (int j = 0; j < C; ++j) {
        const int i = C * c + j;
        float q = lv.v[L[j]];
        if (code.negative[i / 8] >> (i % 8) & 1) q = -q;
        const double wq = double(gd.w[i]) * q;
        sxq += wq * gd.x[i];
        sqq += wq * q;
        const double e = double(gd.x[i]) - double(s * q);
        err += gd.w[i] * e * e;
      }
    }
    tr->sxq = sxq, tr->sqq = sqq, tr->err = err;
  }

  const Format& f_;
  Levels lv_[2];
};

// Stage 1: candidate scales map the largest magnitude onto the top level
// times 1 / r for r in [kRatioLo, kRatioHi]; each is refitted.
constexpr int kCandidates = 6;
constexpr float kRatioLo = 0.7f, kRatioHi = 1.25f;
constexpr int kRefine = 3;
// Stage 2: super-scale candidates for the proxy, and how many are evaluated exactly.
constexpr int kSuperCandidates = 24;
constexpr float kSuperLo = 0.85f, kSuperHi = 1.25f;
constexpr int kExact = 3;

template <int C, int R>
void solve(const Format& f, const float* x, const float* w, BlockCode* out) {
  const Searcher<C, R> search(f);
  const int ng = kQK_K / f.group;
  GroupData gd[16];
  float best_s[16];
  double curv[16];
  float top = 0;
  for (int r = 0; r < R; ++r) top = std::max(top, std::fabs(f.levels[r]) + (f.shift != Shift::kNone ? 1.0f : 0.0f));
  Trial tr;
  for (int g = 0; g < ng; ++g) {
    GroupData& d = gd[g];
    d.n = f.group;
    float amax = 0;
    for (int i = 0; i < f.group; ++i) {
      const float v = x[g * f.group + i];
      d.x[i] = v;
      d.w[i] = w[g * f.group + i];
      d.a[i] = f.signs == Signs::kNone ? v : std::fabs(v);
      d.sxx += double(d.w[i]) * v * v;
      amax = std::max(amax, std::fabs(v));
    }
    for (int k = 0; k < f.group / 8; ++k) {
      uint8_t s = 0;
      for (int j = 0; j < 8; ++j)
        if (d.x[8 * k + j] < 0) s = uint8_t(s | (1 << j));
      d.neg[k] = s;
    }
    best_s[g] = 0;
    curv[g] = 0;
    if (!(amax > 0)) continue;
    double best_q = 0;
    auto consider = [&](float s) {
      if (!(s > 0) || !std::isfinite(s)) return false;
      search.trial(d, s, &tr);
      if (!(tr.sqq > 0 && tr.sxq > 0)) return false;
      const double q = tr.sxq * tr.sxq / tr.sqq;
      if (q <= best_q * (1 + 1e-7)) return false;
      best_q = q, best_s[g] = float(tr.sxq / tr.sqq), curv[g] = tr.sqq;
      return true;
    };
    for (int c = 0; c < kCandidates; ++c)
      consider(amax / (top * (kRatioLo + (kRatioHi - kRatioLo) * float(c) / float(kCandidates - 1))));
    for (int it = 0; it < kRefine && best_s[g] > 0; ++it)
      if (!consider(best_s[g])) break;
  }

  // Stage 2.
  *out = BlockCode{};
  double zero_err = 0;
  for (int g = 0; g < ng; ++g) zero_err += gd[g].sxx;
  out->error = zero_err;
  float smax = 0;
  for (int g = 0; g < ng; ++g) smax = std::max(smax, best_s[g]);
  if (!(smax > 0)) return;
  const int top_m = 2 * f.codes - 1;
  auto multiplier = [&](double s, double dd) {  // the odd multiplier nearest s / dd
    const double l = std::floor((s / dd - 1) * 0.5 + 0.5);
    return 2 * std::clamp(l, 0.0, double(f.codes - 1)) + 1;
  };
  auto proxy = [&](double dd, double* refit) {
    double p = 0, num = 0, den = 0;
    for (int g = 0; g < ng; ++g) {
      const double m = multiplier(best_s[g], dd), e = best_s[g] - dd * m;
      p += curv[g] * e * e;
      num += curv[g] * best_s[g] * m;
      den += curv[g] * m * m;
    }
    *refit = den > 0 ? num / den : dd;
    return p;
  };
  double cand[kSuperCandidates], score[kSuperCandidates];
  for (int c = 0; c < kSuperCandidates; ++c) {
    const double dd = smax / top_m * (kSuperLo + (kSuperHi - kSuperLo) * c / (kSuperCandidates - 1));
    double r1, r2;
    const double p0 = proxy(dd, &r1), p1 = proxy(r1, &r2);
    cand[c] = p1 < p0 ? r1 : dd;
    score[c] = std::min(p0, p1);
  }
  const float unit = f.scale(1.0f, 0);
  uint16_t tried[kExact];
  int ntried = 0;
  BlockCode bc;
  for (int round = 0; round < kExact; ++round) {
    int c = -1;
    for (int k = 0; k < kSuperCandidates; ++k)
      if (score[k] < DBL_MAX && (c < 0 || score[k] < score[c])) c = k;
    if (c < 0) break;
    score[c] = DBL_MAX;
    const float dv = std::min(float(cand[c] / unit), 65504.0f);
    const uint16_t d16 = f32_to_f16(dv);
    const float d = f16_to_f32(d16);
    if (!(d > 0) || std::find(tried, tried + ntried, d16) != tried + ntried) continue;
    tried[ntried++] = d16;
    bc.d = d16;
    bc.error = 0;
    for (int g = 0; g < ng && bc.error < out->error; ++g) {
      int l = 0;
      while (l + 1 < f.codes && f.scale(d, l + 1) <= best_s[g]) ++l;
      double best = DBL_MAX;
      for (int ll = l; ll <= std::min(l + 1, f.codes - 1); ++ll) {
        if (ll > l && !(best_s[g] > 0)) break;
        search.trial(gd[g], f.scale(d, ll), &tr);
        if (tr.err < best) best = tr.err, bc.g[g] = tr.code, bc.g[g].l = uint8_t(ll);
      }
      bc.error += best;
    }
    if (bc.error < out->error) *out = bc;
  }
}

}  // namespace

void finite_block(const float* src, float* x) {
  float amax = 0;
  for (int i = 0; i < kQK_K; ++i)
    if (std::isfinite(src[i])) amax = std::max(amax, std::fabs(src[i]));
  for (int i = 0; i < kQK_K; ++i) {
    const float v = src[i];
    x[i] = std::isnan(v) ? 0.0f : std::isinf(v) ? std::copysign(amax, v) : v;
  }
}

void block_weights(const float* importance, float* w) {
  double sum = 0;
  if (importance)
    for (int i = 0; i < kQK_K; ++i) {
      const float v = importance[i];
      w[i] = std::isfinite(v) && v > 0 ? v : 0.0f;
      sum += w[i];
    }
  if (!(sum > 0)) {
    std::fill(w, w + kQK_K, 1.0f);
    return;
  }
  const float share = float(1e-6 * sum / kQK_K);
  for (int i = 0; i < kQK_K; ++i) w[i] += share;
}

double quantize_blocks(const Format& f, PackFn pack, size_t block_bytes, const float* src, void* dst, size_t n,
                       const float* importance) {
  auto* out = static_cast<uint8_t*>(dst);
  float x[kQK_K], w[kQK_K];
  BlockCode code;
  double error = 0;
  for (size_t i = 0; i < n; i += kQK_K, out += block_bytes) {
    finite_block(src + i, x);
    block_weights(importance ? importance + i : nullptr, w);
    solve_block(f, x, w, &code);
    std::memset(out, 0, block_bytes);
    pack(code, out);
    error += code.error;
  }
  return error;
}

void solve_block(const Format& f, const float* x, const float* w, BlockCode* out) {
  if (f.grid->cell == 8) solve<8, 3>(f, x, w, out);
  else solve<4, 8>(f, x, w, out);
}

}  // namespace rf::qimpl::iqs
