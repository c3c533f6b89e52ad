// GGUF metadata values: the 13 value types, arrays (of scalars, of strings,
// of arrays), and typed accessors that name the key when a type is wrong.
// Scalar arrays stay packed as in the file, so memory stays proportional to
// the file's size.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace rf::gguf {

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};

const char* value_type_name(ValueType t);
bool value_type_valid(uint32_t t);
size_t scalar_size(ValueType t);  // bytes of a scalar type; 0 for STRING/ARRAY

struct Value;

struct Array {
  ValueType elem_type = ValueType::U8;
  std::vector<uint8_t> raw;          // scalar elements, packed little-endian
  std::vector<std::string> strings;  // when elem_type == STRING
  std::vector<Array> arrays;         // when elem_type == ARRAY

  size_t size() const;
  Value at(size_t i) const;  // one element as a Value
  // Bulk conversions; throw rf::Error naming `what` on a type mismatch.
  std::vector<float> to_f32(const std::string& what) const;
  std::vector<int64_t> to_i64(const std::string& what) const;
  const std::vector<std::string>& to_strings(const std::string& what) const;
};

struct Value {
  ValueType type = ValueType::U8;
  // Integers are kept as int64/uint64 by signedness, floats as double.
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;

  bool is_integer() const;
  bool is_number() const;  // integer or float
  // Conversions; throw rf::Error naming `what` when the value does not fit.
  int64_t as_int(const std::string& what) const;
  uint64_t as_uint(const std::string& what) const;
  double as_double(const std::string& what) const;
  bool as_bool(const std::string& what) const;
  const std::string& as_string(const std::string& what) const;
  const Array& as_array(const std::string& what) const;
  std::string to_display(size_t max_items = 8) const;  // for `rocmforge info`
};

Value scalar_from_bytes(ValueType t, const uint8_t* p);

}  // namespace rf::gguf
