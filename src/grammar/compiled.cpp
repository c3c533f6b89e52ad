// CompiledGrammar, GrammarCursor and GrammarCache (see compiled.h).
#include "grammar/compiled.h"

#include <algorithm>

namespace rf::grammar {

namespace {
template <class T>
void put(std::string& k, const T& v) {
  k.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Bytes that identify a grammar exactly (rules, elements, root).
std::string exact_key(const Grammar& g) {
  std::string k;
  put(k, g.root);
  put(k, g.elems.size());
  for (const Element& e : g.elems) {
    put(k, e.kind);
    put(k, e.negated);
    put(k, e.rule);
    put(k, e.ranges.size());
    for (const CharRange& r : e.ranges) put(k, r.lo), put(k, r.hi);
  }
  put(k, g.rule_alts.size());
  for (const auto& alts : g.rule_alts) {
    put(k, alts.size());
    for (uint32_t a : alts) put(k, a);
  }
  return k;
}
}  // namespace

CompiledGrammar::CompiledGrammar(Grammar g, const TokenTrie& trie, std::vector<int32_t> eog_ids)
    : matcher_(std::move(g)), automaton_(matcher_), masker_(automaton_, trie, std::move(eog_ids)) {}

void CompiledGrammar::forget() {
  automaton_.clear();
  masker_.clear_cache();
}

bool GrammarCursor::advance(Automaton& a, std::string_view bytes) {
  const int32_t next = a.step(current(a), bytes);
  if (next == Automaton::kDead) return false;
  id = next;
  state = a.state(next);
  return true;
}

GrammarCache::GrammarCache(const TokenTrie& trie, std::vector<int32_t> eog_ids, size_t max_grammars)
    : trie_(trie), eog_(std::move(eog_ids)), max_grammars_(max_grammars) {}

std::shared_ptr<CompiledGrammar> GrammarCache::get(const Grammar& g) {
  std::string text = exact_key(g);
  auto it = by_text_.find(text);
  if (it != by_text_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  auto compiled = std::make_shared<CompiledGrammar>(g, trie_, eog_);
  live_.push_back(compiled);
  lru_.emplace_front(text, compiled);
  by_text_.emplace(std::move(text), lru_.begin());
  if (lru_.size() > max_grammars_) {  // requests still using the oldest keep it alive
    by_text_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

size_t GrammarCache::memory_bytes() {
  live_.erase(std::remove_if(live_.begin(), live_.end(), [](const auto& w) { return w.expired(); }), live_.end());
  size_t total = 0;
  for (const auto& w : live_)
    if (auto g = w.lock()) total += g->memory_bytes();
  return total;
}

void GrammarCache::trim(size_t max_bytes) {
  if (memory_bytes() <= max_bytes) return;
  for (const auto& w : live_)
    if (auto g = w.lock()) g->forget();
}

}  // namespace rf::grammar
