// BlockPool: the bookkeeping of the paged KV cache's fixed-size blocks (no
// device memory here). Blocks are ref-counted; a full block can carry the
// chained hash of its tokens (prefix caching) so later sequences with the
// same prefix share it. Freed blocks with a hash stay cached and are evicted
// least-recently-freed first, after the free blocks without one. With
// several KV groups (kv/group_layout.h) the same tokens are different
// content in each group: the cache is keyed by group_key(hash, group). A
// listener may be told of every key the cache forgets (a block evicted or
// re-hashed, clear_cache): what is cached beside a block (a hybrid model's
// state checkpoints) goes with it.
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace rf {

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return int32_t(ref_.size()); }
  int32_t block_size() const { return block_size_; }
  // Blocks with no owner (cached ones included: they can be evicted).
  int32_t num_free() const { return int32_t(uncached_free_.size() + cached_free_.size()); }
  int32_t num_cached_free() const { return int32_t(cached_free_.size()); }
  bool can_allocate(int32_t n) const { return n <= num_free(); }

  // Takes a block (evicting the oldest cached one if need be); ref count 1.
  int32_t allocate();
  void retain(int32_t block);
  void release(int32_t block);
  int32_t ref_count(int32_t block) const { return ref_.at(size_t(block)); }

  // Prefix cache. The hash of a full block chains its parent's hash.
  static uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens);
  // The cache key of a block with this chain hash in KV group `group`
  // (group 0: the hash itself).
  static uint64_t group_key(uint64_t hash, int32_t group);
  // The block cached under `key`, not retained; nullopt when not cached.
  std::optional<int32_t> find(uint64_t key) const;
  // find(), retained for the caller.
  std::optional<int32_t> lookup(uint64_t key);
  // Marks a (full, just computed) block as holding content `key`.
  void set_hash(int32_t block, uint64_t key);
  void clear_cache();  // forgets every hash (e.g. after the weights change)
  // Called with each key the cache forgets (null: none).
  void set_forget_listener(std::function<void(uint64_t key)> fn) { on_forget_ = std::move(fn); }

 private:
  void forget_hash(int32_t block);

  int32_t block_size_;
  std::vector<int32_t> ref_;
  std::vector<uint64_t> hash_;  // 0: none
  std::vector<int32_t> uncached_free_;        // stack
  std::list<int32_t> cached_free_;            // LRU: front is oldest
  std::vector<std::list<int32_t>::iterator> lru_pos_;
  std::vector<uint8_t> in_lru_;
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::function<void(uint64_t)> on_forget_;
};

}  // namespace rf
