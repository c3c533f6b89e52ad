// Grammar: element matching, rule building, validation (undefined rules, left
// recursion) and printing back as GBNF. See grammar.h.
#include "grammar/grammar.h"

#include <functional>

#include "core/error.h"
#include "core/utf8.h"

namespace rf::grammar {

bool Element::matches(uint32_t cp) const {
  bool in = false;
  for (const CharRange& r : ranges) {
    if (cp >= r.lo && cp <= r.hi) { in = true; break; }
  }
  return in != negated;
}

bool Element::matches_any_in(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const CharRange& r : ranges)
      if (r.lo <= hi && r.hi >= lo) return true;
    return false;
  }
  // Negated: some cp in [lo, hi] lies outside every range. Walk up from lo,
  // skipping past any range that covers the current candidate.
  uint32_t cp = lo;
  bool moved = true;
  while (moved) {
    moved = false;
    for (const CharRange& r : ranges) {
      if (cp >= r.lo && cp <= r.hi) {
        if (r.hi >= hi) return false;
        cp = r.hi + 1;
        moved = true;
      }
    }
  }
  return cp <= hi;
}

Element chars(std::vector<CharRange> ranges, bool negated) {
  Element e;
  e.kind = ElemKind::Chars;
  e.ranges = std::move(ranges);
  e.negated = negated;
  return e;
}
Element one_char(uint32_t cp) { return chars({{cp, cp}}); }
Element ref(uint32_t rule) {
  Element e;
  e.kind = ElemKind::Ref;
  e.rule = rule;
  return e;
}

uint32_t Grammar::reserve_rule(const std::string& name) {
  rule_names.push_back(name);
  rule_alts.emplace_back();
  return uint32_t(rule_names.size() - 1);
}

void Grammar::define_rule(uint32_t id, const std::vector<Sequence>& alts) {
  RF_CHECK(id < rule_names.size(), "grammar: rule id ", id, " out of range");
  rule_alts[id].clear();
  for (const Sequence& seq : alts) {
    rule_alts[id].push_back(uint32_t(elems.size()));
    elems.insert(elems.end(), seq.begin(), seq.end());
    elems.emplace_back();  // End
  }
}

void Grammar::validate() const {
  const size_t n = n_rules();
  RF_CHECK(root < n, "grammar: no root rule");
  for (size_t r = 0; r < n; ++r) {
    RF_CHECK(!rule_alts[r].empty(), "grammar: rule '", rule_names[r], "' has no definition");
    for (uint32_t start : rule_alts[r])
      for (uint32_t p = start; elems[p].kind != ElemKind::End; ++p)
        RF_CHECK(elems[p].kind != ElemKind::Ref || elems[p].rule < n, "grammar: rule '", rule_names[r],
                 "' refers to an unknown rule id");
  }
  // Nullable rules (can match the empty string), by fixpoint.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t p : rule_alts[r]) {
        while (elems[p].kind == ElemKind::Ref && nullable[elems[p].rule]) ++p;
        if (elems[p].kind == ElemKind::End) { nullable[r] = changed = true; break; }
      }
    }
  }
  // Left edges: rule r may expand to rule s without consuming a character.
  std::vector<std::vector<uint32_t>> left(n);
  for (size_t r = 0; r < n; ++r)
    for (uint32_t p : rule_alts[r])
      for (; elems[p].kind == ElemKind::Ref; ++p) {
        left[r].push_back(elems[p].rule);
        if (!nullable[elems[p].rule]) break;
      }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::function<void(uint32_t)> dfs = [&](uint32_t r) {
    color[r] = 1;
    for (uint32_t s : left[r]) {
      RF_CHECK(color[s] != 1, "grammar: rule '", rule_names[s],
               "' is left-recursive (it can reach itself without consuming a character)");
      if (color[s] == 0) dfs(s);
    }
    color[r] = 2;
  };
  for (uint32_t r = 0; r < n; ++r)
    if (color[r] == 0) dfs(r);
}

namespace {
void append_class_char(std::string& out, uint32_t cp) {
  if (cp == ']' || cp == '\\' || cp == '-' || cp == '^' || cp == '"') { out += '\\'; out += char(cp); }
  else if (cp < 0x20 || cp == 0x7F) out += str("\\x", "0123456789ABCDEF"[cp >> 4], "0123456789ABCDEF"[cp & 15]);
  else if (cp >= 0xD800 && cp <= 0xDFFF) out += "\\uFFFD";
  else utf8::append(out, cp);
}
}  // namespace

std::string Grammar::to_gbnf() const {
  std::string out;
  for (size_t r = 0; r < n_rules(); ++r) {
    out += rule_names[r] + " ::=";
    for (size_t a = 0; a < rule_alts[r].size(); ++a) {
      if (a) out += " |";
      for (uint32_t p = rule_alts[r][a]; elems[p].kind != ElemKind::End; ++p) {
        const Element& e = elems[p];
        if (e.kind == ElemKind::Ref) { out += " " + rule_names[e.rule]; continue; }
        out += e.negated ? " [^" : " [";
        for (const CharRange& cr : e.ranges) {
          append_class_char(out, cr.lo);
          if (cr.hi != cr.lo) { out += '-'; append_class_char(out, cr.hi); }
        }
        out += "]";
      }
    }
    out += "\n";
  }
  return out;
}

uint32_t import_rules(Grammar& into, const Grammar& g, const std::string& prefix) {
  const uint32_t base = uint32_t(into.n_rules());
  for (const std::string& name : g.rule_names) into.reserve_rule(prefix + name);
  for (uint32_t r = 0; r < g.n_rules(); ++r) {
    std::vector<Sequence> alts;
    for (uint32_t start : g.rule_alts[r]) {
      Sequence seq;
      for (uint32_t p = start; g.elems[p].kind != ElemKind::End; ++p) {
        Element e = g.elems[p];
        if (e.kind == ElemKind::Ref) e.rule += base;
        seq.push_back(std::move(e));
      }
      alts.push_back(std::move(seq));
    }
    into.define_rule(base + r, alts);
  }
  return base + g.root;
}

Sequence literal(std::string_view text) {
  Sequence seq;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? b : b & (0x3F >> (n - 1));
    for (int k = 1; k < n && i + size_t(k) < text.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + size_t(k)]) & 0x3F);
    seq.push_back(one_char(cp));
    i += size_t(n);
  }
  return seq;
}

}  // namespace rf::grammar
