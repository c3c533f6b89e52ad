// An independent, deliberately simple JSON Schema checker for the grammar
// tests: validates a parsed nlohmann value against the subset that
// grammar/json_schema.h converts (it shares no code with the converter).
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace rf::grammar::test {

using ojson = nlohmann::ordered_json;

inline size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline bool schema_valid(const ojson& v, const ojson& s, const ojson& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    std::string r = s["$ref"].get<std::string>();
    return schema_valid(v, root.at(ojson::json_pointer(r.substr(1))), root);
  }
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) {
    for (const auto& e : s["enum"]) if (v == e) return true;
    return false;
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    for (const auto& alt : s[key]) if (schema_valid(v, alt, root)) return true;
    return false;
  }
  if (!s.contains("type")) return true;
  if (s["type"].is_array()) {
    for (const auto& t : s["type"]) {
      ojson one = s;
      one["type"] = t;
      if (schema_valid(v, one, root)) return true;
    }
    return false;
  }
  const std::string t = s["type"].get<std::string>();
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "integer" || t == "number") {
    if (!v.is_number()) return false;
    // JSON Schema: an integer is a number without a fractional part
    // (nlohmann stores integers beyond 64 bits as doubles).
    if (t == "integer" && !v.is_number_integer() && std::floor(v.get<double>()) != v.get<double>()) return false;
    if (s.contains("minimum") && v.get<double>() < s["minimum"].get<double>()) return false;
    if (t == "integer") {  // the bounds the grammar enforces for integers
      const double x = v.get<double>();
      if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
      if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
      if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
    }
    return true;
  }
  if (t == "string") {
    if (!v.is_string()) return false;
    size_t n = utf8_length(v.get<std::string>());
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return false;
    return true;
  }
  if (t == "array") {
    if (!v.is_array()) return false;
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    if (s.contains("items"))
      for (const auto& x : v) if (!schema_valid(x, s["items"], root)) return false;
    return true;
  }
  if (t == "object") {
    if (!v.is_object()) return false;
    if (!s.contains("properties")) return true;
    const auto& props = s["properties"];
    for (const auto& [k, x] : v.items()) {
      if (!props.contains(k)) return false;
      if (!schema_valid(x, props[k], root)) return false;
    }
    if (s.contains("required"))
      for (const auto& r : s["required"]) if (!v.contains(r.get<std::string>())) return false;
    return true;
  }
  return false;
}

}  // namespace rf::grammar::test
