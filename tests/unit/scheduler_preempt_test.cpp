// Scheduler preemption: when blocks run out the newest running sequence is
// preempted (its blocks freed), re-queued first, and later recomputed —
// prompt and generated tokens — with unchanged output. With prefix caching
// the recompute reuses whatever of its freed blocks survived eviction.
// Also: no starvation under heavy pressure (randomized workloads).
#include <gtest/gtest.h>

#include <random>

#include "kv/group_layout.h"
#include "unit/scheduler_sim.h"

namespace rf {
namespace {

using test::iota_tokens;
using test::SchedSim;

// 9 blocks of 4 tokens; A, B, C each need 4 blocks (8 prompt + 8 new, the
// last token never computed: 15 positions). Steps 0-4 compute positions
// 0-11 of each (3 blocks each: all 9); at step 5 A needs a 4th block.
// D arrives at step 3 and waits for blocks behind the preempted C.
void three_way_pressure(bool prefix_caching) {
  SchedSim sim({8, 64, prefix_caching}, 9, 4);
  Sequence* a = sim.add(iota_tokens(8, 100), 8);
  Sequence* b = sim.add(iota_tokens(8, 200), 8);
  Sequence* c = sim.add(iota_tokens(8, 300), 8);
  Sequence* d = nullptr;
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(sim.step().size(), 3u) << "step " << i;
    if (i == 2) d = sim.add(iota_tokens(8, 400), 8);  // arrives with no block free: waits
  }
  EXPECT_EQ(sim.pool().num_free(), 0);
  EXPECT_EQ(sim.sched().num_preemptions(), 0u);
  EXPECT_EQ(c->n_generated(), 5);

  const auto s5 = sim.step();
  ASSERT_EQ(s5.size(), 2u);
  EXPECT_EQ(s5[0].seq, a);
  EXPECT_EQ(s5[1].seq, b);
  EXPECT_EQ(sim.sched().num_preemptions(), 1u);
  EXPECT_EQ(c->n_preemptions, 1);  // the newest, not A or B
  EXPECT_EQ(a->n_preemptions + b->n_preemptions, 0);
  EXPECT_EQ(c->status, SeqStatus::Waiting);
  EXPECT_TRUE(c->tables[0].blocks.empty());
  EXPECT_EQ(c->n_computed, 0);
  EXPECT_EQ(c->n_tokens(), 13);  // generated tokens are kept
  EXPECT_EQ(sim.sched().num_waiting(), 2u);  // C, re-queued ahead of D

