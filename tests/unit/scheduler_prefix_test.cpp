// Scheduler prefix caching: a sequence sharing full blocks with an earlier
// (running or finished) one skips them; hits never cover the last token;
// shared blocks are ref-counted and never written; freed cached blocks are
// evicted least recently freed first and reused. The simulator checks the
// KV content read through every shared block.
#include <gtest/gtest.h>

#include "unit/scheduler_sim.h"

namespace rf {
namespace {

using test::iota_tokens;
using test::SchedSim;

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
// The first entry of the next step (a failure when the step is empty).
ScheduledSeq step_first(SchedSim& sim) {
  const auto s = sim.step();
  if (s.empty()) {
    ADD_FAILURE() << "empty step";
    return {nullptr, -1, -1, false};
  }
  return s[0];
}
std::vector<int32_t> head(const std::vector<int32_t>& v, size_t n) { return {v.begin(), v.begin() + long(n)}; }

TEST(SchedulerPrefix, HitsSkipCachedFullBlocks) {
  SchedSim sim({8, 64, true}, 32, 4);
  const auto pa = iota_tokens(10, 100);
  Sequence* a = sim.add(pa, 2);
  const auto s0 = sim.step();
  ASSERT_EQ(s0.size(), 1u);
  const std::vector<int32_t> a_blocks = a->tables[0].blocks;
  sim.run();
  // A's prompt is done: blocks 0 and 1 (positions 0-7) are full and cached.
  EXPECT_EQ(sim.pool().num_cached_free(), 2);

  // B shares A's first 8 tokens: starts at 8, on A's two blocks.
  Sequence* b = sim.add(concat(head(pa, 8), iota_tokens(3, 500)), 2);
  const auto sb = sim.step();
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_EQ(sb[0].start, 8);
  EXPECT_EQ(sb[0].n_new, 3);
  EXPECT_EQ(sim.entry(b).n_cached, 8);
  EXPECT_EQ(b->tables[0].blocks[0], a_blocks[0]);
  EXPECT_EQ(b->tables[0].blocks[1], a_blocks[1]);
  sim.run();

  // C is exactly A's first 8 tokens: a hit may not cover its last token,
  // so only one block is taken and positions 4-7 are computed again.
  Sequence* c = sim.add(head(pa, 8), 1);
  const auto sc = sim.step();
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].start, 4);
  EXPECT_EQ(sc[0].n_new, 4);
  EXPECT_EQ(sim.entry(c).n_cached, 4);

  // D diverges inside the first block: no hit at all.
  auto pd = pa;
  pd[2] = 9;
  Sequence* d = sim.add(pd, 1);
  EXPECT_EQ(step_first(sim).start, 0);
  EXPECT_EQ(sim.entry(d).n_cached, 0);

