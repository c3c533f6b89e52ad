// KV cache memory: one allocation split into per-layer K and V arrays.
#include "model/kv_cache.h"

#include "core/error.h"

namespace rf {

KVGeometry kv_geometry(const ModelConfig& c, DType type, int32_t block_size) {
  return KVGeometry{c.n_layer, row_bytes(type, uint64_t(c.kv_dim())), block_size};
}

KVCache::KVCache(Backend& backend, const ModelConfig& c, const KVMemoryPlan& plan)
    : backend_(backend), num_blocks_(plan.num_blocks()), block_size_(plan.block_size()) {
  const DType type = backend.kv_type();
  const KVGeometry want = kv_geometry(c, type, block_size_);
  RF_CHECK(plan.geometry().n_layer == want.n_layer && plan.geometry().row_bytes == want.row_bytes,
           "KV cache: the memory plan was made for another model or element type");
  bytes_ = plan.total_bytes();
  memory_ = backend.alloc(bytes_, "KV cache");
  auto* base = static_cast<uint8_t*>(memory_);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    KVLayer l;
    l.k = base + plan.k_offset(i);
    l.v = base + plan.v_offset(i);
    l.type = type;
    l.num_blocks = num_blocks_;
    l.block_size = block_size_;
    l.n_kv_heads = c.n_head_kv;
    l.head_dim = c.head_dim;
    layers_.push_back(l);
  }
}

KVCache::~KVCache() { backend_.free(memory_); }

}  // namespace rf
