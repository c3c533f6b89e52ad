// FieldReader: typed request fields with OpenAI-style 400 messages.
#include "server/request_fields.h"

#include <cmath>
#include <sstream>

#include "server/api_error.h"

namespace rf::server {
namespace {

std::string format_bound(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

const char* json_type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    default: return "value";
  }
}

const Json* FieldReader::get(const char* name) const {
  auto it = obj_.find(name);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> FieldReader::boolean(const char* name) const {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean())
    throw invalid_request(std::string("'") + name + "' must be a boolean, not " + json_type_name(*v), name);
  return v->get<bool>();
}

std::optional<std::string> FieldReader::string(const char* name) const {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_string())
    throw invalid_request(std::string("'") + name + "' must be a string, not " + json_type_name(*v), name);
  return v->get<std::string>();
}

std::optional<int64_t> FieldReader::integer(const char* name, int64_t lo, int64_t hi) const {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  const std::string range = " must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > uint64_t(hi) || (lo > 0 && u < uint64_t(lo))) throw invalid_request(std::string("'") + name + "'" + range + ", got " + std::to_string(u), name);
    return int64_t(u);
  }
  if (v->is_number_integer()) {
    const int64_t i = v->get<int64_t>();
    if (i < lo || i > hi) throw invalid_request(std::string("'") + name + "'" + range + ", got " + std::to_string(i), name);
    return i;
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (d != std::floor(d) || !std::isfinite(d))
      throw invalid_request(std::string("'") + name + "' must be an integer, got " + format_bound(d), name);
    if (d < double(lo) || d > double(hi))
      throw invalid_request(std::string("'") + name + "'" + range + ", got " + format_bound(d), name);
    return int64_t(d);
  }
  throw invalid_request(std::string("'") + name + "' must be an integer, not " + json_type_name(*v), name);
}

std::optional<double> FieldReader::number(const char* name, double lo, double hi, bool lo_open) const {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_number())
    throw invalid_request(std::string("'") + name + "' must be a number, not " + json_type_name(*v), name);
  const double d = v->get<double>();
  const bool below = lo_open ? !(d > lo) : !(d >= lo);
  if (below || !(d <= hi)) {
    const std::string bounds = lo_open ? "greater than " + format_bound(lo) + " and at most " + format_bound(hi)
                                       : "between " + format_bound(lo) + " and " + format_bound(hi);
    throw invalid_request(std::string("'") + name + "' must be " + bounds + ", got " + format_bound(d), name);
  }
  return d;
}

}  // namespace rf::server
