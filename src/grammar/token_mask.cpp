// Token trie and masks (see token_mask.h).
#include "grammar/token_mask.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace rf::grammar {

// Inserting the tokens in byte order creates nodes in depth-first preorder
// (a subtree's nodes are contiguous, so a walk reads memory mostly forward):
// each token shares a prefix with the one before and adds nodes below it.
TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes) : n_tokens_(int32_t(token_bytes.size())) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n_tokens_; ++id)
    if (!token_bytes[size_t(id)].empty()) ids.push_back(id);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return token_bytes[size_t(a)] < token_bytes[size_t(b)]; });
  std::vector<uint32_t> parent{0};
  std::vector<uint8_t> byte{0};
  std::vector<int32_t> end_node(ids.size());  // the node each token ends at
  std::vector<uint32_t> path{0};              // path[d]: the node after d bytes of the previous token
  const std::string* prev = nullptr;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& b = token_bytes[size_t(ids[i])];
    size_t common = 0;
    if (prev)
      while (common < b.size() && common < prev->size() && b[common] == (*prev)[common]) ++common;
    path.resize(common + 1);
    for (size_t d = common; d < b.size(); ++d) {
      parent.push_back(path.back());
      byte.push_back(uint8_t(b[d]));
      path.push_back(uint32_t(parent.size() - 1));
    }
    end_node[i] = int32_t(path.back());
    prev = &b;
  }
  const size_t n = parent.size();
  first_edge_.assign(n + 1, 0);
  first_token_.assign(n + 1, 0);
  for (size_t v = 1; v < n; ++v) ++first_edge_[parent[v] + 1];
  for (size_t i = 0; i < ids.size(); ++i) ++first_token_[size_t(end_node[i]) + 1];
  for (size_t v = 0; v < n; ++v) first_edge_[v + 1] += first_edge_[v], first_token_[v + 1] += first_token_[v];
  edges_.resize(n - 1);
  tokens_.resize(ids.size());
  std::vector<uint32_t> fill(first_edge_.begin(), first_edge_.end() - 1);
  for (size_t v = 1; v < n; ++v) edges_[fill[parent[v]]++] = Edge{byte[v], uint32_t(v)};  // in byte order
  fill.assign(first_token_.begin(), first_token_.end() - 1);
  for (size_t i = 0; i < ids.size(); ++i) tokens_[fill[size_t(end_node[i])]++] = ids[i];
}

std::vector<std::string> token_bytes(const Tokenizer& tok) {
  std::vector<std::string> out(size_t(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id) out[size_t(id)] = tok.token_to_piece(id, false);
  return out;
}

TokenMasker::TokenMasker(Automaton& a, const TokenTrie& trie, std::vector<int32_t> eog_ids, size_t max_cache_bytes)
    : a_(a), trie_(trie), eog_(std::move(eog_ids)), max_cache_bytes_(max_cache_bytes), generation_(a.generation()) {
  for (int32_t id : eog_)
    RF_CHECK(id >= 0 && id < trie.n_tokens(), "grammar mask: EOG id ", id, " outside the vocabulary");
}

void TokenMasker::walk(uint32_t node, int32_t id, std::vector<uint32_t>& bits) {
  for (const TokenTrie::Edge& e : trie_.children(node)) {
    const int32_t next = a_.step(id, e.byte);
    if (next == Automaton::kDead) continue;
    for (int32_t t : trie_.tokens(e.node)) bits[size_t(t) >> 5] |= 1u << (uint32_t(t) & 31);
    walk(e.node, next, bits);
  }
}

std::vector<uint32_t> TokenMasker::compute(int32_t id) {
  std::vector<uint32_t> bits(n_words(), 0);
  walk(0, id, bits);
  const bool accepting = a_.accepting(id);
  for (int32_t t : eog_) {
    uint32_t bit = 1u << (uint32_t(t) & 31);
    if (accepting)
      bits[size_t(t) >> 5] |= bit;
    else
      bits[size_t(t) >> 5] &= ~bit;
  }
  return bits;
}

const std::vector<uint32_t>& TokenMasker::mask(int32_t id) {
  if (generation_ != a_.generation()) cache_.clear(), generation_ = a_.generation();
  auto it = cache_.find(id);
  if (it != cache_.end()) {
    ++stats_.cache_hits;
    return it->second;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<uint32_t> bits = compute(id);
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.computed;
  stats_.total_us += us;
  stats_.last_us = us;
  stats_.max_us = std::max(stats_.max_us, us);
  if (cache_bytes() + bits.size() * sizeof(uint32_t) > max_cache_bytes_) cache_.clear();
  return cache_.emplace(id, std::move(bits)).first->second;
}

}  // namespace rf::grammar
