// The lazily built automaton against the matcher it is built from: every
// transition along random byte strings agrees with Matcher::accept_byte
// (same state, same rejection, same acceptance), clear() forgets states and
// bumps the generation, a cursor survives a clear, and a masker's cache
// follows the automaton's generation.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "grammar/automaton.h"
#include "grammar/compiled.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace rf::grammar {
namespace {

TEST(GrammarAutomaton, TransitionsAgreeWithTheMatcher) {
  Matcher m(parse_gbnf(json_value_gbnf()));
  Automaton a(m);
  std::mt19937 rng(3);
  const std::string alphabet = "{}[]\":,. \n0123456789-+eEtrufalsn\\\xC3\xA9\xE2\x82\xAC\xF0";
  int steps = 0;
  for (int run = 0; run < 300; ++run) {
    State s = m.initial();
    int32_t id = a.intern(s);
    for (int i = 0; i < 40; ++i) {
      const uint8_t b = uint8_t(alphabet[rng() % alphabet.size()]);
      std::optional<State> ref = m.accept_byte(s, b);
      const int32_t next = a.step(id, b);
      ++steps;
      ASSERT_EQ(next == Automaton::kDead, !ref.has_value()) << "run " << run << " byte " << int(b);
      if (!ref) continue;  // try another byte from the same state
      ASSERT_EQ(a.state(next).key(), ref->key());
      ASSERT_EQ(a.accepting(next), m.is_accepting(*ref));
      ASSERT_EQ(a.intern(*ref), next);  // one id per distinct state
      s = *ref;
      id = next;
    }
  }
  EXPECT_GT(steps, 10000);
  EXPECT_GT(a.size(), 10u);
}

TEST(GrammarAutomaton, ClearForgetsStatesAndCursorsReintern) {
  Matcher m(parse_gbnf("root ::= \"ab\" [0-9]+ \"c\"\n"));
  Automaton a(m);
  GrammarCursor cur;
  cur.state = m.initial();
  ASSERT_TRUE(cur.advance(a, "ab1"));
  EXPECT_FALSE(cur.advance(a, "x"));  // rejected: the cursor stays
  const uint64_t gen = a.generation();
  const std::string key = cur.state.key();
  a.clear();
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.generation(), gen + 1);
  EXPECT_EQ(cur.state.key(), key);
  ASSERT_TRUE(cur.advance(a, "23c"));  // interned again from its State
  EXPECT_TRUE(a.accepting(cur.current(a)));
  EXPECT_FALSE(cur.advance(a, "c"));
}

TEST(GrammarAutomaton, MaskCacheFollowsTheGeneration) {
  // Vocabulary: a few strings; the grammar allows digits then "!".
  const std::vector<std::string> vocab{"1", "12", "!", "a", "1!", ""};
  TokenTrie trie(vocab);
  EXPECT_EQ(trie.n_tokens(), 6);
  Matcher m(parse_gbnf("root ::= [0-9]+ \"!\"\n"));
  Automaton a(m);
  TokenMasker masker(a, trie, {5});
  const std::vector<uint32_t> first = masker.mask(m.initial());
  EXPECT_EQ(first[0], 0b010011u);  // "1", "12", "1!"
  const State after = *m.accept_bytes(m.initial(), "1");
  EXPECT_EQ(masker.mask(after)[0], 0b010111u);  // "1", "12", "!", "1!"
  EXPECT_EQ(masker.stats().computed, 2u);
  a.clear();  // ids are reused for other states: the cache must not answer
  const State done = *m.accept_bytes(m.initial(), "1!");
  EXPECT_EQ(masker.mask(done)[0],
            0b100000u);  // only the end-of-generation token
  EXPECT_EQ(masker.mask(m.initial())[0], 0b010011u);
  EXPECT_EQ(masker.stats().computed, 4u);
}

// The cache shares a compiled grammar by content, keeps the most recent
// ones, and trim() makes every live one (cached or held) forget what it
// learned once together they take too much; masks stay right afterwards.
TEST(GrammarAutomaton, CacheSharesByContentAndBoundsMemory) {
  const std::vector<std::string> vocab{"1", "12", "!", "a", "1!", ""};
  TokenTrie trie(vocab);
  GrammarCache cache(trie, {5}, /*max_grammars=*/1);
  auto digits = cache.get(parse_gbnf("root ::= [0-9]+ \"!\"\n"));
  EXPECT_EQ(cache.get(parse_gbnf("root ::= [0-9]+ \"!\"\n")), digits);  // same content, same object
  const State one = *digits->matcher().accept_bytes(digits->matcher().initial(), "1");
  const std::vector<uint32_t> before = digits->masker().mask(one);
  EXPECT_GT(cache.memory_bytes(), 0u);
  auto letters = cache.get(parse_gbnf("root ::= [a-z]+\n"));  // evicts `digits` from the cache, not from us
  EXPECT_EQ(cache.size(), 1u);
  letters->masker().mask(letters->matcher().initial());
  const size_t both = cache.memory_bytes();
  EXPECT_GT(both, digits->memory_bytes());  // the held, evicted one still counts
  cache.trim(both);                          // within the budget: nothing forgotten
  EXPECT_EQ(cache.memory_bytes(), both);
  cache.trim(1);
  EXPECT_EQ(digits->memory_bytes(), 0u);
  EXPECT_EQ(letters->memory_bytes(), 0u);
  EXPECT_EQ(digits->masker().mask(one), before);  // learned again, the same
  digits.reset();
  letters->forget();
  EXPECT_EQ(cache.memory_bytes(), 0u);  // the dropped one is gone from the count
}

TEST(GrammarAutomaton, TrieStoresEveryTokenOnce) {
  const std::vector<std::string> vocab{"ab", "a", "b", "", "abc", "ab", "\xFF"};
  TokenTrie trie(vocab);
  // Walk every path; collect (token, bytes).
  std::vector<std::string> seen(vocab.size());
  std::vector<int> count(vocab.size(), 0);
  std::vector<std::pair<uint32_t, std::string>> todo{{0, ""}};
  while (!todo.empty()) {
    auto [node, prefix] = todo.back();
    todo.pop_back();
    for (int32_t t : trie.tokens(node)) seen[size_t(t)] = prefix, ++count[size_t(t)];
    uint8_t last = 0;
    bool first = true;
    for (const TokenTrie::Edge& e : trie.children(node)) {
      EXPECT_TRUE(first || e.byte > last) << "children sorted by byte";
      first = false, last = e.byte;
      EXPECT_GT(e.node, node) << "preorder ids";
      todo.push_back({e.node, prefix + char(e.byte)});
    }
  }
  for (size_t t = 0; t < vocab.size(); ++t) {
    EXPECT_EQ(count[t], vocab[t].empty() ? 0 : 1) << t;
    if (!vocab[t].empty()) {
      EXPECT_EQ(seen[t], vocab[t]);
    }
  }
  EXPECT_EQ(trie.n_nodes(), 6u);  // root, a, ab, abc, b, \xFF
}

}  // namespace
}  // namespace rf::grammar
