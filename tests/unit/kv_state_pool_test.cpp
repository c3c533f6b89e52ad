// StatePool (kv/state_pool.h): sequence slots are handed out once each and
// come back; checkpoint rows are reserved, committed under a key, found,
// evicted least recently used first (touch refreshes), dropped by key,
// cancelled, and never handed out while reserved; a duplicate key keeps the
// first copy. And the BlockPool's forget listener, which drops a
// checkpoint with its block: told of evictions, re-hashes and clear_cache.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "kv/block_pool.h"
#include "kv/state_pool.h"

namespace rf {
namespace {

TEST(StatePool, SlotsAreHandedOutOnceAndComeBack) {
  StatePool p(3, 2);
  EXPECT_EQ(p.n_rows(), 5);
  std::set<int32_t> got;
  for (int i = 0; i < 3; ++i) got.insert(p.acquire_slot());
  EXPECT_EQ(got, (std::set<int32_t>{0, 1, 2}));
  EXPECT_FALSE(p.has_free_slot());
  EXPECT_THROW(p.acquire_slot(), Error);
  p.release_slot(1);
  EXPECT_THROW(p.release_slot(1), Error);  // twice
  EXPECT_THROW(p.release_slot(3), Error);  // a checkpoint row
  EXPECT_EQ(p.acquire_slot(), 1);
}

TEST(StatePool, CheckpointsAreCommittedFoundAndEvictedLeastRecentlyUsed) {
  StatePool p(1, 2);
  const int32_t a = p.reserve(), b = p.reserve();
  EXPECT_GE(a, 1);
  EXPECT_GE(b, 1);
  EXPECT_NE(a, b);
  EXPECT_EQ(p.reserve(), -1);  // both reserved: nothing to evict
  EXPECT_FALSE(p.find(11));    // not valid before the commit
  p.commit(a, 11);
  p.commit(b, 22);
  EXPECT_EQ(p.find(11), a);
  EXPECT_EQ(p.find(22), b);
  p.touch(a);  // 22 is now the least recently used
  const int32_t c = p.reserve();
  EXPECT_EQ(c, b);
  EXPECT_FALSE(p.find(22));
  EXPECT_EQ(p.num_evictions(), 1u);
  p.cancel(c);
  EXPECT_EQ(p.num_checkpoints(), 1);
  EXPECT_EQ(p.num_reserved(), 0);
  // A duplicate commit keeps the first copy and frees its row.
  const int32_t d = p.reserve();
  p.commit(d, 11);
  EXPECT_EQ(p.find(11), a);
  EXPECT_EQ(p.num_checkpoints(), 1);
  p.drop(11);
  EXPECT_FALSE(p.find(11));
  p.drop(11);  // unknown keys are ignored
  EXPECT_THROW(p.commit(a, 5), Error);  // not reserved
  // Without checkpoint rows nothing is reserved.
  StatePool none(2, 0);
  EXPECT_EQ(none.reserve(), -1);
}

TEST(StatePool, TheBlockPoolTellsWhichKeysItForgets) {
  BlockPool pool(2, 4);
  std::vector<uint64_t> forgotten;
  pool.set_forget_listener([&](uint64_t k) { forgotten.push_back(k); });
  const int32_t x = pool.allocate(), y = pool.allocate();
  pool.set_hash(x, 100);
  pool.set_hash(y, 200);
  pool.set_hash(y, 201);  // re-hashed: 200 is gone
  EXPECT_EQ(forgotten, (std::vector<uint64_t>{200}));
  pool.release(x);
  pool.release(y);
  pool.allocate();  // evicts the least recently freed: x (100)
  EXPECT_EQ(forgotten, (std::vector<uint64_t>{200, 100}));
  pool.clear_cache();
  EXPECT_EQ(forgotten, (std::vector<uint64_t>{200, 100, 201}));
}

}  // namespace
}  // namespace rf
