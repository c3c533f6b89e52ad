// CompiledGrammar: one grammar as the engine runs it (matcher, automaton,
// token masker), shared by every request with the same grammar so that the
// states and masks learned for one request serve the next; GrammarCache
// hands them out by the grammar's exact content, keeps the most recently
// used ones and bounds the memory all live ones take. Both belong to one thread (the engine's).
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
  // What its learned states and cached masks take (about).
  size_t memory_bytes() const { return automaton_.memory_bytes() + masker_.cache_bytes(); }
  // Forgets the automaton's states and the cached masks; call between steps
  // (ids die, cursors' States stay valid).
  void forget();

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
  // What every compiled grammar still alive (cached, or held by a request)
  // has learned, together; trim() makes them all forget it past
  // `max_bytes`, so host memory stays bounded whatever grammars clients
  // send. Between steps.
  size_t memory_bytes();
  void trim(size_t max_bytes);

 private:
  const TokenTrie& trie_;
  std::vector<int32_t> eog_;
  size_t max_grammars_;
  std::list<std::pair<std::string, std::shared_ptr<CompiledGrammar>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> by_text_;        // by exact content
  std::vector<std::weak_ptr<CompiledGrammar>> live_;  // every one handed out (expired ones pruned)
};

}  // namespace rf::grammar
