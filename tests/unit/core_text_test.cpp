// core/utf8.h and core/json_text.h at their edges: boundary code points,
// invalid bytes (stray continuations, overlongs, surrogates, > U+10FFFF,
// truncation), the three ways of handling them, and JSON escaping of
// control characters and non-UTF-8 text in both styles. Every expectation is
// written out by hand (the bytes of each encoding, Python's outputs).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/json_text.h"
#include "core/utf8.h"

namespace rf {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, DecodeRejectsMalformed) {
  auto ok = [](std::string_view s) { return utf8::is_valid(s); };
  EXPECT_TRUE(ok("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99"));
  EXPECT_FALSE(ok("\xC0\x80"));          // overlong
  EXPECT_FALSE(ok("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(ok("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(ok("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(ok("\xE2\x82"));          // truncated
  EXPECT_FALSE(ok("\x80"));
  EXPECT_EQ(utf8::replace_invalid_bytes("a\xE2\x82z"), "a" + kFffd + kFffd + "z");
}

TEST(Utf8, DecodesBoundaryCodePoints) {
  const std::pair<std::string, uint32_t> cases[] = {
      {"A", 0x41},
      {std::string("\0", 1), 0x0},
      {"\x7F", 0x7F},
      {"\xC2\x80", 0x80},           // first two-byte
      {"\xC3\xA9", 0xE9},           // é
      {"\xDF\xBF", 0x7FF},          // last two-byte
      {"\xE0\xA0\x80", 0x800},      // first three-byte
      {"\xE2\x82\xAC", 0x20AC},     // €
      {"\xED\x9F\xBF", 0xD7FF},     // just below the surrogates
      {"\xEE\x80\x80", 0xE000},     // just above them
      {"\xEF\xBF\xBD", 0xFFFD},
      {"\xEF\xBF\xBF", 0xFFFF},     // last three-byte
      {"\xF0\x90\x80\x80", 0x10000},  // first four-byte
      {"\xF0\x9F\xA6\x99", 0x1F999},  // 🦙
      {"\xF4\x8F\xBF\xBF", 0x10FFFF},  // the last code point
  };
  for (const auto& [bytes, expected] : cases) {
    size_t pos = 0;
    uint32_t cp = 0;
    ASSERT_TRUE(utf8::decode(bytes, pos, cp)) << expected;
    EXPECT_EQ(cp, expected);
    EXPECT_EQ(pos, bytes.size());
    std::string back;
    utf8::append(back, cp);
    EXPECT_EQ(back, bytes) << expected;
  }
  // Decoding from the middle of a string.
  const std::string s = "x\xC3\xA9y";
  size_t pos = 1;
  uint32_t cp = 0;
  ASSERT_TRUE(utf8::decode(s, pos, cp));
  EXPECT_EQ(cp, 0xE9u);
  EXPECT_EQ(pos, 3u);
}

TEST(Utf8, InvalidBytesLeavePositionAlone) {
  const std::string cases[] = {
      "",                   // the end
      "\x80", "\xBF",       // stray continuation bytes
      "\xC0\x80", "\xC1\xBF",  // overlong two-byte (C0, C1 never appear)
      "\xE0\x9F\xBF",       // overlong three-byte (U+07FF)
      "\xF0\x8F\xBF\xBF",   // overlong four-byte (U+FFFF)
      "\xED\xA0\x80",       // U+D800, a surrogate
      "\xED\xBF\xBF",       // U+DFFF
      "\xF4\x90\x80\x80",   // U+110000
      "\xF5\x80\x80\x80",   // lead byte beyond U+10FFFF
      "\xF8\x88\x80\x80\x80", "\xFE", "\xFF",
      "\xC3", "\xE2\x82", "\xF0\x9F\xA6",  // truncated
      "\xC3\x28", "\xE2\x28\xAC", "\xF0\x9F\x28\x99",  // a non-continuation inside
  };
  for (const std::string& bytes : cases) {
    size_t pos = 0;
    uint32_t cp = 12345;
    EXPECT_FALSE(utf8::decode(bytes, pos, cp)) << testing::PrintToString(bytes);
    EXPECT_EQ(pos, 0u);
    EXPECT_EQ(cp, 12345u);
  }
}

TEST(Utf8, EncodingReplacesOnlyWhatIsNotAScalarValue) {
  auto enc = [](uint32_t cp) {
    std::string out;
    utf8::append(out, cp);
    return out;
  };
  auto raw = [](uint32_t cp) {
    std::string out;
    utf8::append_unchecked(out, cp);
    return out;
  };
  EXPECT_EQ(enc(0xD800), kFffd);
  EXPECT_EQ(enc(0xDFFF), kFffd);
  EXPECT_EQ(enc(0x110000), kFffd);
  EXPECT_EQ(raw(0xD800), "\xED\xA0\x80");  // generalized UTF-8
  EXPECT_EQ(raw(0xDFFF), "\xED\xBF\xBF");
  EXPECT_EQ(raw(0x20AC), "\xE2\x82\xAC");
}

TEST(Utf8, LosslessDecodingEscapesEachInvalidByte) {
  const std::string s = "a\xFF\xC3(\xE2\x82\xED\xA0\x80\xC3\xA9";
  std::vector<uint32_t> cps;
  std::string back;
  for (size_t pos = 0; pos < s.size();) {
    cps.push_back(utf8::next_escaped(s, pos));
    utf8::append_escaped(back, cps.back());
  }
  const std::vector<uint32_t> expected = {0x61, 0xDCFF, 0xDCC3, 0x28, 0xDCE2, 0xDC82, 0xDCED, 0xDCA0, 0xDC80, 0xE9};
  EXPECT_EQ(cps, expected);
  EXPECT_EQ(back, s);
  EXPECT_TRUE(utf8::is_escaped_byte(0xDC80));
  EXPECT_TRUE(utf8::is_escaped_byte(0xDCFF));
  EXPECT_FALSE(utf8::is_escaped_byte(0xDC7F));  // would be an ASCII byte: never produced
  std::string other;
  utf8::append_escaped(other, 0xDC7F);          // so it is written as a code point
  EXPECT_EQ(other, "\xED\xB1\xBF");
}

TEST(Utf8, ReplacementPerByteAndPerMaximalSubpart) {
  // A cut-off four-byte sequence: one U+FFFD per byte, or one for the subpart.
  EXPECT_EQ(utf8::replace_invalid_bytes("\xF0\x9F\xA6"), kFffd + kFffd + kFffd);
  EXPECT_EQ(utf8::sanitize("\xF0\x9F\xA6"), kFffd);
  EXPECT_EQ(utf8::replace_invalid_bytes("ok \xC3\xA9"), "ok \xC3\xA9");
}

TEST(Utf8, SanitizerUsesMaximalSubparts) {
  EXPECT_EQ(utf8::sanitize("ok"), "ok");
  EXPECT_EQ(utf8::sanitize("\xE2\x82" "a"), kFffd + "a");  // one subpart
  EXPECT_EQ(utf8::sanitize("\xFF\xFE"), kFffd + kFffd);
  EXPECT_EQ(utf8::sanitize("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate: each byte
  EXPECT_EQ(utf8::sanitize("\xF0\x9F\xA6"), kFffd);                   // cut off at the end
  // Any split of the input gives the same output.
  std::mt19937 rng(7);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s;
    const int n = int(rng() % 12);
    for (int i = 0; i < n; ++i) {
      static const uint8_t pool[] = {'a', 0x80, 0xBF, 0xC2, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xED, 0xA0,
                                     0xF0, 0x9F, 0xA6, 0x99, 0xF4, 0x90, 0xFF, 0xE0, 0x9F};
      s.push_back(char(pool[rng() % sizeof pool]));
    }
    const std::string whole = utf8::sanitize(s);
    ASSERT_TRUE(utf8::is_valid(whole));
    utf8::Utf8Sanitizer z;
    std::string parts;
    for (size_t i = 0; i < s.size();) {
      const size_t k = 1 + rng() % 3;
      z.feed(std::string_view(s).substr(i, k), parts);
      i += k;
    }
    z.finish(parts);
    ASSERT_EQ(parts, whole);
  }
}

std::string wire(std::string_view s) { return json_string(s); }

std::string python(std::string_view s, bool ensure_ascii) {
  std::string out;
  append_json_string(out, s, JsonStringOptions::python(ensure_ascii));
  return out;
}

TEST(JsonText, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(wire("a\"b\\c/d"), R"("a\"b\\c/d")");
  EXPECT_EQ(wire("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(wire(std::string("\x00\x01\x1f\x20", 4)), R"("\u0000\u0001\u001f ")");
  EXPECT_EQ(wire("\x7f"), R"("\u007f")");  // the wire escapes DEL
  EXPECT_EQ(python("\x7f", false), "\"\x7f\"");  // json.dumps does not
  EXPECT_EQ(python(std::string("\x00\x1f\n", 3), false), R"("\u0000\u001f\n")");
  EXPECT_EQ(wire(""), "\"\"");
}

TEST(JsonText, WireReplacesEachInvalidByte) {
  EXPECT_EQ(wire("a\x80z"), "\"a" + kFffd + "z\"");
  EXPECT_EQ(wire("\xC0\xAF"), "\"" + kFffd + kFffd + "\"");                  // overlong
  EXPECT_EQ(wire("\xED\xA0\x80"), "\"" + kFffd + kFffd + kFffd + "\"");      // surrogate
  EXPECT_EQ(wire("\xF4\x90\x80\x80"), "\"" + kFffd + kFffd + kFffd + kFffd + "\"");  // > U+10FFFF
  EXPECT_EQ(wire("\xE2\x82"), "\"" + kFffd + kFffd + "\"");                 // truncated
  EXPECT_EQ(wire("\xC3\xA9\xF0\x9F\xA6\x99"), "\"\xC3\xA9\xF0\x9F\xA6\x99\"");  // valid: as is
  JsonStringOptions ascii;
  ascii.ensure_ascii = true;
  std::string out;
  append_json_string(out, "\x80\xC3\xA9", ascii);
  EXPECT_EQ(out, R"("\ufffd\u00e9")");
}

TEST(JsonText, PythonStyleKeepsInvalidBytes) {
  // json.dumps(s, ensure_ascii=False) of s = bytes.decode('utf-8', 'surrogateescape').
  EXPECT_EQ(python("a\x80z", false), "\"a\x80z\"");
  EXPECT_EQ(python("\xED\xA0\x80", false), "\"\xED\xA0\x80\"");
  // ensure_ascii=True: \uXXXX, surrogate pairs above U+FFFF, \udcXX for invalid bytes.
  EXPECT_EQ(python("\xC3\xA9\xF0\x9F\xA6\x99", true), R"("\u00e9\ud83e\udd99")");
  EXPECT_EQ(python("\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF", true), R"("\uffff\ud800\udc00\udbff\udfff")");
  EXPECT_EQ(python("a\x80z", true), R"("a\udc80z")");
  EXPECT_EQ(python("\xED\xA0\x80", true), R"("\udced\udca0\udc80")");
}

TEST(JsonText, NumbersAreFinite) {
  auto num = [](double v) {
    std::string out;
    append_json_number(out, v);
    return out;
  };
  EXPECT_EQ(num(0.5), "0.5");
  EXPECT_EQ(num(-2), "-2");
  EXPECT_EQ(num(1e-10), "1e-10");
  EXPECT_EQ(num(-std::numeric_limits<double>::infinity()), "-9999");
  EXPECT_EQ(num(std::numeric_limits<double>::infinity()), "9999");
  EXPECT_EQ(num(std::nan("")), "9999");
}

}  // namespace
}  // namespace rf
