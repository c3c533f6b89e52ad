// KVCache: the device memory of the paged KV cache, one K and one V array per
// layer of [num_blocks * block_size slots, n_kv_heads, head_dim], carved out
// of one allocation as kv/memory_plan lays it out. Which sequence owns which
// block is kv/'s business; this class only holds memory.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "kv/memory_plan.h"
#include "model/config.h"

namespace rf {

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
  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  size_t bytes() const { return bytes_; }

 private:
  Backend& backend_;
  std::vector<KVLayer> layers_;
  void* memory_ = nullptr;
  int32_t num_blocks_, block_size_;
  size_t bytes_ = 0;
};

}  // namespace rf
