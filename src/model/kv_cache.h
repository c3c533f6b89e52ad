// KVCache: the device memory of the paged KV cache, carved out of one
// allocation as kv/memory_plan lays it out: 2 * g arrays (K and V for each
// index within a KV group, kv/group_layout.h) of [num_blocks * block_size
// slots, n_kv_heads, head_dim]; layer il sees the pair of its index in its
// group. Which sequence owns which block, in which group, is kv/'s
// business; this class only holds memory. Also the model's KV group layout
// and geometry, from its per-layer sliding windows.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "kv/group_layout.h"
#include "kv/memory_plan.h"
#include "model/config.h"

namespace rf {

// The model's layers grouped by attention kind (window per layer: the
// sliding window on is_swa layers, else 0).
KVGroupLayout kv_group_layout(const ModelConfig& c);
// The KV geometry of a model whose cache holds `type` elements.
KVGeometry kv_geometry(const ModelConfig& c, DType type, int32_t block_size);

class KVCache {
 public:
  // `plan` must have been made from kv_geometry(c, backend.kv_type(), ...).
  KVCache(Backend& backend, const ModelConfig& c, const KVMemoryPlan& plan);
  ~KVCache();
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  const KVLayer& layer(int32_t i) const { return layers_[size_t(i)]; }
  const KVGroupLayout& groups() const { return groups_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  size_t bytes() const { return bytes_; }

 private:
  Backend& backend_;
  KVGroupLayout groups_;
  std::vector<KVLayer> layers_;
  void* memory_ = nullptr;
  int32_t num_blocks_, block_size_;
  size_t bytes_ = 0;
};

}  // namespace rf
