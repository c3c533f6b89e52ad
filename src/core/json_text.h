// Hand-written JSON text, the one JSON string escaper of the code base: a
// quoted JSON string appended to a buffer without a JSON DOM, in the two
// styles its users need:
//  - the server's wire text (the default options): invalid UTF-8 becomes one
//    U+FFFD per byte (core/utf8.h), so the output is always valid JSON, and
//    U+007F is escaped; used to build per-token SSE chunks on the hot path;
//  - Python's json.dumps (JsonStringOptions::python): text that is not UTF-8
//    is kept byte for byte (the Jinja interpreter's lossless str), U+007F is
//    written as is, and ensure_ascii writes \uXXXX for every non-ASCII
//    character.
// Both write \" \\ \n \r \t \b \f and \u00XX (lowercase hex) for the other
// control characters. Pure functions.
#pragma once

#include <string>
#include <string_view>

namespace rf {

struct JsonStringOptions {
  // \uXXXX (a surrogate pair above U+FFFF) for every non-ASCII character; an
  // invalid byte kept as is becomes \udcXX (Python's surrogateescape).
  bool ensure_ascii = false;
  // A byte that does not start a well-formed UTF-8 sequence: one U+FFFD
  // each (true), or kept as it is (false; the output is then JSON only when
  // the input is UTF-8 or ensure_ascii is set).
  bool replace_invalid = true;
  bool escape_del = true;  // U+007F as \u007f

  // json.dumps(s, ensure_ascii=...) of a str decoded losslessly.
  static constexpr JsonStringOptions python(bool ensure_ascii) { return {ensure_ascii, false, false}; }
};

// Appends `s` to `out` as a quoted JSON string.
void append_json_string(std::string& out, std::string_view s, const JsonStringOptions& opts = {});
std::string json_string(std::string_view s);

// Appends a float the way JSON wants it (finite; -inf -> a large negative).
void append_json_number(std::string& out, double v);

}  // namespace rf
