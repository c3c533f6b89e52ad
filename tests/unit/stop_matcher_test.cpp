// StopMatcher: stop strings found across token boundaries, held-back text
// released as soon as it can no longer start a stop string, several stops
// (the first to complete ends the output, cut at its earliest match), and
// the pass-through the engine uses before min_tokens. A randomized test
// compares streamed output with a direct search over the whole text.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/stop_matcher.h"

namespace rf {
namespace {

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.push("hello"), "hello");
  EXPECT_EQ(m.push(" world"), " world");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
  StopMatcher empty_only({""});  // empty stop strings are ignored
  EXPECT_EQ(empty_only.push("abc"), "abc");
  EXPECT_FALSE(empty_only.stopped());
}

TEST(StopMatcher, StopInsideOnePiece) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("abcENDdef"), "abc");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "END");
  EXPECT_EQ(m.push("more"), "");  // nothing after the stop
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, StopAcrossTokenBoundaries) {
  StopMatcher m({"<|end|>"});
  EXPECT_EQ(m.push("Hi <"), "Hi ");  // "<" could start the stop: held
  EXPECT_EQ(m.push("|en"), "");
  EXPECT_EQ(m.push("d|"), "");
  EXPECT_EQ(m.push(">tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "<|end|>");
}

TEST(StopMatcher, HeldTextReleasedWhenItCannotMatch) {
  StopMatcher m({"<|end|>"});
  EXPECT_EQ(m.push("a<|e"), "a");
  EXPECT_EQ(m.push("x"), "<|ex");  // the partial match broke: all released at once
  EXPECT_FALSE(m.stopped());
  // A broken partial match that itself contains the start of a new one.
  EXPECT_EQ(m.push("<|<"), "<|");
  EXPECT_EQ(m.push("|end|"), "");
  EXPECT_EQ(m.push(">"), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, FlushReleasesHeldText) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("abcST"), "abc");
  EXPECT_EQ(m.flush(), "ST");  // generation ended for another reason
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, SelfOverlappingStop) {
  StopMatcher m({"aab"});
  EXPECT_EQ(m.push("a"), "");
  EXPECT_EQ(m.push("a"), "");
  EXPECT_EQ(m.push("a"), "a");  // "aaa": only the last "aa" can still start "aab"
  EXPECT_EQ(m.push("b"), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, MultipleStopsFirstCompletedWins) {
  {
    StopMatcher m({"world", "lo"});
    EXPECT_EQ(m.push("hello world"), "hel");  // both complete: the earlier start wins
    EXPECT_EQ(m.matched(), "lo");
  }
  {
    StopMatcher m({"xyz", "b"});
    EXPECT_EQ(m.push("axy"), "a");
    EXPECT_EQ(m.push("zb"), "");  // "xyz" starts first
    EXPECT_EQ(m.matched(), "xyz");
  }
  {
    // Held for the longer candidate; the shorter completes first.
    StopMatcher m({"abcd", "bc"});
    EXPECT_EQ(m.push("ab"), "");
    EXPECT_EQ(m.push("c"), "a");
    EXPECT_EQ(m.matched(), "bc");
  }
  {
    // Held for whichever candidate needs the longest suffix.
    StopMatcher m({"xx1", "x2"});
    EXPECT_EQ(m.push("axx"), "a");
    EXPECT_EQ(m.push("2"), "x");
    EXPECT_EQ(m.matched(), "x2");
  }
}

TEST(StopMatcher, MultiByteText) {
  StopMatcher m({"ü!"});
  EXPECT_EQ(m.push("grüß ü"), "grüß ");
  EXPECT_EQ(m.push("!"), "");
  EXPECT_TRUE(m.stopped());
}

// Before min_tokens the engine pushes with can_stop = false: text is held
// back as usual, but only a stop string ending in later text counts.
TEST(StopMatcher, BeforeMinTokens) {
  {
    StopMatcher m({"ab"});
    std::string out = m.push("a", false);
    EXPECT_EQ(out, "");  // could start "ab": held
    out += m.push("b", false);
    EXPECT_EQ(out, "ab");  // completed too early: released
    EXPECT_FALSE(m.stopped());
    out += m.push("xa");
    EXPECT_EQ(out, "abx");
    out += m.push("b");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(out, "abx");
  }
  {
    // Starts before min_tokens, completes after: it counts.
    StopMatcher m({"abc"});
    EXPECT_EQ(m.push("xa", false), "x");
    EXPECT_EQ(m.push("b", false), "");
    EXPECT_EQ(m.push("c"), "");
    EXPECT_TRUE(m.stopped());
  }
  {
    // "b" completed early inside text still held for "abc": it stays ignored.
    StopMatcher m({"b", "abc"});
    EXPECT_EQ(m.push("ab", false), "");
    EXPECT_EQ(m.push("x"), "abx");
    EXPECT_FALSE(m.stopped());
    EXPECT_EQ(m.push("b"), "");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(m.matched(), "b");
  }
}

// Streams random pieces (the first ones with can_stop = false, as before
// min_tokens) and compares with a search over the whole text: the output
// stops at the first allowed piece that completes a stop string ending
// after the disallowed text, cut at the earliest start of such a match;
// never any part of a stop.
TEST(StopMatcher, RandomizedAgainstWholeTextSearch) {
  std::mt19937 rng(1234);
  const std::string alphabet = "abc";
  auto rand_str = [&](int lo, int hi) {
    std::string s(size_t(std::uniform_int_distribution<int>(lo, hi)(rng)), ' ');
    for (auto& c : s) c = alphabet[rng() % alphabet.size()];
    return s;
  };
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<std::string> stops;
    const int n_stops = 1 + int(rng() % 3);
    for (int i = 0; i < n_stops; ++i) stops.push_back(rand_str(1, 4));
    std::vector<std::string> pieces;
    const int n_pieces = 1 + int(rng() % 8);
    for (int i = 0; i < n_pieces; ++i) pieces.push_back(rand_str(0, 3));

    const size_t n_min = rng() % 3 == 0 ? rng() % (pieces.size() + 1) : 0;
    StopMatcher m(stops);
    std::string text, out, expect;
    size_t ignored = 0;  // text before this pushed with can_stop = false
    bool expect_stop = false;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const std::string& p = pieces[i];
      text += p;
      const bool can_stop = i >= n_min;
      if (!can_stop) ignored = text.size();
      out += m.push(p, can_stop);
      size_t first = std::string::npos;
      for (const auto& s : stops)
        for (size_t at = text.find(s); at != std::string::npos; at = text.find(s, at + 1))
          if (at + s.size() > ignored) first = std::min(first, at);
      if (first != std::string::npos) {
        expect_stop = true;
        expect = text.substr(0, first);
        break;
      }
      // Not stopped: everything is out except the longest suffix that could
      // still start a stop string.
      size_t keep = 0;
      for (const auto& s : stops)
        for (size_t len = std::min(s.size() - 1, text.size()); len > keep; --len)
          if (text.compare(text.size() - len, len, s, 0, len) == 0) keep = len;
      ASSERT_EQ(out, text.substr(0, text.size() - keep)) << "iteration " << iter;
    }
    if (!expect_stop) {
      out += m.flush();
      expect = text;
    }
    ASSERT_EQ(m.stopped(), expect_stop) << "iteration " << iter;
    ASSERT_EQ(out, expect) << "iteration " << iter;
  }
}

}  // namespace
}  // namespace rf
