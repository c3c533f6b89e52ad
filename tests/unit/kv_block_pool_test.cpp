// BlockPool: ref counts, the free lists (uncached blocks before cached
// ones), least-recently-freed eviction of cached blocks, prefix lookups,
// clear_cache and the chained block hash.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/error.h"
#include "kv/block_pool.h"

namespace rf {
namespace {

uint64_t hash_of(uint64_t parent, std::vector<int32_t> toks) { return BlockPool::chain_hash(parent, toks); }

void expect_all_free(const BlockPool& pool) {
  EXPECT_EQ(pool.num_free(), pool.num_blocks());
  for (int32_t b = 0; b < pool.num_blocks(); ++b) EXPECT_EQ(pool.ref_count(b), 0) << "block " << b;
}

TEST(BlockPool, AllocateRetainRelease) {
  BlockPool pool(4, 16);
  EXPECT_EQ(pool.num_blocks(), 4);
  EXPECT_EQ(pool.block_size(), 16);
  expect_all_free(pool);
  std::set<int32_t> got;
  for (int i = 0; i < 4; ++i) {
    const int32_t b = pool.allocate();
    EXPECT_EQ(pool.ref_count(b), 1);
    got.insert(b);
  }
  EXPECT_EQ(got, (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_FALSE(pool.can_allocate(1));
  EXPECT_TRUE(pool.can_allocate(0));
  EXPECT_THROW(pool.allocate(), Error);

  pool.retain(2);
  EXPECT_EQ(pool.ref_count(2), 2);
  pool.release(2);
  EXPECT_EQ(pool.ref_count(2), 1);
  EXPECT_EQ(pool.num_free(), 0);  // still owned once
  for (int32_t b : got) pool.release(b);
  expect_all_free(pool);
  EXPECT_THROW(pool.release(0), Error);   // already free
  EXPECT_THROW(pool.retain(4), Error);    // out of range
  EXPECT_THROW(pool.release(-1), Error);
  EXPECT_THROW(BlockPool(0, 16), Error);
  EXPECT_THROW(BlockPool(4, 0), Error);
}

TEST(BlockPool, UnhashedFreeBlocksAreReusedMostRecentFirst) {
  BlockPool pool(3, 4);
  const int32_t a = pool.allocate(), b = pool.allocate();
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.num_cached_free(), 0);
  EXPECT_EQ(pool.allocate(), b);  // a stack: the last freed comes back first
  EXPECT_EQ(pool.allocate(), a);
}

TEST(BlockPool, HashedBlocksStayCachedAndAreFoundByLookup) {
  BlockPool pool(4, 2);
  const uint64_t h0 = hash_of(0, {5, 6}), h1 = hash_of(h0, {7, 8});
  const int32_t b0 = pool.allocate(), b1 = pool.allocate();
  pool.set_hash(b0, h0);
  pool.set_hash(b1, h1);
  // While owned, a lookup shares the block.
  auto hit = pool.lookup(h0);
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, b0);
  EXPECT_EQ(pool.ref_count(b0), 2);
  pool.release(b0);
  pool.release(b0);
  pool.release(b1);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.num_cached_free(), 2);
  // Freed, they are still found; a lookup takes them out of the free list.
  hit = pool.lookup(h1);
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, b1);
  EXPECT_EQ(pool.ref_count(b1), 1);
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(pool.num_cached_free(), 1);
  EXPECT_FALSE(pool.lookup(hash_of(0, {5, 7})));
  // find() looks without retaining.
  EXPECT_EQ(pool.find(h1), b1);
  EXPECT_EQ(pool.ref_count(b1), 1);
  EXPECT_FALSE(pool.find(hash_of(0, {5, 7})));
  pool.release(b1);
  expect_all_free(pool);
}

TEST(BlockPool, EvictsUncachedFirstThenLeastRecentlyFreed) {
  BlockPool pool(5, 1);
  std::vector<int32_t> blocks;
  std::vector<uint64_t> hashes;
  for (int i = 0; i < 4; ++i) {
    blocks.push_back(pool.allocate());
    hashes.push_back(hash_of(0, {i}));
    pool.set_hash(blocks.back(), hashes.back());
  }
  // Free order: 2, 0, 3, 1 (so 2 is the least recently freed).
  for (int i : {2, 0, 3, 1}) pool.release(blocks[size_t(i)]);
  EXPECT_EQ(pool.num_free(), 5);
  EXPECT_EQ(pool.num_cached_free(), 4);
  // The one block that never had a hash goes first; nothing is evicted.
  const int32_t plain = pool.allocate();
  EXPECT_EQ(std::count(blocks.begin(), blocks.end(), plain), 0);
  EXPECT_EQ(pool.num_cached_free(), 4);
  // Then the cached ones, least recently freed first.
  EXPECT_EQ(pool.allocate(), blocks[2]);
  EXPECT_FALSE(pool.lookup(hashes[2]));  // evicted: its hash is gone
  EXPECT_EQ(pool.allocate(), blocks[0]);
  EXPECT_FALSE(pool.lookup(hashes[0]));
  // A lookup refreshes block 3: released again, it becomes the most recent.
  ASSERT_TRUE(pool.lookup(hashes[3]));
  pool.release(blocks[3]);
  EXPECT_EQ(pool.allocate(), blocks[1]);
  EXPECT_EQ(pool.allocate(), blocks[3]);
  EXPECT_EQ(pool.num_free(), 0);
  // An evicted block comes back without its hash: freed, it is not cached.
  pool.release(blocks[3]);
  EXPECT_EQ(pool.num_cached_free(), 0);
  EXPECT_FALSE(pool.lookup(hashes[3]));
  for (int32_t b : {plain, blocks[2], blocks[0], blocks[1]}) pool.release(b);
  expect_all_free(pool);
}

