// libFuzzer target: any byte string given to the GGUF reader either parses
// (and then every tensor's bytes lie inside the buffer) or raises rf::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "gguf/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = rf::gguf::File::from_bytes(data, size);
    for (const auto& t : f->tensors()) {
      if (f->data_offset() + t.offset + t.n_bytes > f->file_size()) std::abort();
      for (const auto& [k, v] : f->metadata()) (void)v.to_display();
    }
  } catch (const rf::Error&) {
  }
  return 0;
}
