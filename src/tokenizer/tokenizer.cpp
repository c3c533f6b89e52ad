// Tokenizer: special-token splitting, the per-fragment SPM / BPE encoding, and
// the piece table used for decoding (see tokenizer.h).
#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "core/utf8.h"
#include "gguf/reader.h"
#include "tokenizer/byte_map.h"
#include "tokenizer/encoders.h"

namespace rf {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 "▁"

// <0xXX> -> the byte, or -1 when `t` is not of that form.
int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = t[size_t(i)];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return -1;
    v = v * 16 + d;
  }
  return v;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(s.substr(pos, hit - pos));
    out.append(to);
  }
  out.append(s.substr(pos));
  return out;
}

// GPT-2 byte-level text back to bytes. A code point outside the byte table
// (possible only for tokens added as plain text) is kept as its UTF-8.
std::string unmap_bytes(const std::string& t) {
  std::string out;
  size_t pos = 0;
  while (pos < t.size()) {
    const size_t start = pos;
    uint32_t cp;
    if (!utf8::decode(t, pos, cp)) {  // not UTF-8: keep the byte
      out.push_back(t[start]);
      pos = start + 1;
      continue;
    }
    const int b = byte_map::to_byte(cp);
    if (b >= 0) out.push_back(char(b));
    else out.append(t, start, pos - start);
  }
  return out;
}

// The bytes a token stands for, with control/unknown tokens rendered as
// their text (decoding hides those unless asked).
std::string make_piece(const Vocab& v, int32_t id) {
  const std::string& text = v.texts[size_t(id)];
  switch (v.type(id)) {
    case TokenType::Control:
    case TokenType::Unknown:
    case TokenType::UserDefined:
      return text;
    case TokenType::Unused:
    case TokenType::Undefined:
      return {};
    case TokenType::Byte: {
      const int b = parse_byte_token(text);
      if (b >= 0) return std::string(1, char(b));
      break;  // malformed: decode it like a normal token
    }
    case TokenType::Normal:
      break;
  }
  return v.kind == VocabKind::Spm ? replace_all(text, kSpmSpace, " ") : unmap_bytes(text);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& f) {
  return std::make_unique<Tokenizer>(Vocab::from_gguf(f));
}

std::unique_ptr<Tokenizer> Tokenizer::from_file(const std::string& gguf_path) {
  return from_gguf(*gguf::File::open(gguf_path));
}

Tokenizer::Tokenizer(Vocab vocab)
    : vocab_(std::move(vocab)),
      pre_(vocab_.kind == VocabKind::Bpe ? pre_info(vocab_.pre) : PreInfo{}),
      pretok_(vocab_.kind == VocabKind::Bpe ? std::make_unique<PreTokenizer>(pre_.type) : nullptr),
      splitter_(vocab_) {
  pieces_.reserve(size_t(vocab_.n_tokens()));
  for (int32_t id = 0; id < vocab_.n_tokens(); ++id) pieces_.push_back(make_piece(vocab_, id));
}

Tokenizer::~Tokenizer() = default;

void Tokenizer::check_id(int32_t id) const {
  RF_CHECK(vocab_.valid_id(id), "token id ", id, " is outside the vocabulary of ", vocab_.n_tokens());
}

bool Tokenizer::is_control(int32_t id) const {
  if (!vocab_.valid_id(id)) return false;
  const TokenType t = vocab_.type(id);
  return t == TokenType::Control || t == TokenType::Unknown;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return vocab_.texts[size_t(id)];
}

void Tokenizer::encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
  if (vocab_.kind == VocabKind::Spm) {
    std::string s;
    if (vocab_.add_space_prefix && after_special) s = " ";
    s.append(text);
    detail::spm_encode(vocab_, replace_all(s, " ", kSpmSpace), out);
    return;
  }
  const std::string valid = utf8::replace_invalid_bytes(text);
  std::string mapped;
  for (std::string_view word : pretok_->split(valid)) {
    mapped.clear();
    for (char c : word) mapped += byte_map::to_unicode(uint8_t(c));
    detail::bpe_encode_word(vocab_, mapped, pre_.ignore_merges, out);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special,
                                      std::span<const TextRange> literal) const {
  RF_CHECK(text.size() < (size_t(1) << 31), "tokenizer: input of ", text.size(), " bytes is too long");
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
  bool after_special = true;  // SPM: the first fragment gets the space prefix too
  for (const Fragment& f : splitter_.split(text, parse_special, literal)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_text(text.substr(f.offset, f.length), after_special, out);
      after_special = false;
    }
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

void Tokenizer::append_piece(int32_t id, bool render_special, bool& strip_leading_space, std::string& out) const {
  check_id(id);
  if (!render_special && is_control(id)) return;
  std::string_view p = pieces_[size_t(id)];
  if (p.empty()) return;
  if (strip_leading_space) {
    if (p.front() == ' ') p.remove_prefix(1);
    strip_leading_space = false;
  }
  out.append(p);
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  check_id(id);
  if (!render_special && is_control(id)) return {};
  return pieces_[size_t(id)];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  bool strip = strips_leading_space();
  for (int32_t id : ids) append_piece(id, render_special, strip, out);
  return out;
}

}  // namespace rf
