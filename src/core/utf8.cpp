// UTF-8 decoding and encoding, lossless decoding and the streaming
// sanitizer (see utf8.h for the three ways invalid bytes are handled).
#include "core/utf8.h"

namespace rf::utf8 {

bool decode(std::string_view s, size_t& pos, uint32_t& cp) {
  const size_t n = s.size();
  if (pos >= n) return false;
  const auto b0 = uint8_t(s[pos]);
  if (b0 < 0x80) {
    cp = b0;
    pos += 1;
    return true;
  }
  size_t len;
  uint32_t c;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, c = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, c = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, c = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return false;
  }
  if (pos + len > n) return false;
  for (size_t i = 1; i < len; ++i) {
    const auto b = uint8_t(s[pos + i]);
    const uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return false;
    c = (c << 6) | (b & 0x3F);
  }
  cp = c;
  pos += len;
  return true;
}

void append(std::string& out, uint32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = kReplacement;
  append_unchecked(out, cp);
}

void append_unchecked(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

bool is_valid(std::string_view s) {
  size_t pos = 0;
  uint32_t cp;
  while (pos < s.size())
    if (!decode(s, pos, cp)) return false;
  return true;
}

std::string replace_invalid_bytes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  uint32_t cp;
  while (pos < s.size()) {
    const size_t start = pos;
    if (decode(s, pos, cp)) {
      out.append(s.substr(start, pos - start));
    } else {
      append(out, kReplacement);
      pos = start + 1;
    }
  }
  return out;
}

uint32_t next_escaped(std::string_view s, size_t& pos) {
  uint32_t cp;
  if (decode(s, pos, cp)) return cp;
  return kEscapedByteBase + uint8_t(s[pos++]);
}

void append_escaped(std::string& out, uint32_t cp) {
  if (is_escaped_byte(cp)) out.push_back(char(cp - kEscapedByteBase));
  else append_unchecked(out, cp);
}

void Utf8Sanitizer::feed(std::string_view bytes, std::string& out) {
  static const char kFffd[] = "\xEF\xBF\xBD";
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = uint8_t(bytes[i]);
    if (needed_ == 0) {
      if (b < 0x80) {
        out.push_back(char(b));
      } else if (b >= 0xC2 && b <= 0xDF) {
        needed_ = 1;
      } else if (b >= 0xE0 && b <= 0xEF) {
        needed_ = 2;
        if (b == 0xE0) lower_ = 0xA0;
        if (b == 0xED) upper_ = 0x9F;
      } else if (b >= 0xF0 && b <= 0xF4) {
        needed_ = 3;
        if (b == 0xF0) lower_ = 0x90;
        if (b == 0xF4) upper_ = 0x8F;
      } else {
        out.append(kFffd, 3);
      }
      if (needed_) pending_[pending_len_++] = char(b);
      continue;
    }
    if (b < lower_ || b > upper_) {
      // The held-back bytes are a maximal invalid subpart; `b` starts afresh.
      out.append(kFffd, 3);
      reset();
      --i;
      continue;
    }
    lower_ = 0x80, upper_ = 0xBF;
    pending_[pending_len_++] = char(b);
    if (++seen_ == needed_) {
      out.append(pending_, pending_len_);
      reset();
    }
  }
}

void Utf8Sanitizer::finish(std::string& out) {
  if (needed_) out.append("\xEF\xBF\xBD");
  reset();
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  Utf8Sanitizer z;
  z.feed(s, out);
  z.finish(out);
  return out;
}

}  // namespace rf::utf8
