// SPM and byte-level BPE merging over a linked list of symbols with a heap of
// candidate pairs (see encoders.h).
#include "tokenizer/encoders.h"

#include <cstdio>
#include <queue>
#include <string>

#include "core/utf8.h"

namespace rf::detail {
namespace {

struct Symbol {
  int32_t prev, next;
  uint32_t off, len;  // bytes of the text; len 0 once merged into its left neighbour
};

// Splits `text` into symbols of one character each; a byte that does not
// start a well-formed sequence is a symbol of its own (llama.cpp instead takes
// the lead byte's length, which can swallow the next character of malformed
// input; for valid UTF-8 the two agree).
std::vector<Symbol> make_symbols(std::string_view text) {
  std::vector<Symbol> syms;
  syms.reserve(text.size());
  uint32_t off = 0;
  const auto n = uint32_t(text.size());
  while (off < n) {
    size_t end = off;
    uint32_t cp;
    const uint32_t len = utf8::decode(text, end, cp) ? uint32_t(end - off) : 1;
    const auto idx = int32_t(syms.size());
    syms.push_back({idx - 1, off + len == n ? -1 : idx + 1, off, len});
    off += len;
  }
  return syms;
}

// Removes `right` (the successor of `left`) from the list after a merge.
void merge_into_left(std::vector<Symbol>& syms, int32_t left, int32_t right) {
  Symbol& l = syms[size_t(left)];
  Symbol& r = syms[size_t(right)];
  l.len += r.len;
  r.len = 0;
  l.next = r.next;
  if (r.next >= 0) syms[size_t(r.next)].prev = left;
}

struct SpmPair {
  float score;
  int32_t left, right;
  uint32_t size;
};
struct SpmOrder {  // highest score first, then leftmost
  bool operator()(const SpmPair& a, const SpmPair& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

void push_byte_tokens(const Vocab& vocab, std::string_view bytes, std::vector<int32_t>& out) {
  for (char c : bytes) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", unsigned(uint8_t(c)));
    int32_t id = vocab.find(hex);
    if (id == Vocab::kNone) id = vocab.find(std::string_view(&c, 1));
    if (id == Vocab::kNone) id = vocab.unk;
    if (id != Vocab::kNone) out.push_back(id);
  }
}

}  // namespace

void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Symbol> syms = make_symbols(text);
  if (syms.empty()) return;
  std::priority_queue<SpmPair, std::vector<SpmPair>, SpmOrder> heap;
  auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t size = syms[size_t(left)].len + syms[size_t(right)].len;
    const int32_t id = vocab.find(text.substr(syms[size_t(left)].off, size));
    if (id == Vocab::kNone) return;
    heap.push({vocab.scores[size_t(id)], left, right, size});
  };
  for (int32_t i = 1; i < int32_t(syms.size()); ++i) try_pair(i - 1, i);

  while (!heap.empty()) {
    const SpmPair p = heap.top();
    heap.pop();
    const Symbol& l = syms[size_t(p.left)];
    const Symbol& r = syms[size_t(p.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != p.size) continue;  // stale
    merge_into_left(syms, p.left, p.right);
    try_pair(syms[size_t(p.left)].prev, p.left);
    try_pair(p.left, syms[size_t(p.left)].next);
  }

  for (int32_t i = 0; i != -1; i = syms[size_t(i)].next) {
    const std::string_view piece = text.substr(syms[size_t(i)].off, syms[size_t(i)].len);
    const int32_t id = vocab.find(piece);
    if (id != Vocab::kNone) out.push_back(id);
    else push_byte_tokens(vocab, piece, out);
  }
}

namespace {

struct BpePair {
  int32_t rank;
  int32_t left, right;
  uint32_t left_len, right_len;
};
struct BpeOrder {  // lowest rank first, then leftmost
  bool operator()(const BpePair& a, const BpePair& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void bpe_encode_word(const Vocab& vocab, std::string_view word, bool ignore_merges, std::vector<int32_t>& out) {
  if (word.empty()) return;
  if (ignore_merges) {
    if (int32_t id = vocab.find(word); id != Vocab::kNone) {
      out.push_back(id);
      return;
    }
  }
  std::vector<Symbol> syms = make_symbols(word);
  std::priority_queue<BpePair, std::vector<BpePair>, BpeOrder> heap;
  std::string scratch;
  auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = syms[size_t(left)];
    const Symbol& r = syms[size_t(right)];
    const int32_t rank = vocab.merge_rank(word.substr(l.off, l.len), word.substr(r.off, r.len), scratch);
    if (rank < 0) return;
    heap.push({rank, left, right, l.len, r.len});
  };
  for (int32_t i = 1; i < int32_t(syms.size()); ++i) try_pair(i - 1, i);

  while (!heap.empty()) {
    const BpePair p = heap.top();
    heap.pop();
    // Symbols only grow rightwards, so unchanged lengths mean the same pair.
    if (syms[size_t(p.left)].len != p.left_len || syms[size_t(p.right)].len != p.right_len) continue;
    merge_into_left(syms, p.left, p.right);
    try_pair(syms[size_t(p.left)].prev, p.left);
    try_pair(p.left, syms[size_t(p.left)].next);
  }

  for (int32_t i = 0; i != -1; i = syms[size_t(i)].next) {
    const std::string_view piece = word.substr(syms[size_t(i)].off, syms[size_t(i)].len);
    if (int32_t id = vocab.find(piece); id != Vocab::kNone) {
      out.push_back(id);
      continue;
    }
    // Not a token (only in inconsistent vocabularies): emit its characters
    // that are tokens; characters that are not are dropped.
    size_t pos = 0;
    while (pos < piece.size()) {
      const size_t len = std::min(utf8::lead_length(uint8_t(piece[pos])), piece.size() - pos);
      if (int32_t id = vocab.find(piece.substr(pos, len)); id != Vocab::kNone) out.push_back(id);
      pos += len;
    }
  }
}

}  // namespace rf::detail
