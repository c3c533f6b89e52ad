// Built-in filters of the Jinja interpreter over strings, numbers and JSON
// (trim, upper, title, indent, int, float, round, format, tojson, ...),
// with Jinja2's semantics; tojson as transformers defines it (no ASCII or
// HTML escaping, key order kept, Python's separators).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "template/jinja_builtins.h"
#include "template/jinja_interp.h"
#include "template/jinja_text.h"

namespace rf::jinja {

namespace {

std::string string_of(Renderer& r, const Value& v) { return r.to_str(v); }

Value f_abs(Renderer&, const Value& v, const CallArgs&) {
  if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) runtime_error("integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  runtime_error(str("bad operand type for abs(): '", type_name(v), "'"));
}

Value f_capitalize(Renderer& r, const Value& v, const CallArgs&) { return r.make_string(py_capitalize(string_of(r, v))); }

Value f_center(Renderer& r, const Value& v, const CallArgs& a) {
  std::string s = string_of(r, v);
  const int64_t width = int_arg(a.get(0, "width", Value::integer(80)), "width");
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return r.make_string(std::move(s));
  r.budget().check_string_size(static_cast<size_t>(width) + s.size());
  const int64_t pad = width - len;
  const int64_t left = pad / 2 + (pad & width & 1);
  return r.make_string(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '));
}

Value f_escape(Renderer& r, const Value& v, const CallArgs&) {
  std::string out;
  for (char c : string_of(r, v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return r.make_string(std::move(out));
}

// Python float(str): optional spaces, sign, digits with '_' between, "inf", "nan".
bool parse_float(const std::string& text, double& out) {
  const std::string s = py_strip(text, nullptr, true, true);
  std::string clean;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '_' && k > 0 && k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[k + 1])))
      continue;
    clean.push_back(s[k]);
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos) return false;
  char* end = nullptr;
  out = std::strtod(clean.c_str(), &end);
  return end == clean.c_str() + clean.size();
}

bool parse_int(const std::string& text, int64_t base, int64_t& out) {
  std::string s = py_strip(text, nullptr, true, true);
  if (s.empty() || base < 2 || base > 36) return false;
  bool neg = false;
  size_t k = 0;
  if (s[0] == '+' || s[0] == '-') neg = s[k++] == '-';
  if (base == 16 && s.size() > k + 1 && s[k] == '0' && (s[k + 1] == 'x' || s[k + 1] == 'X')) k += 2;
  if (k >= s.size()) return false;
  __int128 v = 0;
  for (; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '_' && k + 1 < s.size() && s[k + 1] != '_') continue;
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : (c >= 'A' && c <= 'Z') ? c - 'A' + 10 : 99;
    if (d >= base) return false;
    v = v * base + d;
    if (v > (static_cast<__int128>(1) << 63)) return false;
  }
  if (neg) v = -v;
  if (v > INT64_MAX) return false;
  out = static_cast<int64_t>(v);
  return true;
}

[[noreturn]] void undefined_input(const Value& v) {
  runtime_error(v.s ? str("'", *v.s, "' is undefined") : std::string("undefined value used"));
}

Value f_float(Renderer& r, const Value& v, const CallArgs& a) {
  if (v.is_undefined()) undefined_input(v);
  if (v.is_number()) return Value::number(v.as_double());
  double d;
  if (v.is_string() && parse_float(v.str(), d)) return Value::number(d);
  return a.get(0, "default", Value::number(0.0));
}

Value f_int(Renderer& r, const Value& v, const CallArgs& a) {
  const Value fallback = a.get(0, "default", Value::integer(0));
  if (v.is_undefined()) undefined_input(v);
  if (v.is_int()) return Value::integer(v.as_int());
  if (v.kind == Kind::Float) {
    if (!(std::fabs(v.f) < 9.2e18)) return fallback;
    return Value::integer(static_cast<int64_t>(std::trunc(v.f)));
  }
  if (v.is_string()) {
    int64_t i;
    if (parse_int(v.str(), int_arg(a.get(1, "base", Value::integer(10)), "base"), i)) return Value::integer(i);
    double d;
    if (parse_float(v.str(), d) && std::fabs(d) < 9.2e18) return Value::integer(static_cast<int64_t>(std::trunc(d)));
  }
  return fallback;
}

