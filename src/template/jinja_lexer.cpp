// Jinja lexer (see jinja_lexer.h). The structure follows Jinja2's own lexer:
// find the next tag opener, strip the text before it per the whitespace
// rules, then lex the tag's inside until its closer.
#include "template/jinja_lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "template/jinja_text.h"
#include "template/jinja_value.h"

namespace rf::jinja {

const char* token_type_name(TokType t) {
  switch (t) {
    case TokType::Text: return "template data";
    case TokType::VarBegin: return "begin of print statement";
    case TokType::VarEnd: return "end of print statement";
    case TokType::BlockBegin: return "begin of statement block";
    case TokType::BlockEnd: return "end of statement block";
    case TokType::Name: return "name";
    case TokType::String: return "string";
    case TokType::Integer: return "integer";
    case TokType::Float: return "float";
    case TokType::Operator: return "operator";
    case TokType::Eof: return "end of template";
  }
  return "token";
}

namespace {

[[noreturn]] void syntax_error(const std::string& msg, int line) {
  throw TemplateError(TemplateError::Kind::Syntax, msg, line);
}

std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      out.push_back('\n');
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      out.push_back(src[k]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t open = find_opener(pos_);
      if (open == std::string::npos) {
        emit_text(src_.substr(pos_), line_);
        advance_to(src_.size());
        break;
      }
      lex_tag(open);
    }
    Token eof;
    eof.type = TokType::Eof;
    eof.line = line_;
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  size_t find_opener(size_t from) const {
    for (size_t k = src_.find('{', from); k != std::string::npos; k = src_.find('{', k + 1)) {
      if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    }
    return std::string::npos;
  }

  bool at(size_t p, std::string_view s) const { return src_.compare(p, s.size(), s) == 0; }

  // Moves pos_ forward, counting lines.
  void advance_to(size_t p) {
    line_ += static_cast<int>(std::count(src_.begin() + static_cast<long>(pos_), src_.begin() + static_cast<long>(p), '\n'));
    pos_ = p;
  }

  size_t skip_unicode_space(size_t p) const {
    while (p < src_.size()) {
      size_t q = p;
      if (!py_isspace(utf8::next_escaped(src_, q))) break;
      p = q;
    }
    return p;
  }

  void emit_text(std::string text, int line) {
    if (text.empty()) return;
    Token t;
    t.type = TokType::Text;
    t.value = std::move(text);
    t.line = line;
    tokens_.push_back(std::move(t));
  }

  void emit(TokType type, std::string value, int line) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.line = line;
    tokens_.push_back(std::move(t));
  }

