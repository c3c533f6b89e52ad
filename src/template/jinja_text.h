// Text helpers for the Jinja interpreter: Python's str as code points (the
// lossless decoding of core/utf8.h, where an invalid byte stands for
// itself), Python's notion of whitespace and of simple case mapping,
// Python's float repr and the string quoting of Python's repr() (json.dumps'
// is core/json_text.h's, JsonStringOptions::python). Pure functions, no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"

namespace rf::jinja {

// Code points are those of utf8::next_escaped: an invalid or truncated
// sequence counts as its first byte alone.
bool is_ascii(std::string_view s);
size_t utf8_length(std::string_view s);  // in code points
// Byte offsets of each code point start, plus s.size() at the end.
std::vector<size_t> utf8_offsets(std::string_view s);

// Python's str.isspace() for one code point.
bool py_isspace(uint32_t cp);
// str.strip() family; `chars` null means whitespace, else the set of code
// points in *chars.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);

uint32_t cp_upper(uint32_t cp);
uint32_t cp_lower(uint32_t cp);
bool cp_is_alpha(uint32_t cp);  // letters of the scripts case mapping covers, plus any non-ASCII >= U+00C0
bool cp_is_digit(uint32_t cp);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);  // first upper, rest lower
std::string py_title(std::string_view s);       // str.title(): after a non-letter, upper

// Python repr(float): shortest round-trip digits, "1.0", "1e+16", "inf".
std::string float_repr(double d);
// Python repr(str): single quotes unless the text has ' and no ".
void append_py_repr(std::string& out, std::string_view s);

}  // namespace rf::jinja
