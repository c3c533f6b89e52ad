// Typed, range-checked access to the fields of a JSON request object. A
// field that is absent or null reads as "not given"; a field of the wrong
// type or out of range throws ApiError 400 naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "server/protocol.h"

namespace rf::server {

class FieldReader {
 public:
  explicit FieldReader(const Json& object) : obj_(object) {}

  // The field, or nullptr when absent or null.
  const Json* get(const char* name) const;

  std::optional<bool> boolean(const char* name) const;
  std::optional<std::string> string(const char* name) const;
  // An integer (an integral float such as 16.0 counts) within [lo, hi].
  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) const;
  // A number within [lo, hi]; `lo_open` makes the lower bound exclusive.
  std::optional<double> number(const char* name, double lo, double hi, bool lo_open = false) const;

 private:
  const Json& obj_;
};

// The JSON type name of a value ("string", "array", ...), for messages.
const char* json_type_name(const Json& v);

}  // namespace rf::server