  // E diverges in the second block: one block.
  auto pe = pa;
  pe[6] = 9;
  Sequence* e = sim.add(pe, 1);
  EXPECT_EQ(step_first(sim).start, 4);
  EXPECT_EQ(sim.entry(e).n_cached, 4);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerPrefix, GeneratedTokensAreCachedToo) {
  // A's prompt (6) + 5 generated = 11 tokens, 10 computed: blocks 0 and 1
  // (positions 0-7, partly generated) are cached. A follow-up turn that
  // repeats the whole conversation hits both.
  SchedSim sim({8, 64, true}, 32, 4);
  Sequence* a = sim.add(iota_tokens(6, 100), 5);
  sim.run();
  Sequence* b = sim.add(concat(a->tokens, iota_tokens(2, 900)), 1);
  const auto s = sim.step();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].start, 8);
  EXPECT_EQ(sim.entry(b).n_cached, 8);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerPrefix, SharingWithARunningSequence) {
  SchedSim sim({8, 64, true}, 32, 4);
  const auto pe = iota_tokens(12, 100);
  Sequence* e = sim.add(pe, 6);
  sim.step();  // E's 12 prompt tokens: 3 full blocks, registered
  Sequence* f = sim.add(concat(pe, {7, 8}), 3);
  Sequence* g = sim.add(pe, 3);  // the same prompt: hits stop before its last token
  const auto s = sim.step();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].seq, f);
  EXPECT_EQ(s[1].start, 12);
  EXPECT_EQ(s[2].seq, g);
  EXPECT_EQ(s[2].start, 8);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(f->tables[0].blocks[size_t(i)], e->tables[0].blocks[size_t(i)]);
    EXPECT_EQ(g->tables[0].blocks[size_t(i)], e->tables[0].blocks[size_t(i)]);
    EXPECT_EQ(sim.pool().ref_count(e->tables[0].blocks[size_t(i)]), 3);
  }
  EXPECT_EQ(f->tables[0].blocks[2], e->tables[0].blocks[2]);
  EXPECT_NE(g->tables[0].blocks[2], e->tables[0].blocks[2]);  // G writes its own 3rd block
  EXPECT_EQ(sim.pool().ref_count(e->tables[0].blocks[2]), 2);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerPrefix, SameStepDuplicatesComputeTwiceAndCacheOnce) {
  SchedSim sim({8, 64, true}, 16, 4);
  const auto p = iota_tokens(9, 100);
  Sequence* a = sim.add(p, 2);
  Sequence* b = sim.add(p, 2);
  const auto s = sim.step();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].start, 0);  // nothing was cached yet
  EXPECT_NE(a->tables[0].blocks[0], b->tables[0].blocks[0]);
  sim.run();
  // Only A's copies are registered; B's duplicates are plain free blocks.
  EXPECT_EQ(sim.pool().num_cached_free(), 2);
  Sequence* c = sim.add(p, 1);
  sim.step();
  EXPECT_EQ(sim.entry(c).n_cached, 8);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerPrefix, EvictionIsLeastRecentlyFreedAndBlocksAreReused) {
  // 8 blocks of 4.
  SchedSim sim({8, 64, true}, 8, 4);
  const auto pa = iota_tokens(8, 100), pb = iota_tokens(8, 200), pc = iota_tokens(20, 300);
  sim.add(pa, 1);
  sim.run();
  sim.add(pb, 1);
  sim.run();
  // Cached, least recently freed first: A1, A0 (freed tail first), B1, B0.
  EXPECT_EQ(sim.pool().num_cached_free(), 4);
  // C needs 5 blocks: the 4 never-cached ones, then it evicts A1.
  sim.add(pc, 1);
  sim.run();
  EXPECT_EQ(sim.pool().num_cached_free(), 8);  // A0, B1, B0 and C's 5
  EXPECT_EQ(sim.pool().num_free(), 8);
  // D repeats A's prompt: A0 survived, A1 did not.
  Sequence* d = sim.add(concat(pa, {1}), 1);
  sim.step();
  EXPECT_EQ(sim.entry(d).n_cached, 4);
  // D took 2 more blocks, evicting B1 and B0 (the oldest after A0): B's
  // prompt misses entirely. E then evicts C's last two blocks (C4, C3).
  Sequence* e = sim.add(concat(pb, {1}), 1);
  sim.step();
  EXPECT_EQ(sim.entry(e).n_cached, 0);
  Sequence* f = sim.add(concat(pc, {1}), 1);
  sim.run();
  EXPECT_EQ(sim.entry(f).n_cached, 12);  // C's first 3 blocks; E evicted its last 2
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerPrefix, DisabledMeansNoHits) {
  SchedSim sim({8, 64, false}, 16, 4);
  const auto p = iota_tokens(9, 100);
  sim.add(p, 1);
  sim.run();
  Sequence* b = sim.add(p, 1);
  EXPECT_EQ(step_first(sim).start, 0);
  EXPECT_EQ(sim.entry(b).n_cached, 0);
  EXPECT_EQ(sim.pool().num_cached_free(), 0);
  sim.run();
  sim.expect_all_free();
}

TEST(SchedulerPrefix, ClearCacheBetweenRequests) {
  SchedSim sim({8, 64, true}, 16, 4);
  const auto p = iota_tokens(9, 100);
  sim.add(p, 1);
  sim.run();
  sim.pool().clear_cache();
  Sequence* b = sim.add(p, 1);
  EXPECT_EQ(step_first(sim).start, 0);
  EXPECT_EQ(sim.entry(b).n_cached, 0);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

}  // namespace
}  // namespace rf
