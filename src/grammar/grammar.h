// Grammar: the representation every grammar source (GBNF text, JSON Schema)
// becomes, and what the matcher walks. A grammar is a list of rules; a rule is
// a list of alternatives; an alternative is a sequence of elements, each a
// character class over Unicode code points (ranges, possibly negated) or a
// reference to a rule. Repetitions and groups are already expanded into
// generated rules (right-recursive, so they never loop).
// Layout, for the matcher: all elements of all alternatives sit in one flat
// array `elems`; each alternative ends with an End element, and
// `rule_alts[r]` holds the index of the first element of each alternative of
// rule r. A position is an index into `elems`.
// Invariants after validate(): every reference names a rule, `root` exists,
// and no rule can reach itself without consuming a character (no left
// recursion), so expanding references always terminates.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rf::grammar {

struct CharRange {
  uint32_t lo, hi;  // inclusive code points
};

enum class ElemKind : uint8_t { Chars, Ref, End };

struct Element {
  ElemKind kind = ElemKind::End;
  bool negated = false;           // Chars: matches code points NOT in ranges
  uint32_t rule = 0;              // Ref: the rule id
  std::vector<CharRange> ranges;  // Chars

  bool matches(uint32_t cp) const;
  // Whether some code point in [lo, hi] matches (a partial UTF-8 sequence).
  bool matches_any_in(uint32_t lo, uint32_t hi) const;
};

// One alternative while building: a sequence of elements (no End).
using Sequence = std::vector<Element>;

struct Grammar {
  std::vector<std::string> rule_names;         // [n_rules]
  std::vector<Element> elems;                  // flat, End-terminated alternatives
  std::vector<std::vector<uint32_t>> rule_alts;  // [n_rules] start positions
  uint32_t root = 0;

  size_t n_rules() const { return rule_names.size(); }
  // Adds a rule (or fills one reserved by reserve_rule) with its alternatives.
  void define_rule(uint32_t id, const std::vector<Sequence>& alts);
  uint32_t reserve_rule(const std::string& name);
  // Checks the invariants above; throws rf::Error naming the offending rule.
  void validate() const;
  // GBNF text of the grammar (for debugging and error messages).
  std::string to_gbnf() const;
};

// Copies every rule of `g` into `into`, names prefixed with `prefix` and
// references renumbered; returns the id of g's root there (grammars composed
// of others: a tool call around each tool's argument schema).
uint32_t import_rules(Grammar& into, const Grammar& g, const std::string& prefix);
// The code points of UTF-8 `text`, one element each.
Sequence literal(std::string_view text);

// Element constructors.
Element chars(std::vector<CharRange> ranges, bool negated = false);
Element one_char(uint32_t cp);
Element ref(uint32_t rule);

}  // namespace rf::grammar
