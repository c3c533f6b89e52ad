// JSON Schema -> GBNF (see json_schema.h). A converter walks the schema,
// emitting one GBNF rule per object, array, $ref target and shared primitive,
// and the text is then parsed by parse_gbnf like any user grammar.
#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/error.h"
#include "grammar/gbnf.h"
#include "grammar/int_range.h"

namespace rf::grammar {
namespace {

using json = nlohmann::ordered_json;

// Shared primitive rules, added to the output when first used.
const std::map<std::string, std::string>& primitives() {
  static const std::map<std::string, std::string> p = {
      {"ws", str(R"(( " " | "\n" [ \t]{0,)", kMaxIndent, "})?")},
      {"char", R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))"},
      {"string", R"("\"" char* "\"")"},
      {"int-digits", R"("0" | [1-9] [0-9]*)"},
      {"frac-exp", R"(("." [0-9]+)? ([eE] [-+]? [0-9]+)?)"},
      {"number", R"("-"? int-digits frac-exp)"},
      {"integer", R"("-"? int-digits)"},
      {"boolean", R"("true" | "false")"},
      {"null", R"("null")"},
      {"value", R"(object | array | string | number | boolean | null)"},
      {"object", R"("{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}")"},
      {"array", R"("[" ws (value ws ("," ws value ws)*)? "]")"},
  };
  return p;
}

const std::map<std::string, std::vector<std::string>>& primitive_deps() {
  static const std::map<std::string, std::vector<std::string>> d = {
      {"string", {"char"}}, {"number", {"int-digits", "frac-exp"}}, {"integer", {"int-digits"}},
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"ws", "string", "value"}}, {"array", {"ws", "value"}},
  };
  return d;
}

// A GBNF string literal holding `bytes` exactly.
std::string gbnf_literal(const std::string& bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    uint8_t b = uint8_t(c);
    if (c == '"' || c == '\\') { out += '\\'; out += c; }
    else if (b < 0x20 || b == 0x7F) out += str("\\x", "0123456789ABCDEF"[b >> 4], "0123456789ABCDEF"[b & 15]);
    else out += c;
  }
  return out + "\"";
}

std::string repeat_suffix(uint64_t min, int64_t max) {  // max < 0: unbounded
  if (max < 0) return min == 0 ? "*" : min == 1 ? "+" : str("{", min, ",}");
  if (min == 0 && max == 1) return "?";
  return min == uint64_t(max) ? str("{", min, "}") : str("{", min, ",", max, "}");
}

class Converter {
 public:
  explicit Converter(const json& root) : root_(root) {}

  std::string run() {
    std::string body = visit(root_, "#", {});
    use("ws");
    rules_.insert(rules_.begin(), {"root", "ws " + body + " ws"});
    std::string out;
    for (const auto& [name, def] : rules_) out += name + " ::= " + def + "\n";
    return out;
  }

 private:
  [[noreturn]] static void bad(const std::string& path, const std::string& what) {
    fail("json schema at ", path, ": ", what);
  }

  std::string use(const std::string& prim) {
    if (used_.insert(prim).second) {
      for (const std::string& d : primitive_deps().count(prim) ? primitive_deps().at(prim) : std::vector<std::string>{})
        use(d);
      rules_.push_back({prim, primitives().at(prim)});
    }
    return prim;
  }

  std::string add_rule(const std::string& base, const std::string& def) {
    std::string name = fresh_name(base);
    rules_.push_back({name, def});
    return name;
  }
  std::string fresh_name(const std::string& base) {
    std::string clean;
    for (char c : base) clean += (isalnum(uint8_t(c)) || c == '-') ? c : '-';
    if (clean.empty()) clean = "r";
    std::string name = clean;
    for (int i = 2; taken_.count(name) || primitives().count(name) || name == "root"; ++i) name = str(clean, "-", i);
    taken_.insert(name);
    return name;
  }