TEST(BlockPool, DuplicateContentKeepsTheFirstBlock) {
  BlockPool pool(3, 2);
  const uint64_t h = hash_of(0, {1, 2});
  const int32_t a = pool.allocate(), b = pool.allocate();
  pool.set_hash(a, h);
  pool.set_hash(b, h);  // same content computed twice
  auto hit = pool.lookup(h);
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, a);
  pool.release(a);
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.num_cached_free(), 1);  // b was never registered
  // Re-hashing a block moves it: its old content is no longer found.
  const int32_t c = pool.allocate();
  const uint64_t h2 = hash_of(0, {3, 4}), h3 = hash_of(0, {5, 6});
  pool.set_hash(c, h2);
  pool.set_hash(c, h3);
  EXPECT_FALSE(pool.lookup(h2));
  auto hit3 = pool.lookup(h3);
  ASSERT_TRUE(hit3);
  pool.release(*hit3);
  pool.release(c);
  expect_all_free(pool);
  EXPECT_THROW(pool.set_hash(c, h2), Error);  // not owned
}

TEST(BlockPool, ClearCacheForgetsEveryHash) {
  BlockPool pool(4, 2);
  const uint64_t h0 = hash_of(0, {1, 1}), h1 = hash_of(0, {2, 2});
  const int32_t a = pool.allocate(), b = pool.allocate();
  pool.set_hash(a, h0);
  pool.set_hash(b, h1);
  pool.release(a);  // cached free; b stays owned
  EXPECT_EQ(pool.num_cached_free(), 1);
  pool.clear_cache();
  EXPECT_EQ(pool.num_cached_free(), 0);
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_FALSE(pool.lookup(h0));
  EXPECT_FALSE(pool.lookup(h1));
  pool.release(b);  // its hash was forgotten too: not cached when freed
  EXPECT_EQ(pool.num_cached_free(), 0);
  expect_all_free(pool);
  // The pool is fully usable afterwards, and cleared blocks can be re-hashed.
  std::vector<int32_t> all;
  for (int i = 0; i < 4; ++i) all.push_back(pool.allocate());
  pool.set_hash(all[0], h0);
  for (int32_t x : all) pool.release(x);
  EXPECT_TRUE(pool.lookup(h0));
}

TEST(BlockPool, ChainHash) {
  const std::vector<int32_t> t1 = {1, 2, 3, 4}, t2 = {1, 2, 3, 5}, t3 = {2, 1, 3, 4};
  const uint64_t a = BlockPool::chain_hash(0, t1);
  EXPECT_EQ(a, BlockPool::chain_hash(0, t1));  // deterministic
  EXPECT_NE(a, 0u);                            // 0 means "no hash"
  EXPECT_NE(a, BlockPool::chain_hash(0, t2));  // content
  EXPECT_NE(a, BlockPool::chain_hash(0, t3));  // order
  EXPECT_NE(a, BlockPool::chain_hash(1, t1));  // parent
  // Chained: the same block after different prefixes hashes differently.
  EXPECT_NE(BlockPool::chain_hash(BlockPool::chain_hash(0, t1), t2),
            BlockPool::chain_hash(BlockPool::chain_hash(0, t3), t2));
  // Length matters (a shorter block is not a prefix match).
  EXPECT_NE(a, BlockPool::chain_hash(0, std::span<const int32_t>(t1.data(), 3)));
  // Negative and large ids are distinct.
  EXPECT_NE(hash_of(0, {-1}), hash_of(0, {int32_t(0x7fffffff)}));
  // No collisions over a few thousand small blocks.
  std::set<uint64_t> seen;
  for (int32_t i = 0; i < 64; ++i)
    for (int32_t j = 0; j < 64; ++j) seen.insert(hash_of(uint64_t(i), {i, j}));
  EXPECT_EQ(seen.size(), 64u * 64u);
}

}  // namespace
}  // namespace rf
