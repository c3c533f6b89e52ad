// JSON Schema -> grammar: for each schema, texts that must be accepted and
// texts that must be rejected (each also checked against the independent
// checker in grammar_schema_check.h, so the expectations themselves are
// sound), and bad schemas with errors naming the schema path.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar_schema_check.h"

namespace rf::grammar {
namespace {

using test::ojson;

struct Case {
  const char* schema;
  std::vector<std::string> accept, reject;
};

// A rejected text is either not JSON, fails the schema, or breaks a rule the
// grammar adds (property order, whitespace bound) -- listed separately.
void check(const Case& c, const std::vector<std::string>& grammar_only_rejects = {}) {
  ojson schema = ojson::parse(c.schema);
  Matcher m(json_schema_grammar(schema));
  for (const std::string& t : c.accept) {
    EXPECT_TRUE(m.matches(t)) << c.schema << "\n  should accept: " << t << "\n" << json_schema_to_gbnf(schema);
    EXPECT_TRUE(test::schema_valid(ojson::parse(t), schema, schema)) << "bad test case: " << t;
  }
  for (const std::string& t : c.reject) {
    EXPECT_FALSE(m.matches(t)) << c.schema << "\n  should reject: " << t;
    ojson v = ojson::parse(t, nullptr, false);
    EXPECT_TRUE(v.is_discarded() || !test::schema_valid(v, schema, schema)) << "bad test case: " << t;
  }
  for (const std::string& t : grammar_only_rejects) EXPECT_FALSE(m.matches(t)) << "should reject: " << t;
}

TEST(GrammarSchema, ObjectRequiredOptionalEnum) {
  check({R"({"type": "object", "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 5},
            "age": {"type": "integer", "minimum": 0},
            "color": {"enum": ["red", "green", 3, null]},
            "ok": {"type": "boolean"}},
          "required": ["name", "color"], "additionalProperties": false})",
         {R"({"name": "Bo", "color": "red"})", R"({"name":"ü✓","age":0,"color":3,"ok":true})",
          "{\n  \"name\": \"abcde\",\n  \"color\": null\n}", R"({"name": "a\"b", "age": 42, "color": "green"})"},
         {R"({"color": "red"})", R"({"name": "Bo"})", R"({"name": "Bo", "color": "blue"})",
          R"({"name": "toolong", "color": "red"})", R"({"name": "", "color": "red"})",
          R"({"name": "Bo", "color": "red", "extra": 1})", R"({"name": "Bo", "age": -1, "color": "red"})",
          R"({"name": "Bo", "age": 1.5, "color": "red"})", R"({"name": "Bo", "color": "red",})",
          R"({"name": "Bo", "color": "red", "ok": "yes"})"}},
        {R"({"color": "red", "name": "Bo"})",                        // order as listed
         "{\"name\": \"Bo\",          \"color\": \"red\"}"});        // whitespace bounded
}

TEST(GrammarSchema, ArraysNumbersNullableAnyOf) {
  check({R"({"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 3},
            "score": {"type": "number"},
            "note": {"type": ["string", "null"]},
            "id": {"anyOf": [{"type": "integer", "minimum": 1}, {"const": "none"}]}},
          "required": ["tags", "score", "note", "id"], "additionalProperties": false})",
         {R"({"tags": ["a"], "score": -1.5e-3, "note": null, "id": 7})",
          R"({"tags": ["a", "bb", "ccc"], "score": 0, "note": "x", "id": "none"})",
          R"({"tags":[ "a" , "b" ],"score":12.25,"note":"","id":10})"},
         {R"({"tags": [], "score": 1, "note": null, "id": 1})", R"({"tags": ["a","b","c","d"], "score": 1, "note": null, "id": 1})",
          R"({"tags": ["abcd"], "score": 1, "note": null, "id": 1})", R"({"tags": ["a"], "score": 01, "note": null, "id": 1})",
          R"({"tags": ["a"], "score": 1, "note": null, "id": 0})", R"({"tags": ["a"], "score": 1, "note": null, "id": "x"})",
          R"({"tags": ["a"], "score": 1, "id": 1})", R"({"tags": ["a"], "score": 1., "note": null, "id": 1})"}});
}

TEST(GrammarSchema, RefsAndRecursion) {
  check({R"({"$defs": {"node": {"type": "object", "properties": {
              "v": {"type": "integer"},
              "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
            "required": ["v"], "additionalProperties": false}},
          "$ref": "#/$defs/node"})",
         {R"({"v": 1})", R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": -4}]}]})"},
         {R"({"v": 1, "kids": [{"w": 2}]})", R"({"kids": []})", R"({"v": 1, "kids": [{"v":1},{"v":1},{"v":1}]})"}});
  check({R"({"definitions": {"pt": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}},
          "type": "object", "properties": {"a": {"$ref": "#/definitions/pt"}, "b": {"$ref": "#/definitions/pt"}},
          "required": ["a", "b"], "additionalProperties": false})",
         {R"({"a": [1, 2], "b": [3.5, -4]})"}, {R"({"a": [1], "b": [3, 4]})", R"({"a": [1, 2], "b": [3, 4, 5]})"}});
}

TEST(GrammarSchema, RefToTheRoot) {
  check({R"({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
          "required": ["next"], "additionalProperties": false})",
         {R"({"next": null})", R"({"next": {"next": {"next": null}}})"},
         {R"({"next": 1})", R"({"next": {}})", "{}"}});
}

