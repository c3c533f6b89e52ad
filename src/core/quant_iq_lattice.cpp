// The lattice tables of the low-bit i-quant grids (core/quant_iq_search.h,
// iqs::Grid): each grid entry's level indices, and for every point of the
// full lattice (levels^cell points) the entry at that point or the list of
// entries that can be the best for a target rounding to it (those no other
// entry dominates). Built once per grid on first use (thread-safe).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "core/iq_grids.h"
#include "core/quant_iq_search.h"

namespace rf::qimpl::iqs {
namespace {

template <class T>
Grid build_grid(const T* entries, int count, int cell, bool is_signed) {
  Grid g;
  g.cell = cell;
  g.count = count;
  int values[8], nv = 0;  // the distinct values, ascending
  auto value_of = [&](int e, int j) {
    const int b = int((uint64_t(entries[e]) >> (8 * j)) & 0xFF);
    return is_signed ? int(int8_t(b)) : b;
  };
  for (int e = 0; e < count; ++e)
    for (int j = 0; j < cell; ++j) {
      const int v = value_of(e, j);
      int at = 0;
      while (at < nv && values[at] < v) ++at;
      if (at < nv && values[at] == v) continue;
      for (int k = nv++; k > at; --k) values[k] = values[k - 1];
      values[at] = v;
    }
  g.radix = nv;
  int lattice = 1;
  for (int j = 0; j < cell; ++j) lattice *= nv;
  g.level.resize(size_t(count) * cell);
  g.map.assign(size_t(lattice), INT32_MIN);
  for (int e = 0; e < count; ++e) {
    int pt = 0;
    for (int j = cell - 1; j >= 0; --j) {
      const int l = int(std::find(values, values + nv, value_of(e, j)) - values);
      g.level[size_t(e) * cell + j] = uint8_t(l);
      pt = pt * nv + l;
    }
    g.map[size_t(pt)] = e;
  }
  // Every off-grid point: the entries no other entry dominates. Entry a
  // dominates entry b at point p when every value of a lies between p's and
  // b's (inclusive): for any target in p's cell (whose values round to p's)
  // and any weights, a then costs no more than b. So the best entry for
  // every such target is among the undominated ones, and a search of them
  // is exact. They are found in order of their distance from p (a dominator
  // is always nearer): an entry not dominated by those kept so far is kept,
  // and the entries it dominates are marked, as the intersection over its
  // values of "level at or beyond this one" (bit sets over the entries).
  const size_t words = (size_t(count) + 63) / 64;
  std::vector<uint64_t> beyond(size_t(cell) * nv * 2 * words);  // [value][level][up or down][words]
  auto beyond_set = [&](int j, int l, bool up) { return &beyond[((size_t(j) * nv + l) * 2 + up) * words]; };
  for (int e = 0; e < count; ++e)
    for (int j = 0; j < cell; ++j)
      for (int l = 0; l < nv; ++l) {
        const int v = g.level[size_t(e) * cell + j];
        if (v >= l) beyond_set(j, l, true)[e / 64] |= 1ull << (e % 64);
        if (v <= l) beyond_set(j, l, false)[e / 64] |= 1ull << (e % 64);
      }
  std::vector<int> l1s(static_cast<size_t>(count)), order(static_cast<size_t>(count));
  std::vector<int> start(size_t(cell * (nv - 1) + 2));
  std::vector<uint64_t> dominated(words), mask(words);
  std::vector<std::pair<int, int>> chosen;  // (differing values, entry)
  for (int pt = 0; pt < lattice; ++pt) {
    if (g.map[size_t(pt)] != INT32_MIN) continue;
    int p[8];
    for (int j = 0, v = pt; j < cell; ++j, v /= nv) p[j] = v % nv;
    std::fill(start.begin(), start.end(), 0);
    for (int e = 0; e < count; ++e) {
      int l1 = 0;
      for (int j = 0; j < cell; ++j) l1 += std::abs(g.level[size_t(e) * cell + j] - p[j]);
      l1s[size_t(e)] = l1;
      ++start[size_t(l1) + 1];
    }
    for (size_t k = 1; k < start.size(); ++k) start[k] += start[k - 1];
    for (int e = 0; e < count; ++e) order[size_t(start[size_t(l1s[size_t(e)])]++)] = e;
    std::fill(dominated.begin(), dominated.end(), 0);
    chosen.clear();
    for (int e : order) {
      if (dominated[size_t(e) / 64] >> (e % 64) & 1) continue;
      std::fill(mask.begin(), mask.end(), ~0ull);
      int differ = 0;
      for (int j = 0; j < cell; ++j) {
        const int v = g.level[size_t(e) * cell + j];
        if (v == p[j]) continue;
        ++differ;
        const uint64_t* b = beyond_set(j, v, v > p[j]);
        for (size_t w = 0; w < words; ++w) mask[w] &= b[w];
      }
      for (size_t w = 0; w < words; ++w) dominated[w] |= mask[w];
      chosen.emplace_back(differ, e);
    }
    std::sort(chosen.begin(), chosen.end());
    // The list: per count of differing values nd = 1..cell, the number of
    // such entries (2 bytes each, first), then those entries: index (2
    // bytes) and, per differing value, value * radix + level.
    g.map[size_t(pt)] = -1 - int32_t(g.near.size());
    const size_t head = g.near.size();
    g.near.resize(head + 2 * size_t(cell));
    for (const auto& [nd, e] : chosen) {
      const size_t at = head + 2 * size_t(nd - 1);
      const int was = g.near[at] | (g.near[at + 1] << 8);
      g.near[at] = uint8_t(was + 1), g.near[at + 1] = uint8_t((was + 1) >> 8);
      g.near.push_back(uint8_t(e));
      g.near.push_back(uint8_t(e >> 8));
      for (int j = 0; j < cell; ++j) {
        const int l = g.level[size_t(e) * cell + j];
        if (l != p[j]) g.near.push_back(uint8_t(j * nv + l));
      }
    }
  }
  return g;
}

}  // namespace

const Grid& grid_iq2xxs() {
  static const Grid g = build_grid(iq::kIq2xxsGrid, 256, 8, false);
  return g;
}
const Grid& grid_iq2xs() {
  static const Grid g = build_grid(iq::kIq2xsGrid, 512, 8, false);
  return g;
}
const Grid& grid_iq2s() {
  static const Grid g = build_grid(iq::kIq2sGrid, 1024, 8, false);
  return g;
}
const Grid& grid_iq3xxs() {
  static const Grid g = build_grid(iq::kIq3xxsGrid, 256, 4, false);
  return g;
}
const Grid& grid_iq3s() {
  static const Grid g = build_grid(iq::kIq3sGrid, 512, 4, false);
  return g;
}
const Grid& grid_iq1s() {
  static const Grid g = build_grid(iq::kIq1sGrid, 2048, 8, true);
  return g;
}

}  // namespace rf::qimpl::iqs
