// Scheduler with speculative decoding's proposed tokens (Sequence::n_draft),
// against hand-worked schedules: the proposals are scheduled with the
// pending token, accept() keeps the accepted ones and returns the blocks
// only rejected ones reached, complete() hashes no block that held a
// rejected token, and proposals are cut to the budget, dropped rather than
// cost anyone blocks (no preemption) and dropped from sequences the step
// leaves out or preempts.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/scheduler.h"

namespace rf {
namespace {

std::vector<int32_t> iota(int32_t n, int32_t from) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// A sequence whose prompt is computed and whose first token is sampled.
void prefill(Scheduler& s, Sequence& q, int32_t next_token) {
  auto step = s.schedule();
  ASSERT_EQ(step.size(), 1u);
  ASSERT_TRUE(step[0].sample);
  s.complete(step);
  q.tokens.push_back(next_token);
}

void propose(Sequence& q, const std::vector<int32_t>& draft) {
  q.tokens.insert(q.tokens.end(), draft.begin(), draft.end());
  q.n_draft = int32_t(draft.size());
}

uint64_t chain(const std::vector<int32_t>& tokens, int32_t n_blocks, int32_t bs) {
  uint64_t h = 0;
  for (int32_t i = 0; i < n_blocks; ++i)
    h = BlockPool::chain_hash(h, std::span<const int32_t>(tokens.data() + size_t(i) * bs, size_t(bs)));
  return h;
}

TEST(SchedulerSpec, RollbackReturnsBlocksAndHashesOnlyAcceptedTokens) {
  BlockPool pool(16, 4);
  Scheduler s({4, 64, true}, pool);
  Sequence q;
  q.tokens = iota(6, 100);
  q.n_prompt = 6;
  s.add(&q);
  prefill(s, q, 7);
  propose(q, {1, 2, 3, 4, 5, 6});  // positions 7..12
  auto step = s.schedule();
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].start, 6);
  EXPECT_EQ(step[0].n_new, 7);
  EXPECT_EQ(step[0].n_draft, 6);
  EXPECT_TRUE(step[0].sample);
  EXPECT_EQ(pool.num_free(), 16 - 4);  // 13 positions
  const std::vector<int32_t> with_drafts = q.tokens;
  s.accept(step[0], 1);  // proposal 1 accepted, 2..6 rejected
  EXPECT_EQ(step[0].n_new, 2);
  EXPECT_EQ(q.n_draft, 0);
  EXPECT_EQ(q.n_tokens(), 8);
  EXPECT_EQ(q.tokens.back(), 1);
  EXPECT_EQ(pool.num_free(), 16 - 2);  // blocks of positions 8..12 held only rejected tokens
  s.complete(step);
  EXPECT_EQ(q.n_computed, 8);
  EXPECT_EQ(q.n_hashed_blocks, 2);
  EXPECT_TRUE(pool.find(chain(q.tokens, 2, 4)).has_value());
  // The block of positions 8..11 as computed (rejected tokens 2..5) is not cached.
  EXPECT_FALSE(pool.find(chain(with_drafts, 3, 4)).has_value());
  // The next round: the pending token and new proposals reuse the freed blocks.
  q.tokens.push_back(9);
  propose(q, {10, 11, 12});
  step = s.schedule();
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].start, 8);
  EXPECT_EQ(step[0].n_new, 4);
  s.accept(step[0], 3);
  s.complete(step);
  EXPECT_EQ(q.n_computed, 12);
  EXPECT_EQ(q.n_hashed_blocks, 3);
  EXPECT_TRUE(pool.find(chain(q.tokens, 3, 4)).has_value());
  s.finish(&q);
  EXPECT_EQ(pool.num_free(), 16);
}

TEST(SchedulerSpec, ProposalsAreCutToTheBudget) {
  BlockPool pool(32, 4);
  Scheduler s({4, 4, false}, pool);
  Sequence q;
  q.tokens = iota(3, 1);
  q.n_prompt = 3;
  s.add(&q);
  prefill(s, q, 50);
  propose(q, {60, 61, 62, 63, 64, 65});
  auto step = s.schedule();
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].n_new, 4);  // the pending token and 3 proposals
  EXPECT_EQ(step[0].n_draft, 3);
  EXPECT_EQ(q.n_tokens(), 7);
  EXPECT_TRUE(step[0].sample);
  s.accept(step[0], 0);
  s.complete(step);
  EXPECT_EQ(q.n_computed, 4);
  EXPECT_EQ(q.n_tokens(), 4);
  s.finish(&q);
  EXPECT_EQ(pool.num_free(), 32);
}

