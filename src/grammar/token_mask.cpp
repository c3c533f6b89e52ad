// Token trie and masks (see token_mask.h).
#include "grammar/token_mask.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace rf::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes) : n_tokens_(int32_t(token_bytes.size())) {
  nodes_.emplace_back();
  for (int32_t id = 0; id < n_tokens_; ++id) {
    const std::string& b = token_bytes[size_t(id)];
    if (b.empty()) continue;
    uint32_t node = 0;
    for (char c : b) {
      auto& ch = nodes_[node].children;
      auto it = std::lower_bound(ch.begin(), ch.end(), uint8_t(c),
                                 [](const auto& p, uint8_t v) { return p.first < v; });
      if (it != ch.end() && it->first == uint8_t(c)) {
        node = it->second;
      } else {
        uint32_t fresh = uint32_t(nodes_.size());
        ch.insert(it, {uint8_t(c), fresh});
        nodes_.emplace_back();  // may reallocate: `ch` is not used after this
        node = fresh;
      }
    }
    nodes_[node].tokens.push_back(id);
  }
}

std::vector<std::string> token_bytes(const Tokenizer& tok) {
  std::vector<std::string> out(size_t(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id) out[size_t(id)] = tok.token_to_piece(id, false);
  return out;
}

TokenMasker::TokenMasker(const Matcher& m, const TokenTrie& trie, std::vector<int32_t> eog_ids, size_t max_cache)
    : m_(m), trie_(trie), eog_(std::move(eog_ids)), max_cache_(max_cache) {
  for (int32_t id : eog_) RF_CHECK(id >= 0 && id < trie.n_tokens(), "grammar mask: EOG id ", id, " outside the vocabulary");
}

void TokenMasker::walk(uint32_t node, const State& s, std::vector<uint32_t>& bits) const {
  for (const auto& [byte, child] : trie_.nodes()[node].children) {
    std::optional<State> next = m_.accept_byte(s, byte);
    if (!next) continue;
    for (int32_t id : trie_.nodes()[child].tokens) bits[size_t(id) >> 5] |= 1u << (uint32_t(id) & 31);
    walk(child, *next, bits);
  }
}

std::vector<uint32_t> TokenMasker::compute(const State& s) const {
  std::vector<uint32_t> bits(n_words(), 0);
  walk(0, s, bits);
  const bool accepting = m_.is_accepting(s);
  for (int32_t id : eog_) {
    uint32_t bit = 1u << (uint32_t(id) & 31);
    if (accepting) bits[size_t(id) >> 5] |= bit;
    else bits[size_t(id) >> 5] &= ~bit;
  }
  return bits;
}

const std::vector<uint32_t>& TokenMasker::mask(const State& s) {
  std::string key = s.key();
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    ++stats_.cache_hits;
    return it->second;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<uint32_t> bits = compute(s);
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.computed;
  stats_.total_us += us;
  stats_.last_us = us;
  stats_.max_us = std::max(stats_.max_us, us);
  if (cache_.size() >= max_cache_) cache_.clear();
  return cache_.emplace(std::move(key), std::move(bits)).first->second;
}

}  // namespace rf::grammar
