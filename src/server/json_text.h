// Hand-written JSON text for the hot path: a string escaper that appends a
// quoted JSON string (invalid UTF-8 becomes U+FFFD, so the output is always
// valid JSON), used to build per-token SSE chunks without a JSON DOM.
#pragma once

#include <string>
#include <string_view>

namespace rf::server {

// Appends `s` to `out` as a quoted JSON string.
void append_json_string(std::string& out, std::string_view s);
std::string json_string(std::string_view s);

// Appends a float the way JSON wants it (finite; -inf -> a large negative).
void append_json_number(std::string& out, double v);

}  // namespace rf::server
