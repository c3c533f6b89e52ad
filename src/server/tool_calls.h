// Tool calls in a model's output (tool_choice "auto"): which format the
// model writes them in, found from its chat template, and the parsing of a
// finished choice's text into content and OpenAI tool calls. Formats:
//  - Hermes (Qwen 2.5/3, Hermes, ChatML tool templates): <tool_call>{"name":
//    ..., "arguments": {...}}</tool_call>, any number, text around them is
//    content;
//  - Mistral: [TOOL_CALLS] then a JSON list of {"name", "arguments"} (the
//    marker is a control token that may not reach the text);
//  - Llama 3.x JSON: the whole reply, after an optional <|python_tag|>, is
//    {"name": ..., "parameters": {...}} (several separated by ";").
// A call whose JSON does not parse or names no offered tool stays text.
// Streaming holds back text from where a call may start (safe_prefix), so a
// client never sees half a call as content.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace rf::server {

enum class ToolCallFormat { Hermes, Mistral, Llama3Json };

// The format the template `source` asks for (Hermes when it names none).
ToolCallFormat tool_call_format(std::string_view template_source);

struct ToolCall {
  std::string id;         // "call_" + a unique suffix
  std::string name;
  std::string arguments;  // a JSON object, as text
};

struct ParsedReply {
  std::string content;  // the text outside the calls (trimmed when there are calls)
  std::vector<ToolCall> calls;
};

// `id_prefix` makes the calls' ids unique ("<request id>_<choice>").
ParsedReply parse_tool_calls(ToolCallFormat f, std::string_view text, const std::vector<std::string>& tool_names,
                             const std::string& id_prefix);

// tool_choice "required" or a named function: the grammar of a reply that
// is nothing but calls in format `f` — one call, or with `parallel` one or
// more (Llama 3: one) — of the functions of `tools` (the request's validated
// list) named `only` (empty: any of them), each call's arguments valid for
// its `parameters` JSON Schema (none: an empty object). The replies parse
// back with parse_tool_calls. Throws rf::Error naming the schema that cannot
// be compiled ("tools[i].function.parameters: ...").
grammar::Grammar tool_call_grammar(ToolCallFormat f, const nlohmann::ordered_json& tools, const std::string& only,
                                   bool parallel);

// How many leading bytes of `text` (a choice's output so far) cannot be
// part of a tool call and may stream as content now.
size_t tool_call_safe_prefix(ToolCallFormat f, std::string_view text);

}  // namespace rf::server
