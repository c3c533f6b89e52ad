// Jinja lexer: splits template source into text and tag tokens, applying
// Jinja2's whitespace rules as Hugging Face transformers configures them:
// trim_blocks (drop the first newline after a block or comment tag),
// lstrip_blocks (drop spaces/tabs before a block or comment tag that starts
// a line), `-` / `+` markers on tags, {# comments #}, {% raw %} blocks,
// \r\n -> \n and the dropped final newline (keep_trailing_newline off).
// Inside {{ }} and {% %} it produces names, literals and operators; tag ends
// are only recognised outside brackets, as in Jinja2.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rf::jinja {

enum class TokType : uint8_t {
  Text,        // literal template text (value = the text)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,        // identifiers and keywords (value = the name)
  String,      // value = the decoded string
  Integer,     // int_value
  Float,       // float_value
  Operator,    // value = the operator text: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  Eof,
};

struct Token {
  TokType type = TokType::Eof;
  std::string value;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Throws TemplateError(Kind::Syntax) naming the line on malformed input.
std::vector<Token> lex(std::string_view source);

const char* token_type_name(TokType t);  // for error messages

}  // namespace rf::jinja
