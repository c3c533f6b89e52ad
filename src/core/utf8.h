// UTF-8, the one decoder and encoder of the code base: decoding of one
// well-formed sequence, encoding, validation, and the three ways invalid
// bytes are handled, each for its own reader:
//  - Replacement per byte: every byte that does not start a well-formed
//    sequence becomes one U+FFFD (replace_invalid_bytes; the byte-level BPE's
//    input, as llama.cpp's tokenizer does it, and JSON text in
//    core/json_text.h). Overlong forms, surrogates and > U+10FFFF are invalid.
//  - Maximal subparts (Utf8Sanitizer, sanitize): the WHATWG/Unicode rule,
//    each maximal invalid prefix becomes one U+FFFD. Incremental: feeding
//    bytes in any split gives the same text as feeding them at once (the
//    detokenizer's output).
//  - Lossless (next_escaped, append_escaped): decoding never fails; a byte
//    that does not start a well-formed sequence decodes as U+DC80..U+DCFF
//    (0xDC00 + byte, Python's "surrogateescape") and is written back as that
//    byte, so text round-trips byte for byte (the Jinja interpreter's str).
// Pure functions; the sanitizer's state is its own.
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
// sets `cp`. Rejects truncated, overlong, surrogate and > U+10FFFF forms
// (false, `pos` and `cp` untouched; also false at the end of `s`).
bool decode(std::string_view s, size_t& pos, uint32_t& cp);

// Appends the UTF-8 encoding of `cp` (must be <= U+10FFFF and not a surrogate;
// anything else is written as U+FFFD).
void append(std::string& out, uint32_t cp);
// Appends the bit pattern of `cp` as UTF-8 without checking that it is a
// Unicode scalar value: a surrogate becomes three bytes ("generalized
// UTF-8"). For `cp` <= 0x1FFFFF.
void append_unchecked(std::string& out, uint32_t cp);

// True when `s` is entirely well-formed UTF-8.
bool is_valid(std::string_view s);

// `s` with each byte that does not start a well-formed sequence replaced by
// U+FFFD (replacement per byte, above). Returns `s` unchanged when valid.
std::string replace_invalid_bytes(std::string_view s);

// Lossless decoding (above): the code point at `pos` (< s.size()), `pos`
// advanced past it; an invalid byte is U+DC00 + byte, a lone surrogate that
// never equals a real character.
constexpr uint32_t kEscapedByteBase = 0xDC00;
inline bool is_escaped_byte(uint32_t cp) { return cp >= 0xDC80 && cp <= 0xDCFF; }
uint32_t next_escaped(std::string_view s, size_t& pos);
// Appends what next_escaped decoded: an escaped byte as that byte, any other
// code point as append_unchecked does.
void append_escaped(std::string& out, uint32_t cp);

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
