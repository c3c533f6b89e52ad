// The thinking section of a reply (Request::thinking): ThinkingTracker on
// strings — the section opens only at the reply's start (after whitespace,
// its tag split over tokens) or in the prompt, closes at its tag, counts
// its tokens — and the engine on stories260K: a budget spent forces the
// closing tokens, one a step, right after `budget` thinking tokens (greedy
// output otherwise unchanged before them); a section never closed counts
// every token; reasoning_tokens is reported on the final event.
#include <gtest/gtest.h>

#include "engine/thinking.h"
#include "unit/engine_test_util.h"

namespace rf {
namespace {

ThinkingControl think_tags(bool starts_inside, int32_t budget = -1, std::vector<int32_t> forced = {}) {
  ThinkingControl c;
  c.enabled = true;
  c.starts_inside = starts_inside;
  c.open = "<think>";
  c.close = "</think>";
  c.budget = budget;
  c.forced_close = std::move(forced);
  return c;
}

TEST(ThinkingTracker, OpensAtTheStartClosesAtItsTagAndCounts) {
  const ThinkingControl c = think_tags(false);
  ThinkingTracker t(c);
  for (const char* piece : {"\n", " <th", "ink>", "hmm", " ok</", "think>", "\n\nAnswer"}) t.push(piece);
  EXPECT_FALSE(t.inside());
  EXPECT_EQ(t.tokens(), 6);  // "\n" .. "think>": the whitespace before the tag, the tags and what is between
  ThinkingTracker late(c);  // text first: no section
  for (const char* piece : {"Hi", " <think>", "x"}) late.push(piece);
  EXPECT_EQ(late.tokens(), 0);
  EXPECT_FALSE(late.inside());
  ThinkingTracker one(c);  // open and close in one token
  one.push("<think>a</think>b");
  EXPECT_FALSE(one.inside());
  EXPECT_EQ(one.tokens(), 1);
}

TEST(ThinkingTracker, StartsInsideAndForcesTheCloseOnceTheBudgetIsSpent) {
  const ThinkingControl c = think_tags(true, 2, {7, 8});
  ThinkingTracker t(c);
  EXPECT_TRUE(t.inside());
  EXPECT_EQ(t.forced_next(), -1);
  t.push("a");
  EXPECT_EQ(t.forced_next(), -1);
  t.push("b");
  EXPECT_EQ(t.forced_next(), 7);
  t.push("</th");
  EXPECT_EQ(t.forced_next(), 8);
  t.push("ink>");
  EXPECT_FALSE(t.inside());
  EXPECT_EQ(t.forced_next(), -1);
  EXPECT_EQ(t.tokens(), 4);
  // Budget 0: forced from the first token; no budget: never.
  const ThinkingControl zero = think_tags(true, 0, {7});
  EXPECT_EQ(ThinkingTracker(zero).forced_next(), 7);
  const ThinkingControl none = think_tags(true, -1, {7});
  ThinkingTracker free(none);
  for (int i = 0; i < 100; ++i) free.push("x");
  EXPECT_EQ(free.forced_next(), -1);
  EXPECT_EQ(free.tokens(), 100);
}

TEST(EngineThinking, BudgetForcesTheClosingTokens) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories s;
  auto engine = s.engine(test::config(64));
  const std::vector<int32_t> prompt = s.tok().encode("Once upon a time", true, false);
  const std::vector<int32_t> close = s.tok().encode("</think>", false, false);
  ASSERT_GT(close.size(), 1u);
  const test::Output plain = test::run_one(*engine, test::greedy(prompt, 20));

  Request r = test::greedy(prompt, 20);
  r.thinking = think_tags(true, 3, close);
  const test::Output o = test::run_one(*engine, r);
  ASSERT_EQ(o.tokens.size(), 20u);
  EXPECT_EQ(std::vector<int32_t>(o.tokens.begin(), o.tokens.begin() + 3),
            std::vector<int32_t>(plain.tokens.begin(), plain.tokens.begin() + 3));
  EXPECT_EQ(std::vector<int32_t>(o.tokens.begin() + 3, o.tokens.begin() + 3 + long(close.size())), close);
  EXPECT_NE(o.text.find("</think>"), std::string::npos) << o.text;
  RequestHandle h = engine->submit(r);
  engine->run_until_idle();
  int32_t reasoning = -1;
  while (auto ev = h->next(std::chrono::milliseconds(0)))
    if (ev->finished) reasoning = ev->reasoning_tokens;
  EXPECT_EQ(reasoning, 3 + int32_t(close.size()));

  // No budget, never closed: every token is thinking. Not opened: none is.
  Request open_ended = test::greedy(prompt, 10);
  open_ended.thinking = think_tags(true);
  h = engine->submit(open_ended);
  engine->run_until_idle();
  while (auto ev = h->next(std::chrono::milliseconds(0))) {
    if (ev->finished) EXPECT_EQ(ev->reasoning_tokens, 10);
  }
  Request unopened = test::greedy(prompt, 10);
  unopened.thinking = think_tags(false, 0, close);
  const test::Output u = test::run_one(*engine, unopened);
  EXPECT_EQ(u.tokens, std::vector<int32_t>(plain.tokens.begin(), plain.tokens.begin() + 10));
  test::expect_idle(*engine);
}

}  // namespace
}  // namespace rf
