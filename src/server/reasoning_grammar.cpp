// The thinking section's grammar (reasoning_grammar.h).
#include "server/reasoning_grammar.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"

namespace rf::server {
namespace {

// The code points of an ASCII or UTF-8 tag.
std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  for (const grammar::Element& e : grammar::literal(s)) out.push_back(e.ranges.front().lo);
  return out;
}

// After matching t[0, k) then c: the length of the longest prefix of t that
// the text now ends with (k + 1 when c continues the match).
size_t next_state(const std::vector<uint32_t>& t, size_t k, uint32_t c) {
  if (k < t.size() && t[k] == c) return k + 1;
  std::vector<uint32_t> s(t.begin(), t.begin() + long(k));
  s.push_back(c);
  for (size_t j = std::min(s.size(), t.size() - 1); j > 0; --j)
    if (std::equal(t.begin(), t.begin() + long(j), s.end() - long(j))) return j;
  return 0;
}

}  // namespace

grammar::Grammar after_thinking(const grammar::Grammar& body, bool starts_inside, std::string_view open,
                                std::string_view close) {
  using grammar::Sequence;
  const std::vector<uint32_t> t = code_points(close);
  RF_CHECK(!t.empty(), "thinking grammar: empty close tag");
  grammar::Grammar g;
  const uint32_t root = g.reserve_rule("root");
  std::vector<uint32_t> state(t.size());
  for (size_t k = 0; k < t.size(); ++k) state[k] = g.reserve_rule("think-" + std::to_string(k));
  const uint32_t ws = g.reserve_rule("think-ws");
  const uint32_t answer = grammar::import_rules(g, body, "answer-");
  const uint32_t after = g.reserve_rule("think-end");

  std::vector<uint32_t> alphabet = t;
  std::sort(alphabet.begin(), alphabet.end());
  alphabet.erase(std::unique(alphabet.begin(), alphabet.end()), alphabet.end());
  std::vector<grammar::CharRange> others;
  for (uint32_t c : alphabet) others.push_back({c, c});
  for (size_t k = 0; k < t.size(); ++k) {
    std::vector<Sequence> alts;
    for (uint32_t c : alphabet) {
      const size_t j = next_state(t, k, c);
      alts.push_back({grammar::one_char(c), grammar::ref(j == t.size() ? after : state[j])});
    }
    alts.push_back({grammar::chars(others, /*negated=*/true), grammar::ref(state[0])});
    g.define_rule(state[k], alts);
  }
  g.define_rule(ws, {{grammar::chars({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}}), grammar::ref(ws)}, {}});
  g.define_rule(after, {{grammar::ref(ws), grammar::ref(answer)}});
  if (starts_inside) {
    g.define_rule(root, {{grammar::ref(state[0])}});
  } else {
    Sequence opened = grammar::literal(open);
    opened.push_back(grammar::ref(state[0]));
    g.define_rule(root, {opened, {grammar::ref(answer)}});
  }
  g.root = root;
  g.validate();
  return g;
}

}  // namespace rf::server
