// Matcher: runs a Grammar over bytes. A State is the set of grammar stacks
// that the bytes so far leave open (like llama.cpp's grammar stacks): each
// stack is a list of positions in Grammar::elems, the top (back) being the
// character class to match next and the rest where to continue when the
// current alternative ends. An empty stack means the root rule is complete.
// Character classes match code points, so the state also holds the bytes of
// an unfinished UTF-8 sequence (at most 3); such a prefix is kept only while
// some stack could still match a code point that starts with it. Invalid
// UTF-8 (stray continuation bytes, overlong forms, surrogates, > U+10FFFF)
// is rejected.
// Invariant: stacks are sorted and unique, and every top is a Chars element.
// States are plain values; the Matcher is immutable and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace rf::grammar {

using Stack = std::vector<uint32_t>;

struct State {
  std::vector<Stack> stacks;  // sorted, unique
  uint8_t pending_len = 0;    // bytes of an unfinished UTF-8 sequence
  uint8_t pending_need = 0;   // its full length (2..4); 0 when none
  char pending[4] = {};

  bool empty() const { return stacks.empty(); }
  // A byte string identifying the state exactly (for caches).
  std::string key() const;
};

class Matcher {
 public:
  explicit Matcher(Grammar g);

  const Grammar& grammar() const { return g_; }
  State initial() const;
  // The state after `bytes`, or nullopt when the grammar cannot continue so.
  std::optional<State> accept_bytes(const State& s, std::string_view bytes) const;
  std::optional<State> accept_byte(const State& s, uint8_t byte) const;
  // True when the text so far is a complete sentence of the grammar (end of
  // generation allowed here).
  bool is_accepting(const State& s) const;
  // Whole-string check: `text` is a sentence of the grammar.
  bool matches(std::string_view text) const;

 private:
  void expand(Stack& st, std::vector<Stack>& out) const;
  void finish(std::vector<Stack>& stacks) const;  // sort + unique
  bool prefix_viable(const State& s) const;
  std::optional<State> accept_code_point(const State& s, uint32_t cp) const;

  Grammar g_;
};

}  // namespace rf::grammar
