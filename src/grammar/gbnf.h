// GBNF: llama.cpp's grammar text format, parsed into a Grammar.
//   rule ::= alternatives          (the grammar starts at the rule `root`)
//   alternatives: sequence ("|" sequence)*
//   sequence: item*, item: primary ("*" | "+" | "?" | "{m}" | "{m,}" | "{m,n}")?
//   primary: "literal" | [class] | [^class] | . | rule-name | "(" alternatives ")"
// Literals and classes take the escapes \n \r \t \" \\ \] \- \xHH \uHHHH
// \UHHHHHHHH; `#` starts a comment to the end of the line. A rule ends at a
// newline unless inside parentheses or right after "::=" or "|".
// Errors are rf::Error "gbnf line L column C: expected ..." (or naming the
// undefined/duplicate rule). Repetitions become generated rules named
// "<rule>-<n>".
#pragma once

#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace rf::grammar {

// Parses `text` and validates the result (see Grammar::validate).
Grammar parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace rf::grammar
