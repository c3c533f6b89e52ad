// Splitting text at special-token texts before tokenization, the way
// llama.cpp's tokenizer_st_partition does it: special tokens are taken in
// order of decreasing text length (then id), and every occurrence of each is
// cut out of the text fragments that remain, so a longer token wins over a
// shorter one it overlaps. User-defined tokens are always split out;
// control and unknown tokens only with parse_special (otherwise their text is
// ordinary text). Tokens flagged lstrip/rstrip swallow adjacent whitespace.
// `literal` byte ranges of the text keep control/unknown token text that
// overlaps them as text, as if parse_special were off there (the server's
// chat prompts: special-token text from a client's messages).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace rf {

struct Fragment {
  int32_t token = -1;  // a special token id, or -1 for text
  size_t offset = 0, length = 0;  // the text's bytes in the input, when token == -1
};

// Bytes [offset, offset + length) of a text.
struct TextRange {
  size_t offset = 0, length = 0;
};

class SpecialSplitter {
 public:
  explicit SpecialSplitter(const Vocab& vocab);
  // `literal`: sorted by offset, not overlapping.
  std::vector<Fragment> split(std::string_view text, bool parse_special,
                              std::span<const TextRange> literal = {}) const;

 private:
  // Indices into specials_ of the tokens occurring in `text`, in order.
  std::vector<size_t> present(std::string_view text, bool parse_special) const;

  const Vocab& vocab_;
  std::vector<int32_t> specials_;  // longest text first, then by id
  std::unordered_map<uint32_t, std::vector<uint32_t>> by_prefix_;  // first two bytes -> indices
  std::vector<uint32_t> by_byte_[256];                           // one-byte texts -> indices
};

}  // namespace rf
