// The lattice tables of the low-bit i-quant grids (core/quant_iq_search.h,
// iqs::Grid): each grid entry's level indices, and for every point of the
// full lattice (levels^cell points) the entry at that point or the list of
// entries near it. Built once per grid on first use (thread-safe).
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/iq_grids.h"
#include "core/quant_iq_search.h"

namespace rf::qimpl::iqs {
namespace {

// Shells of distances (in level steps) from an off-grid lattice point whose
// entries are compared: the nearest entries and those one shell further.
constexpr int kShells = 2;

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
  // Every off-grid point: the distances (squared, in level steps) to every
  // entry, their histogram for the shells, then the list.
  std::vector<int> dist(static_cast<size_t>(count));
  std::vector<int> hist(size_t(cell * (nv - 1) * (nv - 1) + 1));
  std::vector<std::pair<int, int>> chosen;  // (differing values, entry)
  for (int pt = 0; pt < lattice; ++pt) {
    if (g.map[size_t(pt)] != INT32_MIN) continue;
    int p[8];
    for (int j = 0, v = pt; j < cell; ++j, v /= nv) p[j] = v % nv;
    std::fill(hist.begin(), hist.end(), 0);
    for (int e = 0; e < count; ++e) {
      const uint8_t* L = &g.level[size_t(e) * cell];
      int d2 = 0;
      for (int j = 0; j < cell; ++j) d2 += (p[j] - L[j]) * (p[j] - L[j]);
      dist[size_t(e)] = d2;
      ++hist[size_t(d2)];
    }
    int limit = 0;
    for (int shells = 0; limit < int(hist.size()); ++limit)
      if (hist[size_t(limit)] && ++shells == kShells) break;
    chosen.clear();
    for (int e = 0; e < count; ++e) {
      if (dist[size_t(e)] > limit) continue;
      int differ = 0;
      for (int j = 0; j < cell; ++j) differ += g.level[size_t(e) * cell + j] != p[j];
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
