// BlockPool implementation.
#include "kv/block_pool.h"

#include "core/error.h"
#include "core/rng.h"

namespace rf {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size),
      ref_(size_t(num_blocks), 0),
      hash_(size_t(num_blocks), 0),
      lru_pos_(size_t(num_blocks)),
      in_lru_(size_t(num_blocks), 0) {
  RF_CHECK(num_blocks > 0 && block_size > 0, "BlockPool needs blocks");
  uncached_free_.reserve(size_t(num_blocks));
  for (int32_t b = num_blocks - 1; b >= 0; --b) uncached_free_.push_back(b);
}

int32_t BlockPool::allocate() {
  int32_t b;
  if (!uncached_free_.empty()) {
    b = uncached_free_.back();
    uncached_free_.pop_back();
  } else {
    RF_CHECK(!cached_free_.empty(), "BlockPool: out of blocks");
    b = cached_free_.front();
    cached_free_.pop_front();
    in_lru_[size_t(b)] = 0;
    forget_hash(b);
  }
  ref_[size_t(b)] = 1;
  return b;
}

void BlockPool::retain(int32_t b) {
  RF_CHECK(b >= 0 && b < num_blocks(), "BlockPool: bad block ", b);
  if (ref_[size_t(b)]++ == 0 && in_lru_[size_t(b)]) {
    cached_free_.erase(lru_pos_[size_t(b)]);
    in_lru_[size_t(b)] = 0;
  }
}

void BlockPool::release(int32_t b) {
  RF_CHECK(b >= 0 && b < num_blocks() && ref_[size_t(b)] > 0, "BlockPool: release of free block ", b);
  if (--ref_[size_t(b)] > 0) return;
  if (hash_[size_t(b)] != 0) {
    lru_pos_[size_t(b)] = cached_free_.insert(cached_free_.end(), b);
    in_lru_[size_t(b)] = 1;
  } else {
    uncached_free_.push_back(b);
  }
}

uint64_t BlockPool::chain_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = splitmix64(parent ^ 0x5bd1e995u);
  for (int32_t t : tokens) h = splitmix64(h ^ uint64_t(uint32_t(t)));
  return h == 0 ? 1 : h;  // 0 means "no hash"
}

uint64_t BlockPool::group_key(uint64_t hash, int32_t group) {
  if (group == 0) return hash;
  const uint64_t k = splitmix64(hash ^ (0x9e3779b97f4a7c15ull * uint64_t(uint32_t(group))));
  return k == 0 ? 1 : k;
}

std::optional<int32_t> BlockPool::find(uint64_t key) const {
  auto it = by_hash_.find(key);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> BlockPool::lookup(uint64_t key) {
  const auto b = find(key);
  if (b) retain(*b);
  return b;
}

void BlockPool::set_hash(int32_t b, uint64_t hash) {
  RF_CHECK(b >= 0 && b < num_blocks() && ref_[size_t(b)] > 0, "BlockPool: set_hash on unowned block ", b);
  if (hash_[size_t(b)] == hash) return;
  forget_hash(b);
  // If another block already holds this content, keep the existing mapping.
  if (by_hash_.count(hash)) return;
  hash_[size_t(b)] = hash;
  by_hash_[hash] = b;
}

void BlockPool::forget_hash(int32_t b) {
  const uint64_t h = hash_[size_t(b)];
  if (h == 0) return;
  auto it = by_hash_.find(h);
  hash_[size_t(b)] = 0;
  if (it != by_hash_.end() && it->second == b) {
    by_hash_.erase(it);
    if (on_forget_) on_forget_(h);
  }
}

void BlockPool::clear_cache() {
  for (int32_t b : cached_free_) {
    forget_hash(b);
    in_lru_[size_t(b)] = 0;
    uncached_free_.push_back(b);
  }
  cached_free_.clear();
  for (int32_t b = 0; b < num_blocks(); ++b) forget_hash(b);
}

}  // namespace rf
