// Special-token partitioning (see special_split.h). A byte-prefix index finds
// which special tokens occur in the text in one pass, so the per-token passes
// only run for tokens that are actually present.
#include "tokenizer/special_split.h"

#include <algorithm>
#include <cctype>

namespace rf {
namespace {

bool is_candidate(TokenType t, bool parse_special) {
  if (t == TokenType::UserDefined) return true;
  return parse_special && (t == TokenType::Control || t == TokenType::Unknown);
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Whether [pos, pos + len) overlaps one of the sorted ranges.
bool overlaps(std::span<const TextRange> ranges, size_t pos, size_t len) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), pos,
                             [](size_t p, const TextRange& r) { return p < r.offset + r.length; });
  return it != ranges.end() && it->offset < pos + len;
}

}  // namespace

SpecialSplitter::SpecialSplitter(const Vocab& vocab) : vocab_(vocab) {
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    const TokenType t = vocab.type(id);
    if ((t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) &&
        !vocab.texts[size_t(id)].empty())
      specials_.push_back(id);
  }
  std::stable_sort(specials_.begin(), specials_.end(), [&](int32_t a, int32_t b) {
    return vocab.texts[size_t(a)].size() > vocab.texts[size_t(b)].size();
  });
  for (size_t i = 0; i < specials_.size(); ++i) {
    const std::string& t = vocab.texts[size_t(specials_[i])];
    if (t.size() == 1) by_byte_[uint8_t(t[0])].push_back(uint32_t(i));
    else by_prefix_[(uint32_t(uint8_t(t[0])) << 8) | uint8_t(t[1])].push_back(uint32_t(i));
  }
}

std::vector<size_t> SpecialSplitter::present(std::string_view text, bool parse_special) const {
  std::vector<uint8_t> seen(specials_.size(), 0);
  if (specials_.empty()) return {};
  for (size_t i = 0; i < text.size(); ++i) {
    const auto b0 = uint8_t(text[i]);
    for (uint32_t k : by_byte_[b0]) seen[k] = 1;
    if (by_prefix_.empty() || i + 1 >= text.size()) continue;
    auto it = by_prefix_.find((uint32_t(b0) << 8) | uint8_t(text[i + 1]));
    if (it == by_prefix_.end()) continue;
    for (uint32_t k : it->second) {
      if (seen[k]) continue;
      const std::string& t = vocab_.texts[size_t(specials_[k])];
      if (text.compare(i, t.size(), t) == 0) seen[k] = 1;
    }
  }
  std::vector<size_t> out;
  for (size_t k = 0; k < specials_.size(); ++k)
    if (seen[k] && is_candidate(vocab_.type(specials_[k]), parse_special)) out.push_back(k);
  return out;
}

std::vector<Fragment> SpecialSplitter::split(std::string_view text, bool parse_special,
                                             std::span<const TextRange> literal) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (size_t k : present(text, parse_special)) {
    const int32_t id = specials_[k];
    const std::string& tok = vocab_.texts[size_t(id)];
    const bool lstrip = vocab_.lstrip[size_t(id)], rstrip = vocab_.rstrip[size_t(id)];
    const bool may_be_literal = !literal.empty() && vocab_.type(id) != TokenType::UserDefined;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t off = f.offset, len = f.length;
      size_t from = 0;  // where the search resumes past literal occurrences
      while (len > 0) {
        const size_t m = text.substr(off, len).find(tok, from);
        if (m == std::string_view::npos) {
          next.push_back({-1, off, len});
          break;
        }
        if (may_be_literal && overlaps(literal, off + m, tok.size())) {
          from = m + 1;
          continue;
        }
        from = 0;
        size_t left_len = m;
        if (lstrip)
          while (left_len > 0 && is_space(text[off + left_len - 1])) --left_len;
        if (left_len > 0) next.push_back({-1, off, left_len});
        next.push_back({id, 0, 0});
        size_t r_off = off + m + tok.size();
        size_t r_len = off + len - r_off;
        if (rstrip)
          while (r_len > 0 && is_space(text[r_off])) ++r_off, --r_len;
        off = r_off, len = r_len;
      }
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace rf
