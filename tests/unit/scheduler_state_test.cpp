// The scheduler with recurrent-state slots (hybrid models), GPU-free: the
// simulator (scheduler_sim.h) checks that every chunk finds its slot
// holding exactly the tokens before it — after chunked prefill, after a
// checkpoint restore, after preemption — and the pool's slot and checkpoint
// accounting after every step. Admission waits for a free slot; prompts are
// cut at their last block boundary and checkpointed there; repeated
// prompts and second choices restore the checkpoint instead of recomputing;
// checkpoints go with their KV blocks; past the prompt each sequence keeps
// only its latest; a soak of mixed requests with cancellations leaks no slot
// or checkpoint row.
#include <gtest/gtest.h>

#include <random>

#include "unit/scheduler_sim.h"

namespace rf {
namespace {

using test::iota_tokens;
using test::SchedSim;

SchedulerConfig hybrid(int32_t max_seqs, int32_t budget, int32_t slots, int32_t checkpoints, bool prefix = true) {
  SchedulerConfig c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = budget;
  c.prefix_caching = prefix;
  c.state_slots = slots;
  c.state_checkpoints = checkpoints;
  return c;
}

TEST(SchedulerState, AdmissionWaitsForAFreeSlot) {
  SchedSim sim(hybrid(8, 256, 2, 4), 64, 4);
  for (int i = 0; i < 5; ++i) sim.add(iota_tokens(6, 100 * (i + 1)), 3);
  const auto first = sim.step();
  EXPECT_EQ(first.size(), 2u);  // two slots: two sequences at a time
  EXPECT_EQ(sim.sched().num_running(), 2u);
  EXPECT_EQ(sim.sched().state_pool()->num_free_slots(), 0);
  sim.run();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerState, PromptsAreCutAndCheckpointedAtTheirLastBoundary) {
  SchedSim sim(hybrid(4, 256, 4, 4), 64, 4);
  Sequence* a = sim.add(iota_tokens(10, 100), 1);
  const auto s0 = sim.step();
  ASSERT_EQ(s0.size(), 1u);
  EXPECT_EQ(s0[0].n_new, 8);  // (10 - 1) / 4 * 4: where a repeat of the prompt hits
  EXPECT_GE(s0[0].state_save, 4);  // a checkpoint row (rows 0-3 are slots)
  EXPECT_EQ(s0[0].state_load, -1);
  const auto s1 = sim.step();
  ASSERT_EQ(s1.size(), 1u);
  EXPECT_EQ(s1[0].start, 8);
  EXPECT_EQ(s1[0].n_new, 2);
  EXPECT_TRUE(s1[0].sample);
  EXPECT_EQ(sim.sched().state_pool()->num_checkpoints(), 1);
  (void)a;
  sim.run();
  // Without prefix caching there are no checkpoints and no cuts.
  SchedSim plain(hybrid(4, 256, 4, 4, false), 64, 4);
  plain.add(iota_tokens(10, 100), 1);
  const auto p0 = plain.step();
  EXPECT_EQ(p0[0].n_new, 10);
  EXPECT_EQ(p0[0].state_save, -1);
  plain.run();
  plain.expect_all_free();
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerState, RepeatedPromptsAndSecondChoicesRestoreTheCheckpoint) {
  SchedSim sim(hybrid(8, 256, 8, 8), 64, 4);
  const auto prompt = iota_tokens(14, 300);
  Sequence* a = sim.add(prompt, 6);
  sim.step();
  sim.step();  // A's prompt done (12 + 2)
  // Two more choices of the same prompt while A decodes: each restores the
  // checkpoint at 12 into its own slot and computes the last 2 tokens.
  Sequence* b = sim.add(prompt, 6);
  Sequence* c = sim.add(prompt, 6);
  const auto s = sim.step();
  int restored = 0;
  for (const ScheduledSeq& e : s) {
    if (e.seq == a) continue;
    EXPECT_EQ(e.start, 12);
    EXPECT_EQ(e.n_new, 2);
    EXPECT_GE(e.state_load, 8);
    ++restored;
  }
  EXPECT_EQ(restored, 2);
  EXPECT_NE(b->state_slot, c->state_slot);
  sim.run();
  EXPECT_EQ(sim.entry(b).n_cached, 12);
  EXPECT_EQ(sim.entry(c).n_cached, 12);
  EXPECT_EQ(sim.sched().num_checkpoint_hits(), 2u);
  EXPECT_EQ(sim.checkpoint_loads(), 2u);

  // A prompt sharing only A's first block has no checkpoint at 4: no hit.
  Sequence* d = sim.add(std::vector<int32_t>{300, 301, 302, 303, 9, 9, 9}, 2);
  sim.run();
  EXPECT_EQ(sim.entry(d).n_cached, 0);
  // A's conversation continued (its prompt, its output, more text): the
  // checkpoint A kept past its prompt serves the longer prefix.
  std::vector<int32_t> next(a->tokens.begin(), a->tokens.end());
  next.insert(next.end(), {7, 7, 7});
  Sequence* e = sim.add(next, 2);
  sim.run();
  // A computed 19 of its 20 tokens (the last one was only sampled): its
  // last checkpoint is at 16.
  EXPECT_EQ(sim.entry(e).n_cached, 16);
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerState, CheckpointsGoWithTheirBlocks) {
  // 12 blocks of 4: a second long prompt evicts A's cached blocks, and with
  // them A's checkpoint; A's prompt then runs from position 0.
  SchedSim sim(hybrid(2, 256, 2, 4), 12, 4);
  const auto pa = iota_tokens(18, 100);
  sim.add(pa, 1);
  sim.run();
  EXPECT_EQ(sim.sched().state_pool()->num_checkpoints(), 1);
  sim.add(iota_tokens(40, 500), 4);
  sim.run();
  const StatePool& sp = *sim.sched().state_pool();
  Sequence* again = sim.add(pa, 1);
  sim.run();
  EXPECT_EQ(sim.entry(again).n_cached, 0);
  EXPECT_LE(sp.num_checkpoints(), sp.n_checkpoint_rows());
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerState, PastThePromptEachSequenceKeepsItsLatestCheckpoint) {
  SchedSim sim(hybrid(2, 256, 2, 16), 64, 4);
  sim.add(iota_tokens(6, 100), 30);  // boundaries 4 (prompt) then 8, 12, ..., 32
  sim.run();
  // The prompt's checkpoint and the latest one.
  EXPECT_EQ(sim.sched().state_pool()->num_checkpoints(), 2);
  EXPECT_GE(sim.checkpoint_saves(), 7u);
  sim.expect_all_free();
}

TEST(SchedulerState, PreemptionFreesTheSlotAndRecomputes) {
  // 10 blocks of 4 for three sequences of up to 22 tokens: preemptions.
  SchedSim sim(hybrid(3, 16, 3, 3), 10, 4);
  for (int i = 0; i < 3; ++i) sim.add(iota_tokens(10, 100 * (i + 1)), 12);
  sim.run();
  EXPECT_GT(sim.sched().num_preemptions(), 0u);
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

TEST(SchedulerState, MixedSoakWithCancellationsLeaksNothing) {
  std::mt19937 rng(2026);
  SchedSim sim(hybrid(6, 24, 6, 5), 24, 4);
  const std::vector<int32_t> shared = iota_tokens(9, 700);
  std::vector<Sequence*> live;
  for (int step = 0; step < 600; ++step) {
    if (rng() % 3 == 0) {
      std::vector<int32_t> p = rng() % 2 ? shared : iota_tokens(3, 900 + int32_t(rng() % 50));
      for (uint32_t k = rng() % 9; k > 0; --k) p.push_back(int32_t(rng() % 997));
      live.push_back(sim.add(p, 1 + int32_t(rng() % 20)));
    }
    if (!live.empty() && rng() % 11 == 0) {
      const size_t i = rng() % live.size();
      if (!sim.entry(live[i]).done) sim.cancel(live[i]);
    }
    sim.step();
    if (::testing::Test::HasFatalFailure()) return;
  }
  sim.run();
  EXPECT_GT(sim.checkpoint_loads(), 0u);
  EXPECT_GT(sim.sched().num_preemptions(), 0u);
  sim.expect_reference_outputs();
  sim.expect_all_free();
}

}  // namespace
}  // namespace rf
