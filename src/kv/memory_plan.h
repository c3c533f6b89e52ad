// KV memory plan: the one place that decides how large the paged KV cache is
// and how its memory is laid out. Geometry (the KV group layout, bytes of
// one token's K or V row, block size) and a budget go in; the number of
// blocks and the byte offsets of the K and V arrays come out. One block
// holds block_size tokens of the g layers of one KV group
// (kv/group_layout.h), so there are 2 * g arrays (g for a K-only MLA
// cache) of [num_blocks *
// block_size slots] rows, and layer il uses the pair index_in_group(il)
// with its group's block ids (a single group of every layer: one pair per
// layer, as without groups). Hybrid models also keep recurrent-state rows
// (one per sequence slot and one per prefix checkpoint, every recurrent
// layer's state in each): their bytes are planned here too, counted in the
// same budget before the blocks. The engine sizes its cache with it and
// the device memory (model/kv_cache) is carved by it.
// Pure arithmetic: no device memory here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv/group_layout.h"

namespace rf {

struct KVGeometry {
  KVGroupLayout groups;
  // One token's K (or V) row of one layer: n_kv_heads * head_dim elements
  // (and their scales in an 8-bit cache).
  size_t row_bytes = 0;
  int32_t block_size = 0;
  // Hybrid models: one recurrent-state row (every recurrent layer's conv
  // and delta-rule state of one sequence); 0 without recurrent layers.
  size_t state_row_bytes = 0;
  // Arrays per layer: 2 (K and V), or 1 (K only: multi-head latent
  // attention's compressed cache, whose one row per token and layer is the
  // latent c and the shared RoPE key, V being the front of it).
  int32_t arrays_per_layer = 2;

  int32_t group_size() const { return groups.group_size(); }
  // One token's bytes in one layer (K and V, or the one compressed row).
  size_t token_bytes() const { return size_t(arrays_per_layer) * row_bytes; }
  size_t bytes_per_block() const { return size_t(group_size()) * size_t(block_size) * token_bytes(); }
  // The K and V bytes one token's attention reads over `context` tokens, in
  // every layer (a sliding-window layer: the last `window` of them).
  size_t bytes_read(int32_t context) const;
};

// Where the blocks come from, first match wins: an explicit block count; an
// explicit byte budget; a share of device memory (total * utilization, less
// what is already allocated and a reserve for graphs and library state);
// else a host default of max_seqs full contexts, at most 4 GiB (a full
// context: KVGroupLayout::max_blocks_per_sequence of max_model_len tokens
// in chunks of max_chunk). The state rows (state_rows of them, hybrid
// models) come out of an explicit byte budget or the device share first;
// with a block count or the host default they are extra.
struct KVBudget {
  int32_t num_blocks = 0;
  size_t kv_bytes = 0;
  float memory_utilization = 0;
  size_t device_total = 0;
  size_t device_used = 0;
  int32_t max_seqs = 0;
  int32_t max_model_len = 0;
  int32_t max_chunk = 0;  // tokens per step (0: max_model_len)
  int32_t state_rows = 0;  // recurrent-state rows (sequence slots + prefix checkpoints; hybrid models)
};

inline constexpr size_t kDeviceReserveBytes = size_t(512) << 20;  // CUDA graphs, library workspaces
inline constexpr size_t kHostDefaultMaxBytes = size_t(4) << 30;

class KVMemoryPlan {
 public:
  // Throws rf::Error when the budget holds no block.
  KVMemoryPlan(const KVGeometry& g, const KVBudget& budget);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return geometry_.block_size; }
  const KVGeometry& geometry() const { return geometry_; }
  // One K or V array: [num_blocks * block_size slots] rows.
  size_t array_bytes() const { return size_t(num_blocks_) * size_t(geometry_.block_size) * geometry_.row_bytes; }
  size_t total_bytes() const {  // the KV arrays
    return size_t(geometry_.arrays_per_layer) * size_t(geometry_.group_size()) * array_bytes();
  }
  // The recurrent-state rows (hybrid models; 0 otherwise), allocated apart
  // from the KV arrays.
  int32_t state_rows() const { return state_rows_; }
  size_t state_bytes() const { return size_t(state_rows_) * geometry_.state_row_bytes; }
  // The arrays of index j within a group (KVGroupLayout::index_in_group);
  // a K-only cache has no V arrays (v_offset is then k_offset).
  size_t k_offset(int32_t j) const { return size_t(geometry_.arrays_per_layer) * size_t(j) * array_bytes(); }
  size_t v_offset(int32_t j) const {
    return (size_t(geometry_.arrays_per_layer) * size_t(j) + size_t(geometry_.arrays_per_layer - 1)) * array_bytes();
  }

 private:
  KVGeometry geometry_;
  int32_t num_blocks_ = 0;
  int32_t state_rows_ = 0;
};

}  // namespace rf