Value f_format(Renderer& r, const Value& v, const CallArgs& a) {
  if (!a.keyword.empty()) {
    DictObj* d = r.heap().make_dict();
    for (const auto& [k, val] : a.keyword) d->set(r.make_string(std::string(k)), val);
    return r.percent_format(string_of(r, v), Value::of(d));
  }
  return r.percent_format(string_of(r, v), r.heap().make_tuple(a.positional));
}

Value f_indent(Renderer& r, const Value& v, const CallArgs& a) {
  if (v.is_undefined()) undefined_input(v);
  if (!v.is_string()) runtime_error(str("indent() needs a string, not ", type_name(v)));
  const Value w = a.get(0, "width", Value::integer(4));
  const std::string unit = w.is_string() ? w.str() : std::string(static_cast<size_t>(std::clamp<int64_t>(int_arg(w, "width"), 0, 1 << 16)), ' ');
  const bool first = truthy(a.get(1, "first", Value::boolean(false)));
  const bool blank = truthy(a.get(2, "blank", Value::boolean(false)));
  // Jinja: lines = (s + "\n").splitlines(); lines after the first get the
  // indent unless blank (or blank=True); the first only with first=True.
  const std::string s = string_of(r, v) + "\n";
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '\n' || s[k] == '\r') {
      lines.push_back(s.substr(start, k - start));
      if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
      start = k + 1;
    }
  }
  std::string out;
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k > 0) out += '\n';
    if ((k > 0 || first) && (blank || k == 0 || !lines[k].empty())) out += unit;
    out += lines[k];
    r.budget().check_string_size(out.size());
  }
  return r.make_string(std::move(out));
}

Value f_lower(Renderer& r, const Value& v, const CallArgs&) { return r.make_string(py_lower(string_of(r, v))); }

Value f_upper(Renderer& r, const Value& v, const CallArgs&) { return r.make_string(py_upper(string_of(r, v))); }

Value f_string(Renderer& r, const Value& v, const CallArgs&) { return v.is_string() ? v : r.make_string(string_of(r, v)); }

Value f_replace(Renderer& r, const Value& v, const CallArgs& a) {
  return call_method(r, r.make_string(string_of(r, v)), "replace", a);
}

Value f_round(Renderer& r, const Value& v, const CallArgs& a) {
  const int64_t precision = int_arg(a.get(0, "precision", Value::integer(0)), "precision");
  const Value method = a.get(1, "method", Value::undefined());
  const std::string how = method.is_string() ? method.str() : "common";
  if (!v.is_number()) runtime_error(str("round() needs a number, not ", type_name(v)));
  if (how == "common" && v.is_int()) return Value::integer(v.as_int());
  const double x = v.as_double();
  if (!std::isfinite(x)) return Value::number(x);
  const double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(precision, -300, 300)));
  if (how == "ceil") return Value::number(std::ceil(x * scale) / scale);
  if (how == "floor") return Value::number(std::floor(x * scale) / scale);
  if (how != "common") runtime_error("round() method must be 'common', 'ceil' or 'floor'");
  // Python's round(): correctly rounded, ties to even (via exact decimal printing).
  if (precision < 0 || precision > 300) return Value::number(std::nearbyint(x * scale) / scale);
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), x);
  return Value::number(std::strtod(buf, nullptr));
}

Value f_striptags(Renderer& r, const Value& v, const CallArgs&) {
  const std::string s = string_of(r, v);
  std::string out;
  bool in_tag = false, space = false;
  for (char c : s) {
    if (c == '<') in_tag = true;
    else if (c == '>' && in_tag) in_tag = false;
    else if (!in_tag) {
      if (c == ' ' || c == '\n' || c == '\t' || c == '\r') space = !out.empty();
      else {
        if (space) out.push_back(' ');
        space = false;
        out.push_back(c);
      }
    }
  }
  return r.make_string(std::move(out));
}

Value f_title(Renderer& r, const Value& v, const CallArgs&) {
  // Jinja: split on runs of whitespace, '-', '(', '{', '[', '<'; upper the first letter of each piece.
  const std::string s = string_of(r, v);
  std::string out;
  bool at_start = true;
  for (size_t p = 0; p < s.size();) {
    const uint32_t cp = utf8::next_escaped(s, p);
    const bool sep = py_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    if (sep) {
      utf8::append_escaped(out, cp);
      at_start = true;
    } else {
      if (at_start) {
        if (cp == 0xDF) out += "SS";
        else utf8::append_escaped(out, cp_upper(cp));
      } else {
        utf8::append_escaped(out, cp_lower(cp));
      }
      at_start = false;
    }
  }
  return r.make_string(std::move(out));
}

