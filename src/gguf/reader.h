// GGUF reader (versions 2 and 3). Parses and validates the header, metadata
// and tensor infos of an mmapped (or in-memory) file; tensor data is served
// straight from the mapping. Every size and offset a file states is checked
// with overflow-safe arithmetic before use; a bad file raises rf::Error
// naming the field and its byte offset.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "gguf/value.h"

namespace rf::gguf {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kDefaultAlignment = 32;
constexpr size_t kMaxDims = 4;
constexpr size_t kMaxNameLength = 63;  // tensor names, as ggml limits them
constexpr int kMaxArrayDepth = 8;

struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<uint64_t> dims;  // ne[0] first: the contiguous (row) dimension
  uint64_t offset = 0;         // from the start of the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  uint64_t info_pos = 0;       // byte offset of this tensor's info in the file

  uint64_t ne(size_t i) const { return i < dims.size() ? dims[i] : 1; }
  uint64_t rows() const { return n_elements / ne(0); }
  std::string shape_string() const;  // "[64, 512]"
};

class File {
 public:
  // Maps and parses a file; throws rf::Error on any inconsistency.
  static std::unique_ptr<File> open(const std::string& path);
  // Parses a copy of `bytes` (tests, fuzzing).
  static std::unique_ptr<File> from_bytes(const uint8_t* data, size_t size);
  // Parses a header (metadata and tensor infos) whose tensor data is absent:
  // tensor_data() is then null (models with dummy weights).
  static std::unique_ptr<File> from_header(const std::vector<uint8_t>& header);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed lookups; missing keys give the fallback (or throw when required).
  std::string get_string(const std::string& key, const std::string& fallback = "") const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  int64_t require_int(const std::string& key) const;
  double get_float(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  const Array* get_array(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;
  const uint8_t* tensor_data(const TensorInfo& t) const {
    return header_only_ ? nullptr : base_ + data_offset_ + t.offset;
  }
  bool header_only() const { return header_only_; }

 private:
  File() = default;
  void parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;         // mmap base, when mapped
  std::vector<uint8_t> owned_;      // when parsed from memory
  bool header_only_ = false;        // from_header: no tensor data
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace rf::gguf
