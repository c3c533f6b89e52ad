// JSON string escaping over core/utf8's decoder, and JSON numbers (see
// json_text.h).
#include "core/json_text.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "core/utf8.h"

namespace rf {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_u_escape(std::string& out, uint32_t unit) {  // \uXXXX, unit <= 0xFFFF
  const char esc[6] = {'\\', 'u', kHex[(unit >> 12) & 15], kHex[(unit >> 8) & 15], kHex[(unit >> 4) & 15],
                       kHex[unit & 15]};
  out.append(esc, sizeof esc);
}

void append_ascii_escaped(std::string& out, uint32_t cp) {
  if (cp >= 0x10000) {  // a UTF-16 surrogate pair
    cp -= 0x10000;
    append_u_escape(out, 0xD800 + (cp >> 10));
    append_u_escape(out, 0xDC00 + (cp & 0x3FF));
  } else {
    append_u_escape(out, cp);
  }
}

}  // namespace

void append_json_string(std::string& out, std::string_view s, const JsonStringOptions& opts) {
  out.reserve(out.size() + s.size() + 2);
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t next = i;
      uint32_t cp = 0;
      if (utf8::decode(s, next, cp)) {
        if (opts.ensure_ascii) append_ascii_escaped(out, cp);
        else out.append(s.data() + i, next - i);
        i = next;
        continue;
      }
      if (opts.replace_invalid) {
        if (opts.ensure_ascii) append_u_escape(out, utf8::kReplacement);
        else out += "\xEF\xBF\xBD";
      } else {
        if (opts.ensure_ascii) append_u_escape(out, utf8::kEscapedByteBase + c);
        else out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (c == 0x7F && opts.escape_del)) append_u_escape(out, c);
        else out += static_cast<char>(c);
    }
    ++i;
  }
  out += '"';
}

std::string json_string(std::string_view s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

void append_json_number(std::string& out, double v) {
  if (!std::isfinite(v)) v = v < 0 ? -9999.0 : 9999.0;  // JSON has no infinities
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%.9g", v);
  out.append(buf, size_t(n));
}

}  // namespace rf
