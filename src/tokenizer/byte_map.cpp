// GPT-2's byte <-> code point tables (see byte_map.h).
#include "tokenizer/byte_map.h"

#include <array>

#include "core/utf8.h"

namespace rf::byte_map {
namespace {

// GPT-2's table: printable Latin-1 bytes map to themselves, the other 68
// bytes to U+0100.. in byte order.
struct ByteTables {
  std::array<std::string, 256> to_utf8;
  std::array<int16_t, 512> from_cp;  // code points < 512 only
  ByteTables() {
    from_cp.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? uint32_t(b) : uint32_t(next++);
      utf8::append(to_utf8[b], cp);
      from_cp[cp] = int16_t(b);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables tables;  // immutable after thread-safe init
  return tables;
}

}  // namespace

const std::string& to_unicode(uint8_t b) { return byte_tables().to_utf8[b]; }

int to_byte(uint32_t cp) { return cp < 512 ? byte_tables().from_cp[cp] : -1; }

}  // namespace rf::byte_map
