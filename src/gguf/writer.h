// GGUF writer (version 3): metadata of any value type, tensor infos, and
// aligned tensor data. Tensors are either given as bytes up front or streamed
// in order by a callback, so multi-gigabyte files never sit in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "gguf/value.h"

namespace rf::gguf {

class Writer {
 public:
  void set(const std::string& key, Value v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_strings(const std::string& key, const std::vector<std::string>& v);
  void set_f32s(const std::string& key, const std::vector<float>& v);
  void set_i32s(const std::string& key, const std::vector<int32_t>& v);
  void set_alignment(uint32_t a);

  // Produces the tensor's bytes into `dst` (exactly the tensor's byte size).
  using Fill = std::function<void(uint8_t* dst)>;
  // dims are GGUF order (ne[0] first).
  void add_tensor(const std::string& name, DType type, std::vector<uint64_t> dims, Fill fill);
  void add_tensor_bytes(const std::string& name, DType type, std::vector<uint64_t> dims,
                        std::vector<uint8_t> bytes);

  // Writes the file; `progress(done, total)` is called after each tensor.
  void write(const std::string& path,
             const std::function<void(size_t, size_t)>& progress = nullptr) const;
  // Whole file in memory (tests).
  std::vector<uint8_t> to_bytes() const;
  // The header alone: metadata and tensor infos, no tensor data (fills are
  // not called).
  std::vector<uint8_t> header() const { return header_bytes(nullptr); }

 private:
  struct Pending {
    std::string name;
    DType type;
    std::vector<uint64_t> dims;
    uint64_t n_bytes;
    Fill fill;
  };
  std::vector<uint8_t> header_bytes(std::vector<uint64_t>* offsets) const;

  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Pending> tensors_;
  uint32_t alignment_ = 32;
};

// Appends one encoded value (type tag excluded) to `out`.
void encode_value(const Value& v, std::vector<uint8_t>& out);

}  // namespace rf::gguf
