// JSON Schema -> grammar: for each schema, texts that must be accepted and
// texts that must be rejected (each also checked against the independent
// checker in grammar_schema_check.h, so the expectations themselves are
// sound), and bad schemas with errors naming the schema path.
#include <gtest/gtest.h>

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
