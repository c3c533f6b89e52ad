// Matcher (see matcher.h): stack expansion, code-point steps and the UTF-8
// byte layer on top of them.
#include "grammar/matcher.h"

#include <algorithm>

#include "core/error.h"
#include "core/utf8.h"

namespace rf::grammar {

std::string State::key() const {
  std::string k(pending, pending_len);
  k.insert(k.begin(), char(pending_len));
  size_t n = k.size();
  for (const Stack& st : stacks) n += (st.size() + 1) * sizeof(uint32_t);
  k.reserve(n);
  for (const Stack& st : stacks) {
    const auto len = uint32_t(st.size());
    k.append(reinterpret_cast<const char*>(&len), sizeof len);
    k.append(reinterpret_cast<const char*>(st.data()), st.size() * sizeof(uint32_t));
  }
  return k;
}

Matcher::Matcher(Grammar g) : g_(std::move(g)) { g_.validate(); }

// Resolves references at the top of `st` until each resulting stack has a
// character class on top (or is empty), appending those to `out`.
// Terminates because the grammar has no left recursion.
void Matcher::expand(Stack& st, std::vector<Stack>& out) const {
  if (st.empty()) { out.push_back(st); return; }
  uint32_t pos = st.back();
  const Element& e = g_.elems[pos];
  if (e.kind == ElemKind::Chars) { out.push_back(st); return; }
  st.pop_back();
  if (e.kind == ElemKind::End) { expand(st, out); st.push_back(pos); return; }
  // Ref: continue after it once the referenced rule is done.
  bool cont = g_.elems[pos + 1].kind != ElemKind::End;
  if (cont) st.push_back(pos + 1);
  for (uint32_t start : g_.rule_alts[e.rule]) {
    Stack next = st;
    if (g_.elems[start].kind != ElemKind::End) next.push_back(start);
    expand(next, out);
  }
  if (cont) st.pop_back();
  st.push_back(pos);
}

void Matcher::finish(std::vector<Stack>& stacks) const {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

State Matcher::initial() const {
  State s;
  for (uint32_t start : g_.rule_alts[g_.root]) {
    Stack st;
    if (g_.elems[start].kind != ElemKind::End) st.push_back(start);
    expand(st, s.stacks);
  }
  finish(s.stacks);
  return s;
}

std::optional<State> Matcher::accept_code_point(const State& s, uint32_t cp) const {
  State next;
  for (const Stack& st : s.stacks) {
    if (st.empty() || !g_.elems[st.back()].matches(cp)) continue;
    Stack rest = st;
    uint32_t pos = rest.back();
    rest.pop_back();
    if (g_.elems[pos + 1].kind != ElemKind::End) rest.push_back(pos + 1);
    expand(rest, next.stacks);
  }
  if (next.stacks.empty()) return std::nullopt;
  finish(next.stacks);
  return next;
}

// Some stack can match a code point that starts with the pending bytes.
bool Matcher::prefix_viable(const State& s) const {
  const int need = s.pending_need, have = s.pending_len;
  uint32_t lo = uint8_t(s.pending[0]) & (0x7F >> need);
  for (int i = 1; i < have; ++i) lo = (lo << 6) | (uint8_t(s.pending[i]) & 0x3F);
  uint32_t hi = lo;
  for (int i = have; i < need; ++i) { lo <<= 6; hi = (hi << 6) | 0x3F; }
  // Only scalar values of this length: not overlong, not > U+10FFFF, no surrogates.
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  lo = std::max(lo, kMin[need]);
  hi = std::min(hi, uint32_t(0x10FFFF));
  const CharRange parts[2] = {{lo, std::min(hi, uint32_t(0xD7FF))}, {std::max(lo, uint32_t(0xE000)), hi}};
  for (const Stack& st : s.stacks) {
    if (st.empty()) continue;
    for (const CharRange& r : parts)
      if (r.lo <= r.hi && g_.elems[st.back()].matches_any_in(r.lo, r.hi)) return true;
  }
  return false;
}

std::optional<State> Matcher::accept_byte(const State& s, uint8_t b) const {
  if (s.pending_need == 0) {
    if (b < 0x80) return accept_code_point(s, b);
    if (b < 0xC2 || b > 0xF4) return std::nullopt;  // continuation, overlong lead, or > U+10FFFF
    State next = s;
    next.pending_need = uint8_t(utf8::lead_length(b));
    next.pending_len = 1;
    next.pending[0] = char(b);
    if (!prefix_viable(next)) return std::nullopt;
    return next;
  }
  if ((b & 0xC0) != 0x80) return std::nullopt;
  State next = s;
  next.pending[next.pending_len++] = char(b);
  if (next.pending_len == next.pending_need) {
    size_t p = 0;
    uint32_t cp;
    if (!utf8::decode(std::string_view(next.pending, next.pending_len), p, cp)) return std::nullopt;
    State clean = s;
    clean.pending_len = clean.pending_need = 0;
    return accept_code_point(clean, cp);
  }
  if (!prefix_viable(next)) return std::nullopt;
  return next;
}

std::optional<State> Matcher::accept_bytes(const State& s, std::string_view bytes) const {
  std::optional<State> cur = s;
  for (char c : bytes) {
    cur = accept_byte(*cur, uint8_t(c));
    if (!cur) return std::nullopt;
  }
  return cur;
}

bool Matcher::is_accepting(const State& s) const {
  if (s.pending_need) return false;
  return std::any_of(s.stacks.begin(), s.stacks.end(), [](const Stack& st) { return st.empty(); });
}

bool Matcher::matches(std::string_view text) const {
  std::optional<State> s = accept_bytes(initial(), text);
  return s && is_accepting(*s);
}

}  // namespace rf::grammar