TEST(GrammarSchema, AllOptionalAndEmptyObjects) {
  check({R"({"type": "object", "properties": {"a": {"type": "null"}, "b": {"type": "null"}, "c": {"type": "null"}},
          "additionalProperties": false})",
         {"{}", R"({"b": null})", R"({"a": null, "c": null})", R"({"a": null, "b": null, "c": null})"},
         {R"({,"a": null})", R"({"a": null,})", R"({"a": null "b": null})", R"({"d": null})"}});
  check({R"({"type": "object", "properties": {}, "additionalProperties": false})", {"{}", "{ }"}, {R"({"a": 1})"}});
}

TEST(GrammarSchema, AnyJson) {
  Matcher obj(parse_gbnf(json_object_gbnf()));
  Matcher any(parse_gbnf(json_value_gbnf()));
  for (const char* t : {"{}", R"({"a": [1, {"b": null}], "c": "d"})", " {\"x\": true}\n"}) {
    EXPECT_TRUE(obj.matches(t)) << t;
    EXPECT_TRUE(any.matches(t)) << t;
  }
  for (const char* t : {"[1, 2]", "3", "\"s\"", "null"}) {
    EXPECT_FALSE(obj.matches(t)) << t;
    EXPECT_TRUE(any.matches(t)) << t;
  }
  for (const char* t : {"{", R"({"a" 1})", "[1,]", "tru", "{\"a\": 1}}"}) EXPECT_FALSE(any.matches(t)) << t;
}

std::string schema_error(const char* schema) {
  try {
    json_schema_grammar(ojson::parse(schema));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Integer bounds: every integer in [-1500, 1500] (and some far outside)
// against the bounds, for ranges crossing zero, digit-count boundaries,
// exclusive and fractional bounds, and one-sided ones; "-0", leading zeros
// and "+" never.
TEST(GrammarSchema, IntegerBoundsAreExact) {
  struct Bounds {
    const char* schema;
    std::optional<int64_t> lo, hi;
  };
  const std::vector<Bounds> cases = {
      {R"({"type": "integer", "minimum": 1, "maximum": 12})", 1, 12},
      {R"({"type": "integer", "minimum": -37, "maximum": 1205})", -37, 1205},
      {R"({"type": "integer", "minimum": 100, "maximum": 999})", 100, 999},
      {R"({"type": "integer", "minimum": 0, "maximum": 0})", 0, 0},
      {R"({"type": "integer", "minimum": -1000, "maximum": -10})", -1000, -10},
      {R"({"type": "integer", "exclusiveMinimum": 9, "exclusiveMaximum": 101})", 10, 100},
      {R"({"type": "integer", "minimum": 2.5, "maximum": 77.9})", 3, 77},
      {R"({"type": "integer", "minimum": 95})", 95, std::nullopt},
      {R"({"type": "integer", "maximum": -3})", std::nullopt, -3},
      {R"({"type": "integer", "maximum": 250})", std::nullopt, 250},
      {R"({"type": "integer", "minimum": -250})", -250, std::nullopt},
  };
  for (const Bounds& b : cases) {
    SCOPED_TRACE(b.schema);
    const ojson schema = ojson::parse(b.schema);
    Matcher m(json_schema_grammar(schema));
    auto inside = [&](int64_t n) { return (!b.lo || n >= *b.lo) && (!b.hi || n <= *b.hi); };
    std::vector<int64_t> values;
    for (int64_t n = -1500; n <= 1500; ++n) values.push_back(n);
    for (int64_t n : {int64_t(99999), int64_t(-99999), int64_t(1234567890123), int64_t(-1234567890123)}) values.push_back(n);
    for (int64_t n : values) {
      ASSERT_EQ(m.matches(std::to_string(n)), inside(n)) << n << "\n" << json_schema_to_gbnf(schema);
      EXPECT_EQ(test::schema_valid(ojson(n), schema, schema), inside(n)) << "checker disagrees at " << n;
    }
    for (const char* t : {"-0", "00", "007", "+5", "1.0", "-", ""}) EXPECT_FALSE(m.matches(t)) << t;
  }
  EXPECT_THROW(json_schema_grammar(ojson::parse(R"({"type": "integer", "minimum": 5, "maximum": 4})")), Error);
  EXPECT_THROW(json_schema_grammar(ojson::parse(R"({"type": "integer", "exclusiveMinimum": 4, "exclusiveMaximum": 5})")),
               Error);
}

TEST(GrammarSchema, BadSchemasNameThePath) {
  EXPECT_EQ(schema_error(R"({"type": "object", "properties": {"age": {"type": "int"}}})"),
            "json schema at #/properties/age/type: unknown type 'int'");
  EXPECT_EQ(schema_error(R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}})"),
            "json schema at #/properties/a: $ref '#/$defs/missing' does not resolve");
  EXPECT_EQ(schema_error(R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}, {"type": "null"}]}, "b": {"$ref": "#/$defs/a"}},
                            "$ref": "#/$defs/a"})"),
            "json schema at #/$defs/b: $ref '#/$defs/a' recurses without consuming input");
  EXPECT_EQ(schema_error(R"({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]})"),
            "json schema at #/required: names '\"b\"', which is not in properties");
  EXPECT_EQ(schema_error(R"({"type": "array", "items": {"type": "string", "maxLength": -1}})"),
            "json schema at #/items/maxLength: must be a non-negative integer");
  EXPECT_EQ(schema_error(R"({"$ref": "http://example.com/s.json"})"),
            "json schema at #: only local $ref (\"#/...\") is supported, got 'http://example.com/s.json'");
  EXPECT_EQ(schema_error(R"({"allOf": [{"type": "string"}]})"), "json schema at #/allOf: allOf is not supported");
  EXPECT_EQ(schema_error(R"({"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]+$"}}})"),
            "json schema at #/properties/zip/pattern: pattern is not supported");
  EXPECT_EQ(schema_error(R"({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true})"),
            "json schema at #/additionalProperties: true together with properties is not supported");
}

}  // namespace
}  // namespace rf::grammar
