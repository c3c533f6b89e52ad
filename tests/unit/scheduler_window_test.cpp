// Scheduler with sliding-window KV groups (GPU-free): a window group holds
// only the blocks of its window (and the chunk being computed) while the
// full group grows; blocks return to the pool as the window moves;
// preemption, finish and cancellation leave the pool free; prefix hits take
// the window groups' blocks of the first computed query's window and fall
// back to a shorter hit when some were evicted. The simulator checks every
// key a query sees, per group, and the generated tokens.
#include <gtest/gtest.h>

#include "kv/group_layout.h"
#include "unit/scheduler_sim.h"

namespace rf {
namespace {

using test::iota_tokens;
using test::SchedSim;

SchedulerConfig windowed(int32_t max_seqs, int32_t max_tokens, bool prefix, std::vector<int32_t> windows) {
  SchedulerConfig c{max_seqs, max_tokens, prefix};
  c.group_windows = std::move(windows);
  return c;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(SchedulerWindow, WindowGroupsStayBoundedWhileTheFullGroupGrows) {
  // Window 16 over blocks of 4 (a window spans 4-5 blocks), 8 tokens per
  // step; one sequence of 10 windows: a 40-token prompt and 120 new tokens.
  const int32_t w = 16, bs = 4, chunk = 8;
  SchedSim sim(windowed(4, chunk, true, {w, 0, w}), 100, bs);
  Sequence* s = sim.add(iota_tokens(40, 100), 120);
  int32_t most_held = 0;
  while (!sim.all_done()) {
    sim.step();
    if (::testing::Test::HasFatalFailure()) return;
    if (sim.entry(s).done) break;
    // Held: the full group's blocks and, per window group, the window's.
    const int32_t full = s->tables[1].live_blocks();
    EXPECT_EQ(full, (s->n_computed + bs - 1) / bs);
    EXPECT_LE(s->tables[0].live_blocks(), window_blocks_bound(w, chunk, bs));
    EXPECT_LE(s->tables[2].live_blocks(), window_blocks_bound(w, chunk, bs));
    EXPECT_EQ(sim.pool().num_blocks() - sim.pool().num_free(), s->n_blocks_held());
    most_held = std::max(most_held, s->n_blocks_held());
  }
  // ceil(16 / 4) + 1 blocks of window and 2 of chunk at most; the full
  // group reached the whole context (159 positions computed).
  EXPECT_LE(sim.entry(s).max_window_blocks, (w + bs - 1) / bs + 1 + chunk / bs);
  EXPECT_GE(sim.entry(s).max_window_blocks, w / bs);
  EXPECT_EQ(sim.entry(s).max_full_blocks, 40);
  EXPECT_LE(most_held, 40 + 2 * 7);
  // Every window-group block before the last window went back to the pool.
  EXPECT_GE(sim.sched().num_window_releases(), 2u * (40 - 5));
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerWindow, ReleasedWindowBlocksServeOtherSequences) {
  // 27 blocks of 4 for A (a window-8 and a full group; 43 positions) and B
  // (33), arriving later: without releasing they would need 22 + 18
  // blocks; with it, 11 + 3 and 9 + 3 at most.
  SchedSim sim(windowed(4, 4, false, {8, 0}), 27, 4);
  Sequence* a = sim.add(iota_tokens(4, 10), 40);
  for (int i = 0; i < 10; ++i) sim.step();
  Sequence* b = sim.add(iota_tokens(4, 500), 30);
  sim.run();
  EXPECT_EQ(sim.sched().num_preemptions(), 0u);
  EXPECT_LE(sim.entry(a).max_window_blocks, 3);  // keys s - 7 .. s: 3 blocks at most
  EXPECT_LE(sim.entry(b).max_window_blocks, 3);
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerWindow, PreemptFinishAndCancelFreeEveryGroup) {
  // 24 blocks of 2 for four sequences of a window-4 group, a window-6 group
  // and a full group: preemptions happen; one is cancelled mid-decode, one
  // while waiting.
  SchedSim sim(windowed(4, 6, true, {4, 6, 0}), 24, 2);
  Sequence* a = sim.add(iota_tokens(9, 100), 14);
  sim.add(iota_tokens(7, 200), 12);
  Sequence* c = sim.add(iota_tokens(11, 300), 10);
  sim.add(iota_tokens(5, 400), 16);
  for (int i = 0; i < 6; ++i) sim.step();
  sim.cancel(c);
  Sequence* e = sim.add(iota_tokens(12, 600), 6);
  sim.cancel(e);  // still waiting
  sim.run();
  EXPECT_GT(sim.sched().num_preemptions(), 0u);
  EXPECT_GT(sim.sched().num_window_releases(), 0u);
  EXPECT_TRUE(sim.entry(a).done);
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerWindow, PrefixHitTakesTheWindowAndComputesOnlyTheTail) {
  // Window 8 over blocks of 4. A's 64-token prompt is cached in both
  // groups: its window group's early blocks slid out while A ran, but they
  // stay cached, and only the last window is needed anyway.
  SchedSim sim(windowed(4, 16, true, {8, 0}), 60, 4);
  const auto pa = iota_tokens(64, 100);
  Sequence* a = sim.add(pa, 2);
  sim.run();
  EXPECT_GT(sim.sched().num_window_releases(), 0u);
  Sequence* b = sim.add(concat(pa, {7, 8, 9}), 3);
  const auto sb = sim.step();
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_EQ(sb[0].start, 64);
  EXPECT_EQ(sb[0].n_new, 3);
  EXPECT_EQ(sim.entry(b).n_cached, 64);
  // The full group took all 16 blocks, the window group those of the first
  // query's window (keys 57..63: blocks 14 and 15), the rest null.
  EXPECT_EQ(b->tables[1].first_live, 0);
  EXPECT_EQ(b->tables[0].first_live, 14);
  for (int i = 0; i < 14; ++i) EXPECT_EQ(b->tables[0].blocks[size_t(i)], kNullBlock);
  (void)a;
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerWindow, EvictedWindowBlocksGiveAShorterHit) {
  // As above (A's prompt only), then the cached window-group block 15 of A
  // is evicted (with blocks 0-9 that slid out earlier, older in the LRU):
  // B's hit stops at 15 blocks (60 tokens), whose window (keys 53..59:
  // blocks 13 and 14) is still cached, though the full group has all 16.
  SchedSim sim(windowed(4, 16, true, {8, 0}), 60, 4);
  const auto pa = iota_tokens(64, 100);
  sim.add(pa, 1);
  sim.run();
  // A finished: its window blocks were freed tail first (15, 14, 13) after
  // the ones that slid out; the full group's after them.
  const int32_t slid = int32_t(sim.sched().num_window_releases());
  const int32_t uncached = sim.pool().num_free() - sim.pool().num_cached_free();
  std::vector<int32_t> taken;
  for (int32_t i = 0; i < uncached + slid + 1; ++i) taken.push_back(sim.pool().allocate());
  for (int32_t x : taken) sim.pool().release(x);
  Sequence* b = sim.add(concat(pa, {7}), 2);
  const auto sb = sim.step();
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_EQ(sb[0].start, 60);
  EXPECT_EQ(sim.entry(b).n_cached, 60);
  EXPECT_EQ(b->tables[0].first_live, 13);
  EXPECT_EQ(b->tables[1].first_live, 0);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerWindow, NoWindowCachedMeansNoHit) {
  // Every window-group block of A evicted: the full group alone is no hit.
  SchedSim sim(windowed(4, 16, true, {8, 0}), 60, 4);
  const auto pa = iota_tokens(32, 100);
  sim.add(pa, 1);
  sim.run();
  const int32_t uncached = sim.pool().num_free() - sim.pool().num_cached_free();
  std::vector<int32_t> taken;
  for (int32_t i = 0; i < uncached + 8; ++i) taken.push_back(sim.pool().allocate());  // the 8 window blocks
  for (int32_t x : taken) sim.pool().release(x);
  EXPECT_EQ(sim.pool().num_cached_free(), 8);  // the full group's
  Sequence* b = sim.add(concat(pa, {7}), 2);
  const auto sb = sim.step();
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_EQ(sb[0].start, 0);
  EXPECT_EQ(sim.entry(b).n_cached, 0);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerWindow, OnlyWindowGroups) {
  // No full group (every layer local): hits and bounds come from the
  // windows alone; a long sequence holds a few blocks at any time.
  SchedSim sim(windowed(4, 8, true, {6, 6}), 60, 4);
  const auto p = iota_tokens(30, 100);
  Sequence* a = sim.add(p, 50);
  sim.run();
  EXPECT_LE(sim.entry(a).max_window_blocks, window_blocks_bound(6, 8, 4));
  Sequence* b = sim.add(concat(p, {1, 2}), 4);
  const auto sb = sim.step();
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_EQ(sb[0].start, 28);  // 7 blocks: positions 0-27; the window of 28 is blocks 5 and 6
  EXPECT_EQ(sim.entry(b).n_cached, 28);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

}  // namespace
}  // namespace rf
