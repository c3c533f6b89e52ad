// Scheduler cancellation: finish() removes a sequence in any state —
// waiting, mid-prefill, decoding, preempted, holding shared prefix blocks,
// or scheduled but not completed (a failed step) — releases its blocks at
// once, and leaves the other sequences' outputs unchanged.
#include <gtest/gtest.h>

#include "unit/scheduler_sim.h"

namespace rf {
namespace {

using test::iota_tokens;
using test::SchedSim;

TEST(SchedulerCancel, WhileWaiting) {
  SchedSim sim({1, 64, true}, 16, 4);
  sim.add(iota_tokens(5, 10), 3);
  Sequence* b = sim.add(iota_tokens(5, 20), 3);  // waits: max_num_seqs is 1
  sim.step();
  EXPECT_EQ(b->status, SeqStatus::Waiting);
  sim.cancel(b);
  EXPECT_EQ(b->status, SeqStatus::Finished);
  EXPECT_EQ(sim.sched().num_waiting(), 0u);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerCancel, MidPrefill) {
  SchedSim sim({4, 6, true}, 16, 4);
  Sequence* a = sim.add(iota_tokens(20, 10), 3);
  Sequence* b = sim.add(iota_tokens(3, 50), 4);
  sim.step();
  sim.step();
  EXPECT_EQ(a->n_computed, 12);
  EXPECT_EQ(a->status, SeqStatus::Running);
  const int32_t free_before = sim.pool().num_free();
  sim.cancel(a);
  EXPECT_EQ(sim.pool().num_free(), free_before + 3);  // its 3 blocks, at once
  EXPECT_EQ(sim.sched().num_running(), 0u);
  sim.run();
  EXPECT_EQ(b->n_generated(), 4);
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerCancel, WhileDecodingAndOthersContinue) {
  SchedSim sim({8, 64, false}, 32, 4);
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 5; ++i) seqs.push_back(sim.add(iota_tokens(6 + i, 100 * i), 10));
  for (int i = 0; i < 3; ++i) sim.step();
  sim.cancel(seqs[0]);  // the oldest
  sim.step();
  sim.cancel(seqs[4]);  // the newest
  sim.cancel(seqs[2]);  // one in the middle
  sim.run();
  EXPECT_EQ(seqs[1]->n_generated(), 10);
  EXPECT_EQ(seqs[3]->n_generated(), 10);
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerCancel, WhilePreempted) {
  // As in the preemption test: C is preempted at step 5 and waits.
  SchedSim sim({8, 64, false}, 9, 4);
  sim.add(iota_tokens(8, 100), 8);
  sim.add(iota_tokens(8, 200), 8);
  Sequence* c = sim.add(iota_tokens(8, 300), 8);
  for (int i = 0; i < 6; ++i) sim.step();
  ASSERT_EQ(c->n_preemptions, 1);
  ASSERT_EQ(c->status, SeqStatus::Waiting);
  sim.cancel(c);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerCancel, HolderOfSharedPrefixBlocks) {
  SchedSim sim({8, 64, true}, 16, 4);
  const auto p = iota_tokens(12, 100);
  Sequence* a = sim.add(p, 6);
  sim.step();
  Sequence* b = sim.add(p, 6);
  sim.step();
  EXPECT_EQ(sim.entry(b).n_cached, 8);
  EXPECT_EQ(sim.pool().ref_count(a->tables[0].blocks[0]), 2);
  sim.cancel(a);  // the original owner goes; B keeps the shared blocks
  EXPECT_EQ(sim.pool().ref_count(b->tables[0].blocks[0]), 1);
  sim.run();
  EXPECT_EQ(b->n_generated(), 6);
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerCancel, FailedStepFinishesEverythingScheduled) {
  // The engine's error path: a forward pass throws after schedule(), and
  // every scheduled sequence is finished without complete().
  SchedSim sim({8, 64, true}, 16, 4);
  Sequence* a = sim.add(iota_tokens(9, 10), 4);
  sim.step();
  Sequence* b = sim.add(iota_tokens(9, 10), 4);  // shares A's first block
  Sequence* c = sim.add(iota_tokens(30, 500), 4);  // a long prompt in the same step
  const auto s = sim.sched().schedule();
  ASSERT_EQ(s.size(), 3u);
  for (const auto& e : s) sim.sched().finish(e.seq);
  EXPECT_FALSE(sim.sched().has_work());
  EXPECT_EQ(sim.pool().num_free(), sim.pool().num_blocks());
  for (int32_t i = 0; i < sim.pool().num_blocks(); ++i) EXPECT_EQ(sim.pool().ref_count(i), 0);
  (void)a;
  (void)b;
  (void)c;
}

}  // namespace
}  // namespace rf
