// GBNF parser (see gbnf.h): a hand-written recursive descent over the text,
// tracking line and column for its errors.
#include "grammar/gbnf.h"

#include <map>

#include "core/error.h"
#include "core/utf8.h"

namespace rf::grammar {
namespace {

constexpr uint32_t kMaxRepeat = 10000;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Grammar run(std::string_view root) {
    skip_space(true);
    while (pos_ < s_.size()) {
      parse_rule();
      skip_space(true);
    }
    for (const auto& [name, where] : first_use_)
      if (!defined_.count(name)) fail("gbnf ", where, ": undefined rule '", name, "'");
    auto it = ids_.find(std::string(root));
    if (it == ids_.end() || !defined_.count(std::string(root))) fail("gbnf: no rule named '", root, "'");
    g_.root = it->second;
    g_.validate();
    return std::move(g_);
  }

 private:
  std::string where() const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    return str("line ", line, " column ", col);
  }
  [[noreturn]] void expected(const std::string& what) const {
    std::string got = pos_ >= s_.size() ? "end of input"
                      : s_[pos_] == '\n' ? "end of line"
                                         : str("'", s_.substr(pos_, 1), "'");
    fail("gbnf ", where(), ": expected ", what, ", got ", got);
  }
  bool at(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  // Skips spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) ++pos_;
      else if (c == '#') { while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_; }
      else break;
    }
  }

  std::string parse_name() {
    size_t start = pos_;
    while (pos_ < s_.size() && is_word(s_[pos_])) ++pos_;
    if (pos_ == start) expected("a rule name");
    return std::string(s_.substr(start, pos_ - start));
  }

  uint32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    uint32_t id = g_.reserve_rule(name);
    ids_[name] = id;
    return id;
  }

  void parse_rule() {
    std::string name = parse_name();
    skip_space(false);
    if (s_.substr(pos_, 3) != "::=") expected("'::=' after rule name '" + name + "'");
    pos_ += 3;
    if (defined_.count(name)) fail("gbnf ", where(), ": rule '", name, "' is defined twice");
    defined_.insert({name, true});
    uint32_t id = rule_id(name);
    current_ = name;
    std::vector<Sequence> alts = parse_alternatives(false);
    g_.define_rule(id, alts);
    skip_space(false);
    if (pos_ < s_.size() && s_[pos_] != '\n') expected("end of rule '" + name + "' (a newline)");
  }

  std::vector<Sequence> parse_alternatives(bool nested) {
    std::vector<Sequence> alts;
    skip_space(true);
    alts.push_back(parse_sequence(nested));
    for (;;) {
      // "|" may also start the next line of a top-level rule.
      size_t save = pos_;
      skip_space(true);
      if (!at('|')) { pos_ = save; break; }
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(nested));
    }
    return alts;
  }

  Sequence parse_sequence(bool nested) {
    Sequence seq;
    for (;;) {
      skip_space(nested);
      if (pos_ >= s_.size() || at('|') || at(')') || at('\n')) break;
      // A new rule starts: "name ::=" at the start of a line ends this one.
      Sequence item = parse_primary(nested);
      skip_space(nested);
      apply_repetition(item);
      seq.insert(seq.end(), item.begin(), item.end());
    }
    return seq;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= s_.size()) expected(str(digits, " hex digits"));
      char c = s_[pos_];
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) expected(str(digits, " hex digits"));
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    return v;
  }

  // One (possibly escaped) character of a literal or class.
  uint32_t parse_char() {
    if (pos_ >= s_.size()) expected("a character");
    if (s_[pos_] == '\\') {
      ++pos_;
      if (pos_ >= s_.size()) expected("an escape character");
      char c = s_[pos_++];
      switch (c) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '0': return 0;
        case '\\': case '"': case ']': case '[': case '-': case '^': case '/': return uint8_t(c);
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: --pos_; expected("an escape (\\n \\r \\t \\\" \\\\ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH)");
      }
    }
    uint32_t cp;
    size_t p = pos_;
    if (!utf8::decode(s_, p, cp)) expected("valid UTF-8");
    pos_ = p;
    return cp;
  }

  Sequence parse_primary(bool nested) {
    if (at('"')) {
      ++pos_;
      Sequence seq;
      while (!at('"')) {
        if (pos_ >= s_.size() || at('\n')) expected("'\"' closing the string literal");
        seq.push_back(one_char(parse_char()));
      }
      ++pos_;
      return seq;
    }
    if (at('[')) {
      ++pos_;
      bool negated = at('^');
      if (negated) ++pos_;
      std::vector<CharRange> ranges;
      while (!at(']')) {
        if (pos_ >= s_.size() || at('\n')) expected("']' closing the character class");
        uint32_t lo = parse_char(), hi = lo;
        if (at('-') && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
          ++pos_;
          hi = parse_char();
          if (hi < lo) fail("gbnf ", where(), ": character range is reversed");
        }
        ranges.push_back({lo, hi});
      }
      ++pos_;
      return {chars(std::move(ranges), negated)};
    }
    if (at('.')) {
      ++pos_;
      return {chars({}, true)};
    }
    if (at('(')) {
      ++pos_;
      std::vector<Sequence> alts = parse_alternatives(true);
      skip_space(true);
      if (!at(')')) expected("')' closing the group");
      ++pos_;
      if (alts.size() == 1) return alts[0];
      uint32_t id = new_rule();
      g_.define_rule(id, alts);
      return {ref(id)};
    }
    if (pos_ < s_.size() && is_word(s_[pos_])) {
      size_t start = pos_;
      std::string name = parse_name();
      size_t save = pos_;
      skip_space(false);
      if (s_.substr(pos_, 3) == "::=") {
        pos_ = start;
        expected(nested ? "')' before the next rule" : "a newline before the next rule '" + name + "'");
      }
      pos_ = save;
      if (!first_use_.count(name)) {
        size_t p = pos_;
        pos_ = start;
        first_use_[name] = where();
        pos_ = p;
      }
      return {ref(rule_id(name))};
    }
    expected("a string literal, character class, rule name or '('");
  }

  uint32_t new_rule() { return g_.reserve_rule(str(current_, "-", ++generated_)); }

  uint32_t parse_count() {
    size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + uint64_t(s_[pos_] - '0');
      if (v > kMaxRepeat) fail("gbnf ", where(), ": repetition count above ", kMaxRepeat);
      ++pos_;
    }
    if (pos_ == start) expected("a repetition count");
    return uint32_t(v);
  }

  // x{min,max} (max == UINT32_MAX: unbounded) into plain elements and rules.
  void apply_repetition(Sequence& item) {
    uint32_t min = 1, max = 1;
    if (at('*')) { ++pos_; min = 0; max = UINT32_MAX; }
    else if (at('+')) { ++pos_; min = 1; max = UINT32_MAX; }
    else if (at('?')) { ++pos_; min = 0; max = 1; }
    else if (at('{')) {
      ++pos_;
      skip_space(false);
      min = max = parse_count();
      skip_space(false);
      if (at(',')) {
        ++pos_;
        skip_space(false);
        max = at('}') ? UINT32_MAX : parse_count();
        skip_space(false);
        if (max < min) fail("gbnf ", where(), ": repetition {m,n} with n < m");
      }
      if (!at('}')) expected("'}' closing the repetition");
      ++pos_;
    } else {
      return;
    }
    skip_space(false);
    Sequence out;
    for (uint32_t i = 0; i < min; ++i) out.insert(out.end(), item.begin(), item.end());
    if (max == UINT32_MAX) {  // R ::= item R | ""
      uint32_t r = new_rule();
      Sequence loop = item;
      loop.push_back(ref(r));
      g_.define_rule(r, {loop, {}});
      out.push_back(ref(r));
    } else if (max > min) {  // nested optionals: O_k ::= item O_{k-1} | ""
      uint32_t inner = UINT32_MAX;
      for (uint32_t k = 0; k < max - min; ++k) {
        uint32_t r = new_rule();
        Sequence more = item;
        if (inner != UINT32_MAX) more.push_back(ref(inner));
        g_.define_rule(r, {more, {}});
        inner = r;
      }
      out.push_back(ref(inner));
    }
    item = std::move(out);
  }

  std::string_view s_;
  size_t pos_ = 0;
  Grammar g_;
  std::map<std::string, uint32_t> ids_;
  std::map<std::string, bool> defined_;
  std::map<std::string, std::string> first_use_;  // rule name -> where first referenced
  std::string current_;
  uint32_t generated_ = 0;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view root) { return Parser(text).run(root); }

}  // namespace rf::grammar
