// UTF-8 helpers for the tokenizers: decoding with replacement, encoding,
// the GPT-2 byte <-> unicode mapping, and a streaming sanitizer that turns
// any byte stream into valid UTF-8 without ever splitting a character.
//
// Two replacement policies exist on purpose:
//  - Input to the byte-level BPE is made valid by replacing every byte that
//    does not start a well-formed sequence with U+FFFD, one per byte (what
//    llama.cpp's tokenizer does; overlong forms and surrogates count as
//    invalid here).
//  - Output (Utf8Sanitizer) follows the WHATWG/Unicode "maximal subpart"
//    rule: each maximal invalid prefix becomes one U+FFFD. It is incremental:
//    feeding bytes in any split gives the same text as feeding them at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rf::utf8 {

constexpr uint32_t kReplacement = 0xFFFD;

// Length of a sequence from its first byte by the high nibble (1 for ASCII and
// stray continuation bytes, 2/3/4 for lead bytes), without validating the rest.
inline size_t lead_length(uint8_t b) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[b >> 4];
}

// Decodes one well-formed sequence at `pos`; on success advances `pos` and
// sets `cp`. Rejects truncated, overlong, surrogate and > U+10FFFF forms.
bool decode(std::string_view s, size_t& pos, uint32_t& cp);

// Appends the UTF-8 encoding of `cp` (must be <= U+10FFFF and not a surrogate;
// anything else is written as U+FFFD).
void append(std::string& out, uint32_t cp);

// True when `s` is entirely well-formed UTF-8.
bool is_valid(std::string_view s);

// `s` with each byte that does not start a well-formed sequence replaced by
// U+FFFD (the BPE input policy above). Returns `s` unchanged when valid.
std::string replace_invalid_bytes(std::string_view s);

// GPT-2 byte-level mapping: every byte has a printable code point.
const std::string& byte_to_unicode(uint8_t b);  // UTF-8 of the code point
int unicode_to_byte(uint32_t cp);               // -1 when cp is not a mapped code point

// Incremental sanitizer (maximal-subpart replacement, see above). Holds back
// at most 3 bytes of a sequence that may still complete.
class Utf8Sanitizer {
 public:
  void feed(std::string_view bytes, std::string& out);
  // Ends the stream: an incomplete held-back sequence becomes one U+FFFD.
  void finish(std::string& out);
  bool has_pending() const { return needed_ != 0; }

 private:
  void reset() { needed_ = seen_ = 0; lower_ = 0x80; upper_ = 0xBF; pending_len_ = 0; }
  uint8_t needed_ = 0, seen_ = 0;
  uint8_t lower_ = 0x80, upper_ = 0xBF;
  char pending_[4] = {};
  uint8_t pending_len_ = 0;
};

// Whole-string form of Utf8Sanitizer.
std::string sanitize(std::string_view s);

}  // namespace rf::utf8
