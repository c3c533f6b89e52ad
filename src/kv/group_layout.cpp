// KVGroupLayout: grouping the layers by attention kind, and the block
// counts that follow from it.
#include "kv/group_layout.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace rf {

KVGroupLayout::KVGroupLayout(std::vector<int32_t> layer_windows, std::vector<uint8_t> no_kv)
    : layer_windows_(std::move(layer_windows)) {
  RF_CHECK(!layer_windows_.empty(), "KV group layout: no layers");
  RF_CHECK(no_kv.empty() || no_kv.size() == layer_windows_.size(), "KV group layout: ", no_kv.size(),
           " no-KV flags for ", layer_windows_.size(), " layers");
  std::vector<int32_t> kinds;  // distinct windows, in order of first appearance
  std::vector<std::vector<int32_t>> kind_layers;
  for (int32_t il = 0; il < n_layer(); ++il) {
    const int32_t w = layer_windows_[size_t(il)];
    RF_CHECK(w >= 0, "KV group layout: layer ", il, " has window ", w);
    if (!no_kv.empty() && no_kv[size_t(il)]) continue;
    auto it = std::find(kinds.begin(), kinds.end(), w);
    if (it == kinds.end()) {
      kinds.push_back(w);
      kind_layers.emplace_back();
      it = kinds.end() - 1;
    }
    kind_layers[size_t(it - kinds.begin())].push_back(il);
  }
  RF_CHECK(!kinds.empty(), "KV group layout: no layer keeps KV");
  group_size_ = 0;
  for (const auto& ls : kind_layers) group_size_ = std::gcd(group_size_, int32_t(ls.size()));
  group_of_.assign(size_t(n_layer()), -1);
  index_.assign(size_t(n_layer()), -1);
  for (size_t k = 0; k < kinds.size(); ++k) {
    const auto& ls = kind_layers[k];
    for (size_t i = 0; i < ls.size(); ++i) {
      if (i % size_t(group_size_) == 0) group_windows_.push_back(kinds[k]);
      group_of_[size_t(ls[i])] = n_groups() - 1;
      index_[size_t(ls[i])] = int32_t(i % size_t(group_size_));
      group_layers_.push_back(ls[i]);
    }
  }
}

std::span<const int32_t> KVGroupLayout::layers(int32_t g) const {
  return std::span<const int32_t>(group_layers_).subspan(size_t(g) * size_t(group_size_), size_t(group_size_));
}

int32_t KVGroupLayout::n_window_groups() const {
  return int32_t(std::count_if(group_windows_.begin(), group_windows_.end(), [](int32_t w) { return w > 0; }));
}

int64_t window_blocks_bound(int32_t window, int32_t max_chunk, int32_t block_size) {
  // A chunk [s, s + n) reads keys from max(0, s - window + 1) to s + n - 1:
  // a span of at most n + window - 2 positions, so at most that / bs + 2 blocks.
  return (int64_t(max_chunk) + window - 2) / block_size + 2;
}

int64_t KVGroupLayout::max_blocks_per_sequence(int32_t n_tokens, int32_t block_size, int32_t max_chunk) const {
  RF_CHECK(block_size > 0, "KV group layout: block size ", block_size);
  const int64_t all = (int64_t(n_tokens) + block_size - 1) / block_size;
  const int32_t chunk = max_chunk > 0 ? std::min(max_chunk, n_tokens) : n_tokens;
  int64_t total = 0;
  for (int32_t w : group_windows_) total += w > 0 ? std::min(all, window_blocks_bound(w, chunk, block_size)) : all;
  return total;
}

int32_t KVGroupLayout::max_tokens_for_blocks(int64_t num_blocks, int32_t block_size, int32_t max_chunk) const {
  // The block count grows with the length: the largest length that fits.
  int64_t lo = 0, hi = int64_t(1) << 30;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (max_blocks_per_sequence(int32_t(mid), block_size, max_chunk) <= num_blocks) lo = mid;
    else hi = mid - 1;
  }
  return int32_t(lo);
}

std::string KVGroupLayout::summary() const {
  std::string s = str(n_groups(), n_groups() == 1 ? " group" : " groups", " of ", group_size_, " layers: ");
  const int32_t without = n_layer() - n_kv_layers();
  std::vector<int32_t> seen;
  for (int32_t w : group_windows_) {
    if (std::find(seen.begin(), seen.end(), w) != seen.end()) continue;
    seen.push_back(w);
    const auto n = std::count(group_windows_.begin(), group_windows_.end(), w);
    s += str(seen.size() > 1 ? ", " : "", n, w > 0 ? str(" window ", w) : std::string(" full"));
  }
  if (without > 0) s += str(" (", without, without == 1 ? " layer" : " layers", " without KV)");
  return s;
}

}  // namespace rf
