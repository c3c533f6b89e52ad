// GGUF encoding.
#include "gguf/writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "core/error.h"

namespace rf::gguf {
namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void encode_array(const Array& a, std::vector<uint8_t>& out) {
  put<uint32_t>(out, uint32_t(a.elem_type));
  put<uint64_t>(out, a.size());
  if (a.elem_type == ValueType::STRING) {
    for (const auto& s : a.strings) put_string(out, s);
  } else if (a.elem_type == ValueType::ARRAY) {
    for (const auto& sub : a.arrays) encode_array(sub, out);
  } else {
    out.insert(out.end(), a.raw.begin(), a.raw.end());
  }
}

Value make_scalar(ValueType t, const void* p) {
  return scalar_from_bytes(t, static_cast<const uint8_t*>(p));
}

}  // namespace

void encode_value(const Value& v, std::vector<uint8_t>& out) {
  switch (v.type) {
    case ValueType::STRING: put_string(out, std::get<std::string>(v.v)); return;
    case ValueType::ARRAY: encode_array(std::get<Array>(v.v), out); return;
    case ValueType::BOOL: put<uint8_t>(out, v.as_bool("value") ? 1 : 0); return;
    case ValueType::F32: put<float>(out, float(v.as_double("value"))); return;
    case ValueType::F64: put<double>(out, v.as_double("value")); return;
    case ValueType::U8: put<uint8_t>(out, uint8_t(v.as_uint("value"))); return;
    case ValueType::I8: put<int8_t>(out, int8_t(v.as_int("value"))); return;
    case ValueType::U16: put<uint16_t>(out, uint16_t(v.as_uint("value"))); return;
    case ValueType::I16: put<int16_t>(out, int16_t(v.as_int("value"))); return;
    case ValueType::U32: put<uint32_t>(out, uint32_t(v.as_uint("value"))); return;
    case ValueType::I32: put<int32_t>(out, int32_t(v.as_int("value"))); return;
    case ValueType::U64: put<uint64_t>(out, v.as_uint("value")); return;
    case ValueType::I64: put<int64_t>(out, v.as_int("value")); return;
  }
}

void Writer::set(const std::string& key, Value v) {
  for (auto& [k, old] : kv_)
    if (k == key) { old = std::move(v); return; }
  kv_.emplace_back(key, std::move(v));
}

void Writer::set_u32(const std::string& key, uint32_t v) { set(key, make_scalar(ValueType::U32, &v)); }
void Writer::set_i32(const std::string& key, int32_t v) { set(key, make_scalar(ValueType::I32, &v)); }
void Writer::set_u64(const std::string& key, uint64_t v) { set(key, make_scalar(ValueType::U64, &v)); }
void Writer::set_f32(const std::string& key, float v) { set(key, make_scalar(ValueType::F32, &v)); }
void Writer::set_bool(const std::string& key, bool v) {
  uint8_t b = v;
  set(key, make_scalar(ValueType::BOOL, &b));
}
void Writer::set_string(const std::string& key, const std::string& v) { set(key, Value{ValueType::STRING, v}); }

void Writer::set_strings(const std::string& key, const std::vector<std::string>& v) {
  Array a;
  a.elem_type = ValueType::STRING;
  a.strings = v;
  set(key, Value{ValueType::ARRAY, std::move(a)});
}

void Writer::set_f32s(const std::string& key, const std::vector<float>& v) {
  Array a;
  a.elem_type = ValueType::F32;
  a.raw.resize(v.size() * 4);
  std::memcpy(a.raw.data(), v.data(), a.raw.size());
  set(key, Value{ValueType::ARRAY, std::move(a)});
}

void Writer::set_i32s(const std::string& key, const std::vector<int32_t>& v) {
  Array a;
  a.elem_type = ValueType::I32;
  a.raw.resize(v.size() * 4);
  std::memcpy(a.raw.data(), v.data(), a.raw.size());
  set(key, Value{ValueType::ARRAY, std::move(a)});
}