Value f_tojson(Renderer& r, const Value& v, const CallArgs& a) {
  JsonStyle style;
  const Value indent = a.get(0, "indent", Value::none());
  if (!indent.is_none() && !indent.is_undefined()) {
    style.indent = true;
    style.item_sep.assign(1, ',');
    style.indent_unit = indent.is_string() ? indent.str()
                                           : std::string(static_cast<size_t>(std::clamp<int64_t>(int_arg(indent, "indent"), 0, 64)), ' ');
  }
  const Value seps = a.get(SIZE_MAX, "separators", Value::none());
  if (seps.is_list() && seps.list->items.size() == 2 && seps.list->items[0].is_string() && seps.list->items[1].is_string()) {
    style.item_sep = seps.list->items[0].str();
    style.key_sep = seps.list->items[1].str();
  }
  style.sort_keys = truthy(a.get(SIZE_MAX, "sort_keys", Value::boolean(false)));
  style.ensure_ascii = truthy(a.get(SIZE_MAX, "ensure_ascii", Value::boolean(false)));
  std::string out;
  append_json(out, v, style, r.max_string());
  return r.make_string(std::move(out));
}

Value f_trim(Renderer& r, const Value& v, const CallArgs& a) {
  const Value chars = a.get(0, "chars", Value::none());
  return r.make_string(py_strip(string_of(r, v), chars.is_string() ? &chars.str() : nullptr, true, true));
}

Value f_truncate(Renderer& r, const Value& v, const CallArgs& a) {
  const int64_t length = int_arg(a.get(0, "length", Value::integer(255)), "length");
  if (!v.is_string() && !v.is_undefined()) {  // Jinja2 compares len(value) and returns short values unchanged
    const bool sized = v.is_plain_list() || (v.is_dict() && v.dict->kind == DictKind::Plain);
    if (!sized) runtime_error(str("object of type '", type_name(v), "' has no len()"));
    const size_t n = v.is_list() ? v.list->items.size() : v.dict->entries.size();
    const Value leeway = a.get(3, "leeway", Value::integer(5));
    if (static_cast<int64_t>(n) <= length + (leeway.is_int() ? leeway.as_int() : 5)) return v;
  }
  const std::string s = string_of(r, v);
  const bool killwords = truthy(a.get(1, "killwords", Value::boolean(false)));
  const Value end_v = a.get(2, "end", Value::undefined());
  const std::string end = end_v.is_string() ? end_v.str() : "...";
  const Value leeway_v = a.get(3, "leeway", Value::integer(5));
  const int64_t leeway = leeway_v.is_int() ? leeway_v.as_int() : 5;
  const std::vector<size_t> offs = utf8_offsets(s);
  const auto n = static_cast<int64_t>(offs.size()) - 1;
  const auto end_len = static_cast<int64_t>(utf8_length(end));
  if (n <= length + leeway) return r.make_string(s);
  const int64_t keep = std::clamp<int64_t>(length - end_len, 0, n);
  std::string head = s.substr(0, offs[static_cast<size_t>(keep)]);
  if (!killwords) {
    const size_t space = head.rfind(' ');
    if (space != std::string::npos) head.resize(space);
  }
  return r.make_string(head + end);
}

Value f_wordcount(Renderer& r, const Value& v, const CallArgs&) {
  const std::string s = string_of(r, v);
  int64_t words = 0;
  bool in_word = false;
  for (size_t p = 0; p < s.size();) {
    const uint32_t cp = utf8::next_escaped(s, p);
    const bool word_char = cp == '_' || cp_is_digit(cp) || cp_is_alpha(cp);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::integer(words);
}

const std::unordered_map<std::string_view, FilterFn>& string_filter_table() {
  static const std::unordered_map<std::string_view, FilterFn> table = {
      {"abs", f_abs}, {"capitalize", f_capitalize}, {"center", f_center}, {"e", f_escape}, {"escape", f_escape},
      {"forceescape", f_escape}, {"float", f_float}, {"format", f_format}, {"indent", f_indent}, {"int", f_int},
      {"lower", f_lower}, {"replace", f_replace}, {"round", f_round}, {"string", f_string},
      {"striptags", f_striptags}, {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim},
      {"truncate", f_truncate}, {"upper", f_upper}, {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

FilterFn find_string_filter(std::string_view name) {
  auto it = string_filter_table().find(name);
  return it == string_filter_table().end() ? nullptr : it->second;
}

}  // namespace rf::jinja
