// Scheduler limits, step by step against hand-worked schedules: the token
// budget per step, max_num_seqs, chunked prefill mixed with decode tokens,
// and first-come-first-served admission (no overtaking for budget or blocks).
#include <gtest/gtest.h>

#include <tuple>

#include "unit/scheduler_sim.h"

namespace rf {
namespace {

using test::iota_tokens;
using test::SchedSim;

// (sequence, start, n_new, sample) of one scheduled entry.
using E = std::tuple<const Sequence*, int32_t, int32_t, bool>;
std::vector<E> entries(const std::vector<ScheduledSeq>& s) {
  std::vector<E> out;
  for (const auto& e : s) out.emplace_back(e.seq, e.start, e.n_new, e.sample);
  return out;
}

TEST(SchedulerBudget, TokenBudgetSplitsPromptsAcrossSteps) {
  SchedSim sim({/*max_num_seqs=*/8, /*max_num_batched_tokens=*/10, /*prefix_caching=*/false}, 64, 4);
  Sequence* a = sim.add(iota_tokens(25, 100), 3);
  Sequence* b = sim.add(iota_tokens(7, 200), 2);
  Sequence* c = sim.add(iota_tokens(3, 300), 1);
  // A's prompt takes the whole budget twice; its last 5 leave 5 for B.
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 0, 10, false}}));
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 10, 10, false}}));
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 20, 5, true}, {b, 0, 5, false}}));
  // 1 (A decodes) + 2 (B's rest) + 3 (C whole) = 6 <= 10.
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 25, 1, true}, {b, 5, 2, true}, {c, 0, 3, true}}));
  EXPECT_TRUE(sim.entry(c).done);
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 26, 1, true}, {b, 7, 1, true}}));
  EXPECT_TRUE(sim.all_done());
  EXPECT_TRUE(sim.step().empty());
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerBudget, BudgetOfOneTokenStillFinishes) {
  SchedSim sim({4, 1, false}, 16, 4);
  Sequence* a = sim.add(iota_tokens(5, 1), 3);
  Sequence* b = sim.add(iota_tokens(2, 50), 2);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, i, 1, i == 4}}));
  // A (running) always goes first; B is admitted once A is done.
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 5, 1, true}}));
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 6, 1, true}}));
  EXPECT_TRUE(sim.entry(a).done);
  EXPECT_EQ(sim.run(), 3);  // B: 2 prompt tokens + 1 decode
  sim.expect_reference_outputs();
  sim.expect_all_free();
  (void)b;
}

TEST(SchedulerBudget, MaxNumSeqs) {
  SchedSim sim({2, 100, false}, 64, 4);
  Sequence* a = sim.add(iota_tokens(4, 10), 3);
  Sequence* b = sim.add(iota_tokens(4, 20), 3);
  Sequence* c = sim.add(iota_tokens(4, 30), 3);
  Sequence* d = sim.add(iota_tokens(4, 40), 2);
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 0, 4, true}, {b, 0, 4, true}}));
  EXPECT_EQ(sim.sched().num_waiting(), 2u);
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 4, 1, true}, {b, 4, 1, true}}));
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 5, 1, true}, {b, 5, 1, true}}));
  EXPECT_TRUE(sim.entry(a).done && sim.entry(b).done);
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{c, 0, 4, true}, {d, 0, 4, true}}));
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerBudget, ChunkedPrefillMixedWithDecode) {
  SchedSim sim({8, 8, false}, 64, 4);
  Sequence* a = sim.add(iota_tokens(4, 10), 10);
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 0, 4, true}}));
  Sequence* b = sim.add(iota_tokens(30, 100), 2);
  // Each step: A's decode token first, then 7 of B's prompt (8 in all).
  for (int32_t i = 0; i < 4; ++i)
    EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 4 + i, 1, true}, {b, 7 * i, 7, false}}));
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 8, 1, true}, {b, 28, 2, true}}));
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerBudget, FcfsNoOvertakingForBlocks) {
  // 6 blocks of 4 tokens. Y takes 4 blocks; A needs 3 and must wait; B
  // (needing 1, which is free) must not overtake A.
  SchedSim sim({8, 64, false}, 6, 4);
  Sequence* y = sim.add(iota_tokens(15, 10), 3);
  Sequence* a = sim.add(iota_tokens(12, 100), 1);
  Sequence* b = sim.add(iota_tokens(4, 200), 1);
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{y, 0, 15, true}}));
  EXPECT_EQ(sim.pool().num_free(), 2);
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{y, 15, 1, true}}));  // B fits, but A is first
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{y, 16, 1, true}}));  // Y's 5th block
  EXPECT_TRUE(sim.entry(y).done);
  EXPECT_EQ(entries(sim.step()), (std::vector<E>{{a, 0, 12, true}, {b, 0, 4, true}}));
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerBudget, AdmissionInArrivalOrder) {
  SchedSim sim({3, 12, true}, 40, 4);
  std::vector<Sequence*> seqs;
  for (int i = 0; i < 12; ++i) seqs.push_back(sim.add(iota_tokens(3 + (i * 7) % 11, 100 * i), 2 + i % 3));
  sim.run();
  for (size_t i = 1; i < seqs.size(); ++i)
    EXPECT_LE(sim.entry(seqs[i - 1]).first_step, sim.entry(seqs[i]).first_step) << i;
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

}  // namespace
}  // namespace rf