  static uint64_t count_of(const json& s, const char* key, const std::string& path) {
    if (!s.contains(key)) return 0;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) bad(path + "/" + key, "must be a non-negative integer");
    return v.get<uint64_t>();
  }
  static int64_t max_of(const json& s, const char* key, const std::string& path) {
    return s.contains(key) ? int64_t(count_of(s, key, path)) : -1;
  }

  const json& resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#') bad(path, "only local $ref (\"#/...\") is supported, got '" + ref + "'");
    try {
      return root_.at(json::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      bad(path, "$ref '" + ref + "' does not resolve");
    }
  }

  // A GBNF expression for `s`. `guard`: $refs entered since input was last
  // consumed (an object or array opening), to reject cycles without progress.
  std::string visit(const json& s, const std::string& path, std::set<std::string> guard) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) bad(path, "schema 'false' accepts nothing");
      return use("value");
    }
    if (!s.is_object()) bad(path, "a schema must be an object");
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) bad(path + "/$ref", "must be a string");
      std::string r = s["$ref"].get<std::string>();
      if (guard.count(r)) bad(path, "$ref '" + r + "' recurses without consuming input");
      auto it = ref_rules_.find(r);
      if (it != ref_rules_.end()) return it->second;
      const json& target = resolve(r, path);
      std::string name = fresh_name(r == "#" ? "root-value" : r.substr(r.rfind('/') + 1));
      ref_rules_[r] = name;
      guard.insert(r);
      size_t slot = rules_.size();
      rules_.push_back({name, ""});
      std::string def = visit(target, r, guard);
      rules_[slot].second = def;
      return name;
    }
    if (s.contains("const")) return gbnf_literal(s["const"].dump());
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) bad(path + "/enum", "must be a non-empty array");
      std::string out = "(";
      for (size_t i = 0; i < e.size(); ++i) out += (i ? " | " : "") + gbnf_literal(e[i].dump());
      return out + ")";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& alts = s[key];
      if (!alts.is_array() || alts.empty()) bad(path + "/" + key, "must be a non-empty array");
      std::string out = "(";
      for (size_t i = 0; i < alts.size(); ++i)
        out += (i ? " | " : "") + visit(alts[i], str(path, "/", key, "/", i), guard);
      return out + ")";
    }
    for (const char* key : {"allOf", "not", "if", "pattern", "patternProperties", "prefixItems", "uniqueItems"})
      if (s.contains(key)) bad(path + "/" + key, str(key, " is not supported"));
    if (!s.contains("type")) {
      if (s.contains("properties")) return object(s, path);
      if (s.contains("items")) return array(s, path);
      return use("value");
    }
    const json& t = s["type"];
    if (t.is_array()) {
      if (t.empty()) bad(path + "/type", "must not be empty");
      std::string out = "(";
      for (size_t i = 0; i < t.size(); ++i) {
        if (!t[i].is_string()) bad(str(path, "/type/", i), "must be a string");
        out += (i ? " | " : "") + typed(s, t[i].get<std::string>(), path);
      }
      return out + ")";
    }
    if (!t.is_string()) bad(path + "/type", "must be a string or an array of strings");
    return typed(s, t.get<std::string>(), path);
  }

  std::string typed(const json& s, const std::string& type, const std::string& path) {
    if (type == "object") return object(s, path);
    if (type == "array") return array(s, path);
    if (type == "boolean") return use("boolean");
    if (type == "null") return use("null");
    if (type == "string") {
      uint64_t min = count_of(s, "minLength", path);
      int64_t max = max_of(s, "maxLength", path);
      if (max >= 0 && uint64_t(max) < min) bad(path, "maxLength is below minLength");
      if (min == 0 && max < 0) return use("string");
      use("char");
      return add_rule("string", "\"\\\"\" char" + repeat_suffix(min, max) + " \"\\\"\"");
    }
    if (type == "integer") return integer(s, path);
    if (type == "number") {
      // Bounds other than a non-negative minimum cannot be said by a grammar
      // of decimal text short of enumerating digits: not enforced.
      bool non_negative = false;
      for (const char* key : {"minimum", "exclusiveMinimum"})
        if (s.contains(key)) {
          if (!s[key].is_number()) bad(path + "/" + key, "must be a number");
          non_negative |= s[key].get<double>() >= 0;
        }
      if (!non_negative) return use("number");
      use("int-digits");
      use("frac-exp");
      return add_rule("non-negative-number", "int-digits frac-exp");
    }
    bad(path + "/type", "unknown type '" + type + "'");
  }

  // Integers with minimum / maximum / exclusiveMinimum / exclusiveMaximum
  // (numbers; a fractional bound rounds inward) as an exact digit grammar.
  std::string integer(const json& s, const std::string& path) {
    std::optional<int64_t> lo, hi;
    auto bound = [&](const char* key) -> std::optional<double> {
      if (!s.contains(key)) return std::nullopt;
      if (!s[key].is_number()) bad(path + "/" + key, "must be a number");
      const double v = s[key].get<double>();
      if (!(std::fabs(v) < 9e18)) bad(path + "/" + key, "is out of the supported range (|bound| < 9e18)");
      return v;
    };
    auto raise = [&](int64_t v) { lo = lo ? std::max(*lo, v) : v; };
    auto lower = [&](int64_t v) { hi = hi ? std::min(*hi, v) : v; };
    if (auto v = bound("minimum")) raise(int64_t(std::ceil(*v)));
    if (auto v = bound("exclusiveMinimum")) raise(int64_t(std::floor(*v)) + 1);
    if (auto v = bound("maximum")) lower(int64_t(std::floor(*v)));
    if (auto v = bound("exclusiveMaximum")) lower(int64_t(std::ceil(*v)) - 1);
    if (!lo && !hi) return use("integer");
    if (lo && hi && *lo > *hi) bad(path, str("no integer is within the bounds [", *lo, ", ", *hi, "]"));
    return add_rule("integer-range", int_range_gbnf(lo, hi));
  }

  std::string object(const json& s, const std::string& path) {
    use("ws");
    const bool closed = s.contains("additionalProperties") && s["additionalProperties"] == false;
    if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean())
      bad(path + "/additionalProperties", "only false (or true) is supported");
    if (!s.contains("properties")) {
      if (closed) return gbnf_literal("{") + " ws " + gbnf_literal("}");
      return use("object");
    }
    if (s.contains("additionalProperties") && !closed)
      bad(path + "/additionalProperties", "true together with properties is not supported");
    const json& props = s["properties"];
    if (!props.is_object()) bad(path + "/properties", "must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) bad(path + "/required", "must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string() || !props.contains(r.get<std::string>()))
          bad(path + "/required", "names '" + r.dump() + "', which is not in properties");
        required.insert(r.get<std::string>());
      }
    }
    // kv[i]: key ws ":" ws value ws. after[i]: the rest from property i once
    // something was written (each needs a comma); first[i]: nothing yet.
    std::vector<std::string> kv, names;
    for (const auto& [name, sub] : props.items()) {
      std::string value = visit(sub, path + "/properties/" + name, {});
      kv.push_back(gbnf_literal(json(name).dump()) + " ws \":\" ws " + value + " ws");
      names.push_back(name);
    }
    const size_t n = kv.size();
    std::vector<std::string> after(n + 1), first(n + 1);
    after[n] = first[n] = "";
    for (size_t i = n; i-- > 0;) {
      bool req = required.count(names[i]) > 0;
      std::string tail = after[i + 1].empty() ? "" : " " + after[i + 1];
      after[i] = add_rule("obj-after", req ? "\",\" ws " + kv[i] + tail : "(\",\" ws " + kv[i] + ")?" + tail);
      std::string fst = kv[i] + tail;
      if (!req) fst += first[i + 1].empty() ? " | \"\"" : " | " + first[i + 1];
      first[i] = add_rule("obj-first", fst);
    }
    return add_rule("object", "\"{\" ws " + (n ? first[0] + " " : "") + "\"}\"");
  }

  std::string array(const json& s, const std::string& path) {
    use("ws");
    std::string item = s.contains("items") ? visit(s["items"], path + "/items", {}) : use("value");
    uint64_t min = count_of(s, "minItems", path);
    int64_t max = max_of(s, "maxItems", path);
    if (max >= 0 && uint64_t(max) < min) bad(path, "maxItems is below minItems");
    std::string body;
    if (max != 0) {
      std::string more = "(\",\" ws " + item + " ws)" +
                         repeat_suffix(min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1);
      body = item + " ws " + more;
      if (min == 0) body = "(" + body + ")?";
      body += " ";
    }
    return add_rule("array", "\"[\" ws " + body + "\"]\"");
  }

  const json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> used_, taken_;
  std::map<std::string, std::string> ref_rules_;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) { return Converter(schema).run(); }

Grammar json_schema_grammar(const nlohmann::ordered_json& schema) { return parse_gbnf(json_schema_to_gbnf(schema)); }

std::string json_object_gbnf() {
  return json_schema_to_gbnf(nlohmann::ordered_json{{"type", "object"}});
}
std::string json_value_gbnf() { return json_schema_to_gbnf(nlohmann::ordered_json::object()); }

}  // namespace rf::grammar
