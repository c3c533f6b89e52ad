// Token masks: which tokens of a vocabulary may come next in a grammar state.
// TokenTrie holds the byte strings of a vocabulary's tokens as a trie (built
// once per vocabulary, stored flat in depth-first order); TokenMasker walks
// it through a grammar's Automaton, so tokens with a shared prefix check that
// prefix once and each trie edge costs a table lookup once the automaton
// knows the states involved. Masks are cached per automaton state (bounded
// in bytes; the cache empties when the automaton is cleared).
// Mask: uint32 words, bit (i % 32) of word (i / 32) set = token i allowed.
// A token is allowed when its bytes are non-empty and the grammar accepts
// them from the state; an end-of-generation token is allowed exactly when
// the state is accepting; tokens with no bytes (control tokens) never.
// The masker is not thread-safe (its automaton, cache and stats).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/matcher.h"

namespace rf {
class Tokenizer;
}

namespace rf::grammar {

class TokenTrie {
 public:
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  struct Edge {
    uint8_t byte;
    uint32_t node;
  };
  // Node 0 is the root. Children sorted by byte.
  std::span<const Edge> children(uint32_t node) const {
    return {edges_.data() + first_edge_[node], edges_.data() + first_edge_[node + 1]};
  }
  // The tokens whose bytes end at `node`.
  std::span<const int32_t> tokens(uint32_t node) const {
    return {tokens_.data() + first_token_[node], tokens_.data() + first_token_[node + 1]};
  }
  size_t n_nodes() const { return first_edge_.size() - 1; }
  int32_t n_tokens() const { return n_tokens_; }

 private:
  std::vector<uint32_t> first_edge_, first_token_;  // [n_nodes + 1]
  std::vector<Edge> edges_;
  std::vector<int32_t> tokens_;
  int32_t n_tokens_;
};

// Each token's bytes as generated text (token_to_piece, specials not rendered,
// so control tokens are empty).
std::vector<std::string> token_bytes(const Tokenizer& tok);

struct MaskStats {
  uint64_t computed = 0;    // masks computed by walking the trie
  uint64_t cache_hits = 0;  // masks served from the cache
  double total_us = 0;      // time spent computing (not cache lookups)
  double last_us = 0;       // the most recent computation
  double max_us = 0;
  double mean_us() const { return computed ? total_us / double(computed) : 0; }
};

class TokenMasker {
 public:
  // `eog_ids`: the end-of-generation tokens (allowed iff accepting).
  TokenMasker(Automaton& a, const TokenTrie& trie, std::vector<int32_t> eog_ids, size_t max_cache_bytes = 64u << 20);

  size_t n_words() const { return size_t(trie_.n_tokens() + 31) / 32; }
  // The mask for automaton state `id` (cached; the reference stays valid
  // until the next call).
  const std::vector<uint32_t>& mask(int32_t id);
  const std::vector<uint32_t>& mask(const State& s) { return mask(a_.intern(s)); }
  // Computes without the cache.
  std::vector<uint32_t> compute(int32_t id);
  std::vector<uint32_t> compute(const State& s) { return compute(a_.intern(s)); }
  const MaskStats& stats() const { return stats_; }
  size_t cache_bytes() const { return cache_.size() * n_words() * sizeof(uint32_t); }
  void clear_cache() { cache_.clear(); }

 private:
  void walk(uint32_t node, int32_t id, std::vector<uint32_t>& bits);

  Automaton& a_;
  const TokenTrie& trie_;
  std::vector<int32_t> eog_;
  size_t max_cache_bytes_;
  uint64_t generation_;  // the automaton's, when the cache was filled
  std::unordered_map<int32_t, std::vector<uint32_t>> cache_;
  MaskStats stats_;
};

inline bool mask_allows(const std::vector<uint32_t>& mask, int32_t id) {
  return (mask[size_t(id) >> 5] >> (uint32_t(id) & 31)) & 1u;
}

}  // namespace rf::grammar
