// CompiledGrammar: one grammar as the engine runs it (matcher, automaton,
// token masker), shared by every request with the same grammar so that the
// states and masks learned for one request serve the next; GrammarCache
// hands them out by the grammar's exact content and keeps the most recently
// used ones. Both belong to one thread (the engine's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace rf::grammar {

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar g, const TokenTrie& trie, std::vector<int32_t> eog_ids);
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const Matcher& matcher() const { return matcher_; }
  Automaton& automaton() { return automaton_; }
  TokenMasker& masker() { return masker_; }
  // Forgets the automaton's states (and so the cached masks) once they take
  // more than `max_bytes`; call between steps (ids die, States stay valid).
  void trim(size_t max_bytes);

 private:
  Matcher matcher_;
  Automaton automaton_;
  TokenMasker masker_;
};

// A position in a CompiledGrammar: the State (always valid) and its
// automaton id (valid while the automaton's generation is unchanged).
struct GrammarCursor {
  State state;
  int32_t id = -1;
  uint64_t generation = 0;

  // The automaton id of `state`, interned again after a clear.
  int32_t current(Automaton& a) {
    if (id < 0 || generation != a.generation()) id = a.intern(state), generation = a.generation();
    return id;
  }
  // Follows `bytes`; false (cursor unchanged) when the grammar rejects them.
  bool advance(Automaton& a, std::string_view bytes);
};

class GrammarCache {
 public:
  GrammarCache(const TokenTrie& trie, std::vector<int32_t> eog_ids, size_t max_grammars = 32);
  // The compiled form of `g` (compiled on first use, then shared).
  std::shared_ptr<CompiledGrammar> get(const Grammar& g);
  size_t size() const { return by_text_.size(); }

 private:
  const TokenTrie& trie_;
  std::vector<int32_t> eog_;
  size_t max_grammars_;
  std::list<std::pair<std::string, std::shared_ptr<CompiledGrammar>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> by_text_;        // by exact content
};

}  // namespace rf::grammar