  // Text before a tag, with the tag's whitespace control applied.
  std::string strip_before(std::string text, char sign, bool lstrip_applies) const {
    if (sign == '-') return py_strip(text, nullptr, false, true);
    if (sign == '+' || !lstrip_applies) return text;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos > 0 || line_starting_) {
      if (text.find_first_not_of(" \t", l_pos) == std::string::npos) text.resize(l_pos);
    }
    return text;
  }

  // Block-style closer at p ("+%}", "-%}" + spaces, "%}" + one newline); end or npos.
  size_t match_block_close(size_t p, char close_char) const {
    const char closer[3] = {close_char, '}', 0};
    if (at(p, std::string("+") + closer)) return p + 3;
    if (at(p, std::string("-") + closer)) return skip_unicode_space(p + 3);
    if (at(p, closer)) {
      size_t end = p + 2;
      if (end < src_.size() && src_[end] == '\n') ++end;  // trim_blocks
      return end;
    }
    return std::string::npos;
  }

  void lex_tag(size_t open) {
    const char kind = src_[open + 1];
    size_t after = open + 2;
    char sign = 0;
    if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];

    size_t raw_body = std::string::npos;
    if (kind == '%') {  // {% raw %}: the opener matches only with nothing else in the tag
      size_t p = skip_unicode_space(after);
      if (at(p, "raw")) {
        p = skip_unicode_space(p + 3);
        if (at(p, "-%}")) raw_body = skip_unicode_space(p + 3);
        else if (at(p, "%}")) raw_body = p + 2;
      }
    }
    const int text_line = line_;
    emit_text(strip_before(src_.substr(pos_, open - pos_), sign, kind != '{'), text_line);
    advance_to(open);
    const int tag_line = line_;

    if (kind == '#') {
      lex_comment(after, tag_line);
    } else if (raw_body != std::string::npos) {
      line_starting_ = src_[raw_body - 1] == '\n';
      advance_to(raw_body);
      lex_raw(tag_line);
    } else {
      emit(kind == '{' ? TokType::VarBegin : TokType::BlockBegin, "", tag_line);
      advance_to(after);
      lex_inside(kind == '{' ? '}' : '%', tag_line);
    }
  }

  void lex_comment(size_t from, int tag_line) {
    for (size_t k = from; k < src_.size(); ++k) {
      size_t end = std::string::npos;
      if (src_[k] == '+' && at(k, "+#}")) end = k + 3;
      else if (src_[k] == '-' && at(k, "-#}")) end = skip_unicode_space(k + 3);
      else if (src_[k] == '#' && at(k, "#}")) end = match_block_close(k, '#');
      if (end != std::string::npos) {
        line_starting_ = src_[end - 1] == '\n';
        advance_to(end);
        return;
      }
    }
    syntax_error("missing end of comment tag", tag_line);
  }

  void lex_raw(int tag_line) {
    for (size_t k = src_.find("{%", pos_); k != std::string::npos; k = src_.find("{%", k + 1)) {
      size_t p = k + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p = skip_unicode_space(p);
      if (!at(p, "endraw")) continue;
      p = skip_unicode_space(p + 6);
      const size_t end = match_block_close(p, '%');
      if (end == std::string::npos) continue;
      const int body_line = line_;
      emit_text(strip_before(src_.substr(pos_, k - pos_), sign, true), body_line);
      line_starting_ = src_[end - 1] == '\n';
      advance_to(end);
      return;
    }
    syntax_error("missing end of raw directive", tag_line);
  }

  void lex_inside(char close_char, int tag_line) {
    std::vector<char> brackets;
    while (true) {
      if (pos_ >= src_.size())
        syntax_error(str("unexpected end of template, expected '", close_char, "}'"), tag_line);
      if (brackets.empty()) {
        size_t end = std::string::npos;
        if (close_char == '%') {
          end = match_block_close(pos_, '%');
        } else if (at(pos_, "-}}")) {
          end = skip_unicode_space(pos_ + 3);
        } else if (at(pos_, "}}")) {
          end = pos_ + 2;
        }
        if (end != std::string::npos) {
          emit(close_char == '%' ? TokType::BlockEnd : TokType::VarEnd, "", line_);
          line_starting_ = src_[end - 1] == '\n';
          advance_to(end);
          return;
        }
      }
      const char c = src_[pos_];
      size_t q = pos_;
      if (py_isspace(utf8::next_escaped(src_, q))) {
        advance_to(q);
      } else if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && is_name_char(src_[e])) ++e;
        emit(TokType::Name, src_.substr(pos_, e - pos_), line_);
        advance_to(e);
      } else if (c == '\'' || c == '"') {
        lex_string();
      } else {
        lex_operator(brackets);
      }
    }
  }

  // Digits with optional '_' separators between them.
  size_t scan_digits(size_t p) const {
    size_t e = p;
    while (e < src_.size() && is_digit(src_[e])) {
      ++e;
      if (e + 1 < src_.size() && src_[e] == '_' && is_digit(src_[e + 1])) ++e;
    }
    return e;
  }

  // 0x1F, 0o17, 0b101 (with '_' between digits).
  bool lex_prefixed_integer() {
    if (src_[pos_] != '0' || pos_ + 2 >= src_.size()) return false;
    const char p = static_cast<char>(src_[pos_ + 1] | 0x20);
    const int base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (base == 0) return false;
    size_t e = pos_ + 2;
    unsigned long long v = 0;
    bool any = false;
    for (; e < src_.size(); ++e) {
      const char c = src_[e];
      if (c == '_' && any) continue;
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : 99;
      if (d >= base) break;
      if (v > (9223372036854775807ULL - static_cast<unsigned>(d)) / static_cast<unsigned>(base)) syntax_error("integer literal too large", line_);
      v = v * static_cast<unsigned>(base) + static_cast<unsigned>(d);
      any = true;
    }
    if (!any) return false;
    Token t;
    t.type = TokType::Integer;
    t.int_value = static_cast<int64_t>(v);
    t.line = line_;
    tokens_.push_back(std::move(t));
    advance_to(e);
    return true;
  }

  void lex_number() {
    if (lex_prefixed_integer()) return;
    size_t e = scan_digits(pos_);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      e = scan_digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t p = e + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        e = scan_digits(p);
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = pos_; k < e; ++k)
      if (src_[k] != '_') text.push_back(src_[k]);
    Token t;
    t.line = line_;
    if (is_float) {
      t.type = TokType::Float;
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      t.type = TokType::Integer;
      errno = 0;
      const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
      if (errno == ERANGE || v > 9223372036854775807ULL) syntax_error("integer literal too large", line_);
      t.int_value = static_cast<int64_t>(v);
    }
    tokens_.push_back(std::move(t));
    advance_to(e);
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Python "unicode-escape" decoding of a string literal's inside.
  std::string decode_string(std::string_view raw, int line) const {
    std::string out;
    out.reserve(raw.size());
    for (size_t k = 0; k < raw.size(); ++k) {
      if (raw[k] != '\\' || k + 1 >= raw.size()) {
        out.push_back(raw[k]);
        continue;
      }
      const char e = raw[++k];
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t d = 0; d < n; ++d) {
            const int h = k + 1 + d < raw.size() ? hex_value(raw[k + 1 + d]) : -1;
            if (h < 0) syntax_error(str("truncated \\", e, " escape in string literal"), line);
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (cp > 0x10FFFF) syntax_error("escape sequence out of range in string literal", line);
          k += n;
          utf8::append_escaped(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int d = 0; d < 2 && k + 1 < raw.size() && raw[k + 1] >= '0' && raw[k + 1] <= '7'; ++d)
              cp = cp * 8 + static_cast<uint32_t>(raw[++k] - '0');
            utf8::append_escaped(out, cp);
          } else {  // unknown escapes keep their backslash, as in Python
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  void lex_string() {
    const char quote = src_[pos_];
    size_t k = pos_ + 1;
    while (k < src_.size() && src_[k] != quote) k += (src_[k] == '\\') ? 2 : 1;
    if (k >= src_.size()) syntax_error("unterminated string literal", line_);
    Token t;
    t.type = TokType::String;
    t.line = line_;
    t.value = decode_string(std::string_view(src_).substr(pos_ + 1, k - pos_ - 1), line_);
    tokens_.push_back(std::move(t));
    advance_to(k + 1);
  }

  void lex_operator(std::vector<char>& brackets) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (auto op : kTwo) {
      if (at(pos_, op)) {
        emit(TokType::Operator, std::string(op), line_);
        advance_to(pos_ + 2);
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}=.:|,;<>").find(c) == std::string_view::npos) {
      size_t q = pos_;
      const uint32_t cp = utf8::next_escaped(src_, q);
      std::string shown;
      utf8::append_escaped(shown, cp);
      syntax_error(str("unexpected character '", shown, "'"), line_);
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) syntax_error(str("unexpected '", c, "'"), line_);
      if (brackets.back() != c) syntax_error(str("unexpected '", c, "', expected '", brackets.back(), "'"), line_);
      brackets.pop_back();
    }
    emit(TokType::Operator, std::string(1, c), line_);
    advance_to(pos_ + 1);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace rf::jinja
