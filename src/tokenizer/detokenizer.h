// Incremental detokenizer for streaming: push() token ids one at a time and
// get back only text that is complete. Output is always valid UTF-8:
//  - a multi-byte character split across tokens is held back (at most 3
//    bytes) until its last byte arrives;
//  - bytes that cannot form a character are replaced by U+FFFD as soon as
//    that is certain (one U+FFFD per maximal invalid subpart, the Unicode /
//    WHATWG rule), and flush() turns an unfinished trailing sequence into
//    one U+FFFD.
// Invariant: the concatenation of every push() plus flush() equals
// utf8::sanitize(tokenizer.decode(ids, render_special)), however the ids
// are split. One instance per stream; not thread-safe itself.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace rf {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tok, bool render_special = false);

  // Newly completed text after `id` (may be empty). Throws rf::Error for an
  // id outside the vocabulary (the state is unchanged then).
  std::string push(int32_t id);
  // Ends the stream and returns what was held back; the detokenizer can
  // then be reused for a new stream.
  std::string flush();
  bool has_pending() const { return sanitizer_.has_pending(); }

 private:
  const Tokenizer* tok_;
  bool render_special_;
  bool strip_leading_space_;
  utf8::Utf8Sanitizer sanitizer_;
  std::string piece_;
};

}  // namespace rf
