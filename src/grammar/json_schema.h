// JSON Schema -> grammar, for structured output (OpenAI response_format).
// Supported: the subset OpenAI's strict mode allows -- type object (properties,
// required, additionalProperties false), array (items), string, number,
// integer, boolean, null, a list of types, enum, const, anyOf (oneOf is
// treated as anyOf), $ref to "#", "#/$defs/X", "#/definitions/X" or any local
// JSON pointer, recursion through objects/arrays -- plus minLength/maxLength,
// minItems/maxItems, and numeric bounds: integers within minimum / maximum /
// exclusiveMinimum / exclusiveMaximum exactly (int_range.h); numbers with a
// non-negative minimum have no minus sign, their other bounds and
// multipleOf are not enforced.
// Objects: properties in the order listed; required ones must appear,
// optional ones may be left out; no other properties. An object schema
// without "properties" (and additionalProperties not false) is any object.
// Whitespace between tokens: none, one space, or one newline and at most
// kMaxIndent spaces or tabs (compact and indented JSON both fit; a model
// cannot loop on blank lines); none inside numbers, literals or strings.
// Refused (an error, not silently ignored): allOf, not, if, pattern,
// patternProperties, prefixItems, uniqueItems. Annotations (title,
// description, format, default) are ignored.
// Errors (rf::Error) name the schema path, e.g. "json schema at
// #/properties/age: unknown type 'int'": unknown types/keywords values,
// unresolvable $ref, and $ref cycles that consume no input.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "grammar/grammar.h"

namespace rf::grammar {

constexpr int kMaxIndent = 20;

// GBNF text for the schema (root rule "root": optional whitespace, a value,
// optional whitespace).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
Grammar json_schema_grammar(const nlohmann::ordered_json& schema);

// Any JSON object (response_format json_object), and any JSON value.
std::string json_object_gbnf();
std::string json_value_gbnf();

}  // namespace rf::grammar
