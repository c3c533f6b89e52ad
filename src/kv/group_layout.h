// KVGroupLayout: how a model's layers share KV blocks (DESIGN.md, kv/:
// "block groups per attention kind"). Layers are split into groups of g
// layers of one attention kind each (full attention, or one sliding window
// size); g is the gcd of the kinds' layer counts, so every group has the
// same size and one block of the pool holds g layers' K/V for block_size
// tokens, whichever group takes it. A sequence has one block table per
// group: full groups keep every block, window groups only those the window
// still reaches (kv/block_table.h). Layer il uses the K/V array pair
// index_in_group(il) with its group's block table. Layers that keep no KV
// (the recurrent layers of hybrid models, whose state lives in the state
// rows of the memory plan) belong to no group: group_of is -1 for them, and
// the groups are made of the other layers.
// Pure description, built from the per-layer windows; no device memory here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace rf {

class KVGroupLayout {
 public:
  KVGroupLayout() = default;
  // layer_windows[il]: the sliding window of layer il (0: full attention);
  // no_kv[il] (empty: none): 1 where layer il keeps no KV. Groups are
  // numbered by kind in order of first appearance, then by layer. At least
  // one layer must keep KV.
  explicit KVGroupLayout(std::vector<int32_t> layer_windows, std::vector<uint8_t> no_kv = {});

  int32_t n_layer() const { return int32_t(layer_windows_.size()); }
  bool has_kv(int32_t il) const { return group_of_[size_t(il)] >= 0; }
  int32_t n_kv_layers() const { return n_groups() * group_size_; }
  int32_t n_groups() const { return int32_t(group_windows_.size()); }
  int32_t group_size() const { return group_size_; }  // g: layers per group
  int32_t group_of(int32_t il) const { return group_of_[size_t(il)]; }        // -1: no KV
  int32_t index_in_group(int32_t il) const { return index_[size_t(il)]; }    // -1: no KV
  // The group's sliding window; 0: full attention.
  int32_t window(int32_t g) const { return group_windows_[size_t(g)]; }
  const std::vector<int32_t>& group_windows() const { return group_windows_; }
  std::span<const int32_t> layers(int32_t g) const;
  int32_t n_window_groups() const;

  // The most blocks one sequence of n_tokens holds at any step when chunks
  // have at most max_chunk new tokens (full groups: all its blocks; window
  // groups: the window and a chunk).
  int64_t max_blocks_per_sequence(int32_t n_tokens, int32_t block_size, int32_t max_chunk) const;
  // The longest sequence whose max_blocks_per_sequence fits in num_blocks.
  int32_t max_tokens_for_blocks(int64_t num_blocks, int32_t block_size, int32_t max_chunk) const;
  // "3 groups of 2 layers: 2 window 8, 1 full".
  std::string summary() const;

 private:
  std::vector<int32_t> layer_windows_;  // [n_layer]
  std::vector<int32_t> group_windows_;  // [n_groups]
  std::vector<int32_t> group_layers_;   // [n_groups, group_size]: the layers of each group
  std::vector<int32_t> group_of_, index_;  // [n_layer]; -1 for layers without KV
  int32_t group_size_ = 0;
};

// Blocks a window group needs for one chunk of at most max_chunk tokens
// (kv/block_table.h: from the block of the chunk's first visible key to the
// block of its last token).
int64_t window_blocks_bound(int32_t window, int32_t max_chunk, int32_t block_size);

}  // namespace rf
