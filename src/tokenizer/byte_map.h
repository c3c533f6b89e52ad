// GPT-2's byte-level mapping for the byte-level BPE: every byte has a
// printable code point, so any byte string is a string of "characters" the
// merges can work on. Immutable tables, built once, thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace rf::byte_map {

const std::string& to_unicode(uint8_t b);  // UTF-8 of the code point
int to_byte(uint32_t cp);                  // -1 when cp is not a mapped code point

}  // namespace rf::byte_map
