// Text helpers for the Jinja interpreter (see jinja_text.h).
#include "template/jinja_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace rf::jinja {

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

size_t utf8_length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) utf8::next_escaped(s, pos);
  return n;
}

std::vector<size_t> utf8_offsets(std::string_view s) {
  std::vector<size_t> offs;
  offs.reserve(s.size() + 1);
  for (size_t pos = 0; pos < s.size();) {
    offs.push_back(pos);
    utf8::next_escaped(s, pos);
  }
  offs.push_back(s.size());
  return offs;
}

bool py_isspace(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<uint32_t> set;
  if (chars)
    for (size_t p = 0; p < chars->size();) set.push_back(utf8::next_escaped(*chars, p));
  auto strippable = [&](uint32_t cp) {
    if (!chars) return py_isspace(cp);
    for (uint32_t c : set)
      if (c == cp) return true;
    return false;
  };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t p = begin;
      if (!strippable(utf8::next_escaped(s, p))) break;
      begin = p;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;  // back up to the start of the last code point
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
      size_t p = start;
      uint32_t cp = utf8::next_escaped(s, p);
      if (p != end) {  // not one well-formed character: treat the last byte alone
        start = end - 1;
        p = start;
        cp = utf8::next_escaped(s, p);
      }
      if (!strippable(cp)) break;
      end = start;
    }
  }
  return std::string(s.substr(begin, end - begin));
}

namespace {

// Case pairs laid out as alternating upper/lower code points in a range.
bool in_pair_range(uint32_t cp, uint32_t lo, uint32_t hi) { return cp >= lo && cp <= hi; }

}  // namespace

uint32_t cp_lower(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7)) return cp + 32;
  if (cp == 0x178) return 0xFF;
  if ((in_pair_range(cp, 0x100, 0x12F) || in_pair_range(cp, 0x132, 0x137) || in_pair_range(cp, 0x14A, 0x177)) &&
      cp % 2 == 0)
    return cp + 1;
  if ((in_pair_range(cp, 0x139, 0x148) || in_pair_range(cp, 0x179, 0x17E)) && cp % 2 == 1) return cp + 1;
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;
  if (cp == 0x386) return 0x3AC;
  if (cp >= 0x388 && cp <= 0x38A) return cp + 37;
  if (cp == 0x38C) return 0x3CC;
  if (cp == 0x38E || cp == 0x38F) return cp + 63;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
  if ((in_pair_range(cp, 0x460, 0x481) || in_pair_range(cp, 0x48A, 0x4BF)) && cp % 2 == 0) return cp + 1;
  if (cp >= 0x531 && cp <= 0x556) return cp + 48;
  if (cp >= 0xFF21 && cp <= 0xFF3A) return cp + 32;
  return cp;
}

uint32_t cp_upper(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  if ((cp >= 0xE0 && cp <= 0xFE && cp != 0xF7)) return cp - 32;
  if (cp == 0xFF) return 0x178;
  if ((in_pair_range(cp, 0x100, 0x12F) || in_pair_range(cp, 0x132, 0x137) || in_pair_range(cp, 0x14A, 0x177)) &&
      cp % 2 == 1)
    return cp - 1;
  if ((in_pair_range(cp, 0x139, 0x148) || in_pair_range(cp, 0x179, 0x17E)) && cp % 2 == 0) return cp - 1;
  if (cp == 0x3C2) return 0x3A3;  // final sigma
  if (cp >= 0x3B1 && cp <= 0x3C9) return cp - 32;
  if (cp == 0x3AC) return 0x386;
  if (cp >= 0x3AD && cp <= 0x3AF) return cp - 37;
  if (cp == 0x3CC) return 0x38C;
  if (cp == 0x3CD || cp == 0x3CE) return cp - 63;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 32;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 80;
  if ((in_pair_range(cp, 0x460, 0x481) || in_pair_range(cp, 0x48A, 0x4BF)) && cp % 2 == 1) return cp - 1;
  if (cp >= 0x561 && cp <= 0x586) return cp - 48;
  if (cp >= 0xFF41 && cp <= 0xFF5A) return cp - 32;
  return cp;
}

namespace {

bool cp_is_cased(uint32_t cp) { return cp == 0xDF || cp_upper(cp) != cp || cp_lower(cp) != cp; }

template <typename Fn>
std::string map_cps(std::string_view s, Fn fn) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out.push_back(static_cast<char>(fn(static_cast<unsigned char>(c))));
    return out;
  }
  for (size_t p = 0; p < s.size();) utf8::append_escaped(out, fn(utf8::next_escaped(s, p)));
  return out;
}

void append_upper(std::string& out, uint32_t cp) {
  if (cp == 0xDF) out += "SS";
  else utf8::append_escaped(out, cp_upper(cp));
}

}  // namespace

bool cp_is_alpha(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (utf8::is_escaped_byte(cp)) return false;
  return cp >= 0xC0 && cp != 0xD7 && cp != 0xF7 && !py_isspace(cp) && !(cp >= 0x2000 && cp <= 0x2BFF) &&
         !(cp >= 0x3000 && cp <= 0x303F) && !(cp >= 0xFF00 && cp <= 0xFF20);
}

bool cp_is_digit(uint32_t cp) { return cp >= '0' && cp <= '9'; }

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t p = 0; p < s.size();) append_upper(out, utf8::next_escaped(s, p));
  return out;
}

std::string py_lower(std::string_view s) { return map_cps(s, cp_lower); }

std::string py_capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool first = true;
  for (size_t p = 0; p < s.size();) {
    uint32_t cp = utf8::next_escaped(s, p);
    if (first) append_upper(out, cp);
    else utf8::append_escaped(out, cp_lower(cp));
    first = false;
  }
  return out;
}

std::string py_title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (size_t p = 0; p < s.size();) {
    uint32_t cp = utf8::next_escaped(s, p);
    if (prev_cased) utf8::append_escaped(out, cp_lower(cp));
    else append_upper(out, cp);
    prev_cased = cp_is_cased(cp);
  }
  return out;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-1.2345e+17"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  const int exp = std::stoi(sci.substr(e + 1));
  std::string out = sign;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (static_cast<int>(digits.size()) <= exp + 1) {
        out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
      }
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return out;
}

namespace {

bool py_printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (utf8::is_escaped_byte(cp)) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
      (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB))
    return false;
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F || cp == 0x180E) return false;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || cp >= 0xF0000) return false;  // surrogates, private use
  return true;
}

}  // namespace

void append_py_repr(std::string& out, std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out.push_back(quote);
  for (size_t p = 0; p < s.size();) {
    const uint32_t cp = utf8::next_escaped(s, p);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!py_printable(cp)) {
      char buf[16];
      const uint32_t v = cp;
      if (v < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", v);
      else if (v < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", v);
      else std::snprintf(buf, sizeof buf, "\\U%08x", v);
      out += buf;
    } else {
      utf8::append_escaped(out, cp);
    }
  }
  out.push_back(quote);
}

}  // namespace rf::jinja