  // C needs 4 blocks to recompute 13 tokens; only 1 is free until A and B end.
  EXPECT_EQ(sim.step().size(), 2u);
  EXPECT_EQ(sim.step().size(), 2u);
  EXPECT_TRUE(sim.entry(a).done && sim.entry(b).done);
  const auto s8 = sim.step();
  ASSERT_EQ(s8.size(), 2u);
  EXPECT_EQ(s8[0].seq, c);  // the preempted sequence goes first
  EXPECT_EQ(s8[1].seq, d);
  if (!prefix_caching) {
    // Everything recomputed in one chunk: 8 prompt + 5 generated tokens.
    EXPECT_EQ(s8[0].start, 0);
    EXPECT_EQ(s8[0].n_new, 13);
    EXPECT_EQ(sim.entry(c).n_cached, 0);
  } else {
    // C freed its 3 full blocks tail first; A and B each evicted the least
    // recently freed (C's 3rd, then 2nd block), so only the first survives.
    EXPECT_EQ(s8[0].start, 4);
    EXPECT_EQ(s8[0].n_new, 9);
    EXPECT_EQ(sim.entry(c).n_cached, 4);
  }
  EXPECT_TRUE(s8[0].sample);
  sim.run();
  EXPECT_EQ(sim.sched().num_preemptions(), 1u);
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerPreempt, NewestIsPreemptedAndRecomputed) { three_way_pressure(false); }
TEST(SchedulerPreempt, RecomputeReusesSurvivingCachedBlocks) { three_way_pressure(true); }

TEST(SchedulerPreempt, SelfPreemptionWhenTheNewestNeedsABlock) {
  // 4 blocks of 2. Step 0: A's 5 tokens take 3 blocks, B's 2 take the last.
  // Step 1: A fits in its blocks; B needs a 2nd block and is itself the
  // newest, so it preempts itself (A's blocks come back only after the step).
  SchedSim sim({4, 16, false}, 4, 2);
  Sequence* a = sim.add(iota_tokens(5, 10), 2);
  Sequence* b = sim.add(iota_tokens(2, 20), 3);
  EXPECT_EQ(sim.step().size(), 2u);
  EXPECT_EQ(sim.pool().num_free(), 0);
  const auto s1 = sim.step();
  ASSERT_EQ(s1.size(), 1u);
  EXPECT_EQ(s1[0].seq, a);
  EXPECT_EQ(b->n_preemptions, 1);
  EXPECT_EQ(b->status, SeqStatus::Waiting);
  EXPECT_TRUE(sim.entry(a).done);
  const auto s2 = sim.step();
  ASSERT_EQ(s2.size(), 1u);
  EXPECT_EQ(s2[0].seq, b);
  EXPECT_EQ(s2[0].start, 0);
  EXPECT_EQ(s2[0].n_new, 3);  // 2 prompt + 1 generated, recomputed
  EXPECT_TRUE(s2[0].sample);
  sim.run();
  EXPECT_EQ(sim.sched().num_preemptions(), 1u);
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerPreempt, PreemptsMidPrefill) {
  // 5 blocks of 4, 4 tokens per step. A decodes; B's 16-token prompt comes
  // in 3-token chunks and runs out of blocks at step 4, before its end.
  SchedSim sim({4, 4, false}, 5, 4);
  Sequence* a = sim.add(iota_tokens(2, 10), 14);
  Sequence* b = sim.add(iota_tokens(16, 50), 2);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(sim.step().size(), 2u);
  EXPECT_EQ(b->n_computed, 11);
  EXPECT_EQ(sim.step().size(), 1u);
  EXPECT_EQ(b->n_preemptions, 1);
  EXPECT_EQ(b->n_generated(), 0);
  EXPECT_EQ(a->n_preemptions, 0);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

// Random workloads under KV pressure: every sequence completes with its
// reference output (no starvation, no corruption), within a step bound.
// With sliding windows: random KV group layouts (window groups of windows
// 1..12 beside a full group, or window groups only), sequences up to the
// longest one the pool holds alone.
void pressure_workloads(bool windows) {
  uint64_t total_preemptions = 0, total_hits = 0, total_window_releases = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int32_t bs = uni(1, 3) * 2;
    const int32_t num_blocks = uni(6, 16);
    const bool prefix = seed % 2 == 0;
    SchedulerConfig cfg{uni(1, 8), uni(1, 24), prefix};
    int32_t cap = num_blocks * bs;
    if (windows) {
      std::vector<int32_t> layer_windows;
      const int kind = uni(0, 2);  // window + full, two windows + full, window only
      layer_windows.push_back(uni(1, 12));
      if (kind == 1) layer_windows.push_back(uni(1, 12));
      if (kind < 2) layer_windows.push_back(0);
      const KVGroupLayout layout(layer_windows);
      cfg.group_windows = layout.group_windows();
      cap = std::min(layout.max_tokens_for_blocks(num_blocks, bs, cfg.max_num_batched_tokens), 4 * num_blocks * bs);
      if (cap < 4) continue;  // the pool is too small for this layout
    }
    SchedSim sim(cfg, num_blocks, bs);
    // A few shared prefixes so the prefix cache is exercised.
    std::vector<std::vector<int32_t>> bases;
    for (int i = 0; i < 3; ++i) bases.push_back(iota_tokens(cap, 1000 * (i + 1)));
    const int n_seqs = uni(8, 30);
    int added = 0;
    SCOPED_TRACE("seed " + std::to_string(seed));
    for (int64_t step = 0; !sim.all_done() || added < n_seqs; ++step) {
      ASSERT_LT(step, 20000) << "workload did not finish";
      // Arrivals: a burst first, then now and then.
      while (added < n_seqs && (added < n_seqs / 2 || uni(0, 3) == 0)) {
        const int32_t max_new = uni(1, std::min(12, cap / 2));
        const int32_t n_prompt = uni(1, cap - max_new);
        std::vector<int32_t> prompt;
        if (uni(0, 1)) {
          const auto& base = bases[size_t(uni(0, 2))];
          prompt.assign(base.begin(), base.begin() + n_prompt);
          if (uni(0, 1)) prompt.back() = 7;  // diverge in the last token
        } else {
          prompt = iota_tokens(n_prompt, 100000 * (added + 1));
        }
        sim.add(prompt, max_new);
        ++added;
        if (added % 4 == 0) break;
      }
      sim.step();
      if (::testing::Test::HasFatalFailure()) return;
    }
    sim.expect_reference_outputs();
    sim.expect_all_free();
    total_preemptions += sim.sched().num_preemptions();
    total_hits += sim.prefix_hits();
    total_window_releases += sim.sched().num_window_releases();
  }
  EXPECT_GT(total_preemptions, 50u);  // the workloads did exercise preemption
  EXPECT_GT(total_hits, 50u);         // and prefix hits
  if (windows) {
    EXPECT_GT(total_window_releases, 100u);  // and windows moving
  }
}

TEST(SchedulerPreempt, NoStarvationUnderPressure) { pressure_workloads(false); }
TEST(SchedulerPreempt, NoStarvationUnderPressureWithSlidingWindows) { pressure_workloads(true); }

}  // namespace
}  // namespace rf