void Writer::set_alignment(uint32_t a) {
  RF_CHECK(a != 0 && (a & (a - 1)) == 0, "alignment must be a power of two");
  alignment_ = a;
  set_u32("general.alignment", a);
}

void Writer::add_tensor(const std::string& name, DType type, std::vector<uint64_t> dims, Fill fill) {
  RF_CHECK(!dims.empty() && dims.size() <= 4, "tensor '", name, "': rank must be 1..4");
  uint64_t rows = 1;
  for (size_t d = 1; d < dims.size(); ++d) rows *= dims[d];
  const uint64_t bytes = row_bytes(type, dims[0]) * rows;  // each row's header counted
  tensors_.push_back({name, type, std::move(dims), bytes, std::move(fill)});
}

void Writer::add_tensor_bytes(const std::string& name, DType type, std::vector<uint64_t> dims,
                              std::vector<uint8_t> bytes) {
  auto shared = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  add_tensor(name, type, std::move(dims), [shared](uint8_t* dst) {
    std::memcpy(dst, shared->data(), shared->size());
  });
  RF_CHECK(tensors_.back().n_bytes == shared->size(), "tensor '", name, "': ", shared->size(),
           " bytes given, ", tensors_.back().n_bytes, " expected");
}

std::vector<uint8_t> Writer::header_bytes(std::vector<uint64_t>* offsets) const {
  std::vector<uint8_t> out;
  put<uint32_t>(out, 0x46554747);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_.size());
  for (const auto& [k, v] : kv_) {
    put_string(out, k);
    put<uint32_t>(out, uint32_t(v.type));
    encode_value(v, out);
  }
  uint64_t off = 0;
  for (const auto& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, uint32_t(t.dims.size()));
    for (uint64_t d : t.dims) put<uint64_t>(out, d);
    put<uint32_t>(out, uint32_t(t.type));
    put<uint64_t>(out, off);
    if (offsets) offsets->push_back(off);
    off += (t.n_bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  return out;
}

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> out = header_bytes(&offsets);
  const size_t data_start = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.resize(data_start + offsets[i] + tensors_[i].n_bytes, 0);
    tensors_[i].fill(out.data() + data_start + offsets[i]);
    out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  }
  return out;
}

void Writer::write(const std::string& path, const std::function<void(size_t, size_t)>& progress) const {
  std::vector<uint64_t> offsets;
  const std::vector<uint8_t> header = header_bytes(&offsets);
  FILE* f = std::fopen(path.c_str(), "wb");
  RF_CHECK(f, "cannot create '", path, "'");
  const auto write_all = [f](const void* p, size_t n) { return n == 0 || std::fwrite(p, 1, n, f) == n; };
  // Tensor i is filled (its fill may use every core) while a thread writes
  // tensor i - 1 from the other buffer.
  std::vector<uint8_t> bufs[2];
  std::thread writer;
  const bool header_ok = write_all(header.data(), header.size());
  bool wrote = header_ok;
  const auto join = [&](size_t done) {
    if (!writer.joinable()) return;
    writer.join();
    if (progress && wrote) progress(done, tensors_.size());
  };
  try {
    // (wrote is read only while no writer runs: after each join)
    for (size_t i = 0; i < tensors_.size() && header_ok; ++i) {
      const auto& t = tensors_[i];
      const size_t padded = (t.n_bytes + alignment_ - 1) / alignment_ * alignment_;
      std::vector<uint8_t>& buf = bufs[i % 2];
      buf.resize(padded);
      t.fill(buf.data());
      std::fill(buf.begin() + std::ptrdiff_t(t.n_bytes), buf.end(), uint8_t(0));
      join(i);
      if (!wrote) break;
      writer = std::thread([&, padded, data = buf.data()] { wrote = write_all(data, padded); });
    }
  } catch (...) {
    if (writer.joinable()) writer.join();
    std::fclose(f);
    throw;
  }
  join(tensors_.size());
  if (!wrote) {
    std::fclose(f);
    fail("write to '", path, "' failed (disk full?)");
  }
  RF_CHECK(std::fclose(f) == 0, "closing '", path, "' failed");
}

}  // namespace rf::gguf
