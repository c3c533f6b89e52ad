// Token masks: which tokens of a vocabulary may come next in a grammar state.
// TokenTrie holds the byte strings of a vocabulary's tokens as a trie (built
// once per vocabulary); TokenMasker walks it from a State so that tokens with
// a shared prefix check that prefix once, and caches the mask per state key.
// Mask: uint32 words, bit (i % 32) of word (i / 32) set = token i allowed.
// A token is allowed when its bytes are non-empty and the grammar accepts
// them from the state; an end-of-generation token is allowed exactly when
// the state is accepting; tokens with no bytes (control tokens) never.
// The masker is not thread-safe (its cache and stats); one per sequence or
// per engine thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"

namespace rf {
class Tokenizer;
}

namespace rf::grammar {

class TokenTrie {
 public:
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  struct Node {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // (byte, node), sorted by byte
    std::vector<int32_t> tokens;                          // tokens ending here
  };
  const std::vector<Node>& nodes() const { return nodes_; }  // nodes_[0] is the root
  int32_t n_tokens() const { return n_tokens_; }

 private:
  std::vector<Node> nodes_;
  int32_t n_tokens_;
};

// Each token's bytes as generated text (token_to_piece, specials not rendered,
// so control tokens are empty).
std::vector<std::string> token_bytes(const Tokenizer& tok);

struct MaskStats {
  uint64_t computed = 0;     // masks computed by walking the trie
  uint64_t cache_hits = 0;   // masks served from the cache
  double total_us = 0;       // time spent computing (not cache lookups)
  double last_us = 0;        // the most recent computation
  double max_us = 0;
  double mean_us() const { return computed ? total_us / double(computed) : 0; }
};

class TokenMasker {
 public:
  // `eog_ids`: the end-of-generation tokens (allowed iff accepting).
  TokenMasker(const Matcher& m, const TokenTrie& trie, std::vector<int32_t> eog_ids, size_t max_cache = 4096);

  size_t n_words() const { return size_t(trie_.n_tokens() + 31) / 32; }
  // The mask for `s` (cached by s.key(); the reference stays valid until
  // the cache is cleared, which happens when it exceeds max_cache entries).
  const std::vector<uint32_t>& mask(const State& s);
  // Computes without the cache.
  std::vector<uint32_t> compute(const State& s) const;
  const MaskStats& stats() const { return stats_; }
  void clear_cache() { cache_.clear(); }

 private:
  void walk(uint32_t node, const State& s, std::vector<uint32_t>& bits) const;

  const Matcher& m_;
  const TokenTrie& trie_;
  std::vector<int32_t> eog_;
  size_t max_cache_;
  std::unordered_map<std::string, std::vector<uint32_t>> cache_;
  MaskStats stats_;
};

inline bool mask_allows(const std::vector<uint32_t>& mask, int32_t id) {
  return (mask[size_t(id) >> 5] >> (uint32_t(id) & 31)) & 1u;
}

}  // namespace rf::grammar
