// KV cache memory: one allocation split into per-layer K and V arrays.
#include "model/kv_cache.h"

#include "core/error.h"

namespace rf {

size_t KVCache::bytes_per_block(const ModelConfig& c, int32_t block_size, DType type) {
  return 2 * size_t(c.n_layer) * size_t(block_size) * row_bytes(type, uint64_t(c.kv_dim()));
}

KVCache::KVCache(Backend& backend, const ModelConfig& c, int32_t num_blocks, int32_t block_size)
    : backend_(backend), num_blocks_(num_blocks), block_size_(block_size) {
  RF_CHECK(num_blocks > 0 && block_size > 0, "KV cache needs at least one block");
  const DType type = backend.kv_type();
  const size_t per_array = size_t(num_blocks) * size_t(block_size) * row_bytes(type, uint64_t(c.kv_dim()));
  bytes_ = per_array * 2 * size_t(c.n_layer);
  memory_ = backend.alloc(bytes_, "KV cache");
  auto* base = static_cast<uint8_t*>(memory_);
  for (int32_t i = 0; i < c.n_layer; ++i) {
    KVLayer l;
    l.k = base + (2 * size_t(i)) * per_array;
    l.v = base + (2 * size_t(i) + 1) * per_array;
    l.type = type;
    l.num_blocks = num_blocks;
    l.block_size = block_size;
    l.n_kv_heads = c.n_head_kv;
    l.head_dim = c.head_dim;
    layers_.push_back(l);
  }
}

KVCache::~KVCache() { backend_.free(memory_); }

}  // namespace rf
