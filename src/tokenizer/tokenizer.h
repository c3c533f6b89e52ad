// Tokenizer: text <-> token ids for a GGUF vocabulary ("llama" SentencePiece-
// style or "gpt2" byte-level BPE), behaving like llama.cpp's llama_tokenize /
// llama_token_to_piece. Immutable after construction; every method is const
// and safe to call from many threads at once.
//
// encode(text, add_special, parse_special):
//  - add_special adds BOS (when the vocab's add_bos) and EOS (add_eos);
//  - parse_special turns control/unknown token texts in the input into their
//    ids (longest first); user-defined tokens are always matched, as in
//    llama.cpp; everything else is tokenized as text;
//  - `literal` (sorted, disjoint byte ranges of `text`): control/unknown
//    token text overlapping them stays text, as if parse_special were off
//    there, and the text around it forms one fragment with it (so the ids
//    are those of the same text in a vocabulary without that token).
// Decoding: token_to_piece gives a token's bytes (control/unknown tokens give
// "" unless render_special). decode() concatenates pieces and, for SPM
// vocabularies that add a space prefix, drops the leading space of the first
// non-empty piece, so decode(encode(x)) == x for text without special tokens.
// decode() is byte-exact and may return invalid UTF-8 (e.g. a cut-off byte
// sequence); IncrementalDetokenizer (below) yields valid UTF-8.
//
// IncrementalDetokenizer, for streaming: push() token ids one at a time and
// get back only text that is complete. Its output is always valid UTF-8:
//  - a multi-byte character split across tokens is held back (at most 3
//    bytes) until its last byte arrives;
//  - bytes that cannot form a character are replaced by U+FFFD as soon as
//    that is certain (one U+FFFD per maximal invalid subpart, the Unicode /
//    WHATWG rule), and flush() turns an unfinished trailing sequence into
//    one U+FFFD.
// Invariant: the concatenation of every push() plus flush() equals
// utf8::sanitize(tokenizer.decode(ids, render_special)), however the ids
// are split. One instance per stream; not itself thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_split.h"
#include "tokenizer/vocab.h"

namespace rf {
namespace gguf { class File; }

class Tokenizer {
 public:
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& f);
  static std::unique_ptr<Tokenizer> from_file(const std::string& gguf_path);
  explicit Tokenizer(Vocab vocab);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special,
                              std::span<const TextRange> literal = {}) const;
  // Throws rf::Error for an id outside the vocabulary.
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

  int32_t n_vocab() const { return vocab_.n_tokens(); }
  int32_t bos() const { return vocab_.bos; }  // -1 when none
  int32_t eos() const { return vocab_.eos; }
  int32_t eot() const { return vocab_.eot; }
  bool add_bos() const { return vocab_.add_bos; }
  bool add_eos() const { return vocab_.add_eos; }
  bool is_eog(int32_t id) const { return vocab_.is_eog(id); }
  bool is_control(int32_t id) const;  // control or unknown type (hidden when decoding)
  const std::string& token_text(int32_t id) const;  // raw vocabulary string
  const Vocab& vocab() const { return vocab_; }
  bool is_spm() const { return vocab_.kind == VocabKind::Spm; }
  PreType pre_type() const { return pre_.type; }

  // Appends one token's piece to `out`. `strip_leading_space` carries the
  // SPM leading-space rule across calls: start it at true and it is cleared
  // by the first non-empty piece (decode and the detokenizer share this).
  void append_piece(int32_t id, bool render_special, bool& strip_leading_space, std::string& out) const;
  // Initial value of strip_leading_space for a new decode.
  bool strips_leading_space() const { return vocab_.kind == VocabKind::Spm && vocab_.add_space_prefix; }

 private:
  void check_id(int32_t id) const;
  void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const;

  Vocab vocab_;
  PreInfo pre_;
  std::unique_ptr<PreTokenizer> pretok_;  // BPE only
  SpecialSplitter splitter_;              // refers to vocab_
  std::vector<std::string> pieces_;       // [n_vocab] bytes of each token, specials rendered
};

class IncrementalDetokenizer {
 public:
  // `continuation`: the text continues a prompt (generated output), so the
  // first piece keeps its leading space (SPM decode() would drop it).
  explicit IncrementalDetokenizer(const Tokenizer& tok, bool render_special = false, bool continuation = false);

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
  bool continuation_;
  bool strip_leading_space_;
  utf8::Utf8Sanitizer sanitizer_;
  std::string piece_;
};

}  // namespace rf