TEST(SchedulerSpec, ProposalsAreDroppedRatherThanPreemptAnyone) {
  // Two sequences of 4 tokens fill 2 blocks of 4 each; 1 block is left.
  BlockPool pool(3, 4);
  Scheduler s({4, 64, false}, pool);
  Sequence a, b;
  a.tokens = iota(3, 1);
  b.tokens = iota(3, 20);
  a.n_prompt = b.n_prompt = 3;
  s.add(&a);
  s.add(&b);
  auto step = s.schedule();
  ASSERT_EQ(step.size(), 2u);
  s.complete(step);
  a.tokens.push_back(4);
  b.tokens.push_back(23);
  // A's 8 proposals would need 2 more blocks: they go, nobody is preempted.
  propose(a, iota(8, 30));
  step = s.schedule();
  ASSERT_EQ(step.size(), 2u);
  EXPECT_EQ(step[0].seq, &a);
  EXPECT_EQ(step[0].n_new, 1);
  EXPECT_EQ(step[0].n_draft, 0);
  EXPECT_EQ(a.n_tokens(), 4);
  EXPECT_EQ(s.num_preemptions(), 0u);
  s.complete(step);
  s.finish(&a);
  s.finish(&b);
  EXPECT_EQ(pool.num_free(), 3);
}

TEST(SchedulerSpec, SequencesLeftOutOrPreemptedLoseTheirProposals) {
  BlockPool pool(64, 4);
  Scheduler s({4, 2, false}, pool);
  Sequence a, b;
  a.tokens = {1};
  b.tokens = {2};
  a.n_prompt = b.n_prompt = 1;
  s.add(&a);
  s.add(&b);
  auto step = s.schedule();
  ASSERT_EQ(step.size(), 2u);
  s.complete(step);
  a.tokens.push_back(5);
  b.tokens.push_back(6);
  propose(a, {7});
  propose(b, {8, 9});
  // A takes the whole budget of 2 with its proposal; B is left out.
  step = s.schedule();
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].n_new, 2);
  EXPECT_EQ(b.n_draft, 0);
  EXPECT_EQ(b.n_tokens(), 2);
  s.accept(step[0], 1);
  s.complete(step);
  EXPECT_EQ(a.n_computed, 3);
  a.tokens.push_back(8);  // the round's own token; no proposals: A and B fit the budget
  step = s.schedule();
  ASSERT_EQ(step.size(), 2u);
  EXPECT_EQ(step[1].seq, &b);
  EXPECT_EQ(step[1].n_new, 1);
  s.complete(step);
  s.finish(&a);
  s.finish(&b);
  EXPECT_EQ(pool.num_free(), 64);
}

TEST(SchedulerSpec, APreemptedSequenceLosesItsProposals) {
  // A holds positions 0..3, B 0..2: the two blocks of the pool.
  BlockPool pool(2, 4);
  Scheduler s({4, 64, false}, pool);
  Sequence a, b;
  a.tokens = iota(4, 1);
  b.tokens = iota(3, 20);
  a.n_prompt = 4;
  b.n_prompt = 3;
  s.add(&a);
  s.add(&b);
  auto step = s.schedule();
  ASSERT_EQ(step.size(), 2u);
  s.complete(step);
  a.tokens.push_back(9);  // position 4: a new block
  b.tokens.push_back(23);
  propose(b, {24});
  step = s.schedule();  // B, the newest, is preempted for A's block
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0].seq, &a);
  EXPECT_EQ(s.num_preemptions(), 1u);
  EXPECT_EQ(b.status, SeqStatus::Waiting);
  EXPECT_EQ(b.n_draft, 0);
  EXPECT_EQ(b.n_tokens(), 4);
  s.complete(step);
  s.finish(&a);
  s.finish(&b);
  EXPECT_EQ(pool.num_free(), 2);
}

}  // namespace
}  // namespace rf
