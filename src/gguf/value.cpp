// Typed access to GGUF metadata values.
#include "gguf/value.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace rf::gguf {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "?";
}

bool value_type_valid(uint32_t t) { return t <= 12; }

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    default: return 0;
  }
}

Value scalar_from_bytes(ValueType t, const uint8_t* p) {
  Value out;
  out.type = t;
  auto load = [p](auto x) { std::memcpy(&x, p, sizeof(x)); return x; };
  switch (t) {
    case ValueType::U8: out.v = uint64_t(load(uint8_t{})); break;
    case ValueType::I8: out.v = int64_t(load(int8_t{})); break;
    case ValueType::U16: out.v = uint64_t(load(uint16_t{})); break;
    case ValueType::I16: out.v = int64_t(load(int16_t{})); break;
    case ValueType::U32: out.v = uint64_t(load(uint32_t{})); break;
    case ValueType::I32: out.v = int64_t(load(int32_t{})); break;
    case ValueType::U64: out.v = load(uint64_t{}); break;
    case ValueType::I64: out.v = load(int64_t{}); break;
    case ValueType::F32: out.v = double(load(float{})); break;
    case ValueType::F64: out.v = load(double{}); break;
    case ValueType::BOOL: out.v = load(uint8_t{}) != 0; break;
    default: fail("not a scalar type: ", value_type_name(t));
  }
  return out;
}

size_t Array::size() const {
  if (elem_type == ValueType::STRING) return strings.size();
  if (elem_type == ValueType::ARRAY) return arrays.size();
  return raw.size() / scalar_size(elem_type);
}

Value Array::at(size_t i) const {
  if (elem_type == ValueType::STRING) return Value{ValueType::STRING, strings.at(i)};
  if (elem_type == ValueType::ARRAY) return Value{ValueType::ARRAY, arrays.at(i)};
  const size_t sz = scalar_size(elem_type);
  RF_CHECK(i < size(), "array index ", i, " out of range");
  return scalar_from_bytes(elem_type, raw.data() + i * sz);
}

std::vector<float> Array::to_f32(const std::string& what) const {
  RF_CHECK(scalar_size(elem_type) != 0 && elem_type != ValueType::BOOL, what,
           ": expected an array of numbers, found an array of ", value_type_name(elem_type));
  std::vector<float> out(size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = float(at(i).as_double(what));
  return out;
}

std::vector<int64_t> Array::to_i64(const std::string& what) const {
  RF_CHECK(scalar_size(elem_type) != 0 && elem_type != ValueType::F32 && elem_type != ValueType::F64,
           what, ": expected an array of integers, found an array of ", value_type_name(elem_type));
  std::vector<int64_t> out(size());
  for (size_t i = 0; i < out.size(); ++i) {
    Value e = at(i);
    if (auto* u = std::get_if<uint64_t>(&e.v)) out[i] = int64_t(*u);  // wraps u64 > INT64_MAX
    else out[i] = e.as_int(what);
  }
  return out;
}

const std::vector<std::string>& Array::to_strings(const std::string& what) const {
  RF_CHECK(elem_type == ValueType::STRING, what, ": expected an array of strings, found an array of ",
           value_type_name(elem_type));
  return strings;
}

bool Value::is_integer() const {
  return std::holds_alternative<uint64_t>(v) || std::holds_alternative<int64_t>(v);
}
bool Value::is_number() const { return is_integer() || std::holds_alternative<double>(v); }

int64_t Value::as_int(const std::string& what) const {
  if (auto* u = std::get_if<uint64_t>(&v)) {
    RF_CHECK(*u <= uint64_t(std::numeric_limits<int64_t>::max()), what, ": value ", *u, " is too large");
    return int64_t(*u);
  }
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
  fail(what, ": expected an integer, found ", value_type_name(type));
}

uint64_t Value::as_uint(const std::string& what) const {
  if (auto* u = std::get_if<uint64_t>(&v)) return *u;
  if (auto* i = std::get_if<int64_t>(&v)) {
    RF_CHECK(*i >= 0, what, ": value ", *i, " is negative");
    return uint64_t(*i);
  }
  fail(what, ": expected an unsigned integer, found ", value_type_name(type));
}

double Value::as_double(const std::string& what) const {
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* u = std::get_if<uint64_t>(&v)) return double(*u);
  if (auto* i = std::get_if<int64_t>(&v)) return double(*i);
  fail(what, ": expected a number, found ", value_type_name(type));
}

bool Value::as_bool(const std::string& what) const {
  if (auto* b = std::get_if<bool>(&v)) return *b;
  if (is_integer()) return as_int(what) != 0;
  fail(what, ": expected a bool, found ", value_type_name(type));
}

const std::string& Value::as_string(const std::string& what) const {
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  fail(what, ": expected a string, found ", value_type_name(type));
}

const Array& Value::as_array(const std::string& what) const {
  if (auto* a = std::get_if<Array>(&v)) return *a;
  fail(what, ": expected an array, found ", value_type_name(type));
}

std::string Value::to_display(size_t max_items) const {
  std::ostringstream os;
  if (auto* u = std::get_if<uint64_t>(&v)) os << *u;
  else if (auto* i = std::get_if<int64_t>(&v)) os << *i;
  else if (auto* d = std::get_if<double>(&v)) os << *d;
  else if (auto* b = std::get_if<bool>(&v)) os << (*b ? "true" : "false");
  else if (auto* s = std::get_if<std::string>(&v)) {
    std::string t = s->size() > 80 ? s->substr(0, 77) + "..." : *s;
    for (char& c : t) if (c == '\n' || c == '\r') c = ' ';
    os << '"' << t << '"';
  } else if (auto* a = std::get_if<Array>(&v)) {
    const size_t n = a->size();
    os << "[" << value_type_name(a->elem_type) << " x " << n << "]";
    if (n != 0) {
      os << " {";
      for (size_t k = 0; k < n && k < max_items; ++k)
        os << (k ? ", " : "") << a->at(k).to_display(max_items);
      if (n > max_items) os << ", ...";
      os << "}";
    }
  }
  return os.str();
}

}  // namespace rf::gguf
