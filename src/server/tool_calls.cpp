// Tool-call formats: detection from the template and parsing of replies.
#include "server/tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "grammar/json_schema.h"

namespace rf::server {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]", kPythonTag = "<|python_tag|>";

std::string_view trim(std::string_view s) {
  const auto ws = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<Json> parse_json(std::string_view s) {
  Json j = Json::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// {"name": N, "arguments" | "parameters": object or JSON text} naming an
// offered tool -> a call; anything else -> nothing.
std::optional<ToolCall> call_of(const Json& j, const std::vector<std::string>& tool_names) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const std::string name = j["name"].get<std::string>();
  if (std::find(tool_names.begin(), tool_names.end(), name) == tool_names.end()) return std::nullopt;
  Json args = Json::object();
  for (const char* key : {"arguments", "parameters"}) {
    if (!j.contains(key)) continue;
    args = j[key];
    if (args.is_string()) {  // arguments already as JSON text
      auto inner = parse_json(args.get<std::string>());
      if (!inner) return std::nullopt;
      args = *inner;
    }
    break;
  }
  if (!args.is_object()) return std::nullopt;
  return ToolCall{"", name, args.dump()};
}

ParsedReply parse_hermes(std::string_view text, const std::vector<std::string>& names) {
  ParsedReply r;
  std::string content;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t body = open + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    const size_t end = close == std::string_view::npos ? text.size() : close;
    auto j = parse_json(trim(text.substr(body, end - body)));
    std::optional<ToolCall> call = j ? call_of(*j, names) : std::nullopt;
    if (!call) break;  // not a call: the rest stays text
    content.append(text.substr(pos, open - pos));
    r.calls.push_back(std::move(*call));
    pos = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
  }
  content.append(text.substr(pos));
  r.content = r.calls.empty() ? std::string(text) : std::string(trim(content));
  return r;
}

ParsedReply parse_mistral(std::string_view text, const std::vector<std::string>& names) {
  ParsedReply r;
  size_t at = text.find(kMistralMarker);
  std::string_view before, list;
  if (at != std::string_view::npos) {
    before = text.substr(0, at);
    list = trim(text.substr(at + kMistralMarker.size()));
  } else if (trim(text).substr(0, 1) == "[") {  // the marker was a control token
    list = trim(text);
  }
  auto j = list.empty() ? std::nullopt : parse_json(list);
  if (j && j->is_array() && !j->empty()) {
    std::vector<ToolCall> calls;
    for (const Json& item : *j) {
      auto call = call_of(item, names);
      if (!call) {
        calls.clear();
        break;
      }
      calls.push_back(std::move(*call));
    }
    if (!calls.empty()) {
      r.calls = std::move(calls);
      r.content = std::string(trim(before));
      return r;
    }
  }
  r.content = std::string(text);
  return r;
}

ParsedReply parse_llama3(std::string_view text, const std::vector<std::string>& names) {
  ParsedReply r;
  std::string_view body = trim(text);
  if (body.substr(0, kPythonTag.size()) == kPythonTag) body = trim(body.substr(kPythonTag.size()));
  std::vector<ToolCall> calls;
  while (!body.empty()) {
    // One object, then optionally ";" and the next.
    const size_t semi = body.find(';');
    auto j = parse_json(trim(body.substr(0, semi)));
    auto call = j ? call_of(*j, names) : std::nullopt;
    if (!call) {
      calls.clear();
      break;
    }
    calls.push_back(std::move(*call));
    body = semi == std::string_view::npos ? std::string_view() : trim(body.substr(semi + 1));
  }
  if (calls.empty()) r.content = std::string(text);
  r.calls = std::move(calls);
  return r;
}

// The length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

ToolCallFormat tool_call_format(std::string_view source) {
  if (source.find(kMistralMarker) != std::string_view::npos) return ToolCallFormat::Mistral;
  if (source.find(kHermesOpen) != std::string_view::npos) return ToolCallFormat::Hermes;
  if (source.find(kPythonTag) != std::string_view::npos || source.find("ipython") != std::string_view::npos)
    return ToolCallFormat::Llama3Json;
  return ToolCallFormat::Hermes;
}

ParsedReply parse_tool_calls(ToolCallFormat f, std::string_view text, const std::vector<std::string>& tool_names,
                             const std::string& id_prefix) {
  ParsedReply r = f == ToolCallFormat::Hermes    ? parse_hermes(text, tool_names)
                  : f == ToolCallFormat::Mistral ? parse_mistral(text, tool_names)
                                                 : parse_llama3(text, tool_names);
  for (size_t i = 0; i < r.calls.size(); ++i) r.calls[i].id = "call_" + id_prefix + "_" + std::to_string(i);
  return r;
}

size_t tool_call_safe_prefix(ToolCallFormat f, std::string_view text) {
  switch (f) {
    case ToolCallFormat::Hermes: {
      const size_t open = text.find(kHermesOpen);
      if (open != std::string_view::npos) return open;
      return text.size() - partial_marker(text, kHermesOpen);
    }
    case ToolCallFormat::Mistral: {
      const size_t at = text.find(kMistralMarker);
      if (at != std::string_view::npos) return at;
      if (trim(text).substr(0, 1) == "[") return 0;  // a list from the start: maybe calls
      return text.size() - partial_marker(text, kMistralMarker);
    }
    case ToolCallFormat::Llama3Json: {
      // Calls are the whole reply: hold a reply that starts like one.
      const std::string_view t = trim(text);
      if (t.empty() || t.front() == '{' || t.front() == '<') return 0;
      return text.size();
    }
  }
  return text.size();
}

grammar::Grammar tool_call_grammar(ToolCallFormat f, const nlohmann::ordered_json& tools, const std::string& only,
                                   bool parallel) {
  using grammar::Sequence;
  grammar::Grammar g;
  const uint32_t root = g.reserve_rule("root");
  const uint32_t call = g.reserve_rule("call");
  std::vector<Sequence> calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& fn = tools[i]["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    const Json schema = fn.contains("parameters")
                            ? Json(fn["parameters"])
                            : Json{{"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
    grammar::Grammar args;
    try {
      args = grammar::json_schema_grammar(schema);
    } catch (const Error& e) {
      fail("tools[", i, "].function.parameters: ", e.what());
    }
    const uint32_t args_root = grammar::import_rules(g, args, "t" + std::to_string(i) + "-");
    const char* key = f == ToolCallFormat::Llama3Json ? "parameters" : "arguments";
    // {"name": "NAME", "arguments": ARGS} (the name as JSON writes it: names are plain ASCII).
    Sequence seq = grammar::literal(std::string("{\"name\": \"") + name + "\", \"" + key + "\": ");
    seq.push_back(grammar::ref(args_root));
    const Sequence close = grammar::literal("}");
    seq.insert(seq.end(), close.begin(), close.end());
    calls.push_back(std::move(seq));
  }
  RF_CHECK(!calls.empty(), "tool_choice names no offered function");
  g.define_rule(call, calls);
  auto wrapped = [&](std::string_view open, std::string_view close) {
    Sequence s = grammar::literal(open);
    s.push_back(grammar::ref(call));
    const Sequence c = grammar::literal(close);
    s.insert(s.end(), c.begin(), c.end());
    return s;
  };
  const bool many = parallel && f != ToolCallFormat::Llama3Json;
  Sequence one, sep;
  if (f == ToolCallFormat::Hermes) {
    one = wrapped("<tool_call>\n", "\n</tool_call>");
    sep = grammar::literal("\n");
  } else if (f == ToolCallFormat::Mistral) {
    one = {grammar::ref(call)};
    sep = grammar::literal(", ");
  } else {
    one = {grammar::ref(call)};
  }
  // more ::= sep one more | (nothing): further calls.
  Sequence body = one;
  if (many) {
    const uint32_t more = g.reserve_rule("more");
    Sequence again = sep;
    again.insert(again.end(), one.begin(), one.end());
    again.push_back(grammar::ref(more));
    g.define_rule(more, {again, Sequence{}});
    body.push_back(grammar::ref(more));
  }
  if (f == ToolCallFormat::Mistral) {  // a JSON list (the [TOOL_CALLS] marker is a control token)
    Sequence list = grammar::literal("[");
    list.insert(list.end(), body.begin(), body.end());
    const Sequence end = grammar::literal("]");
    list.insert(list.end(), end.begin(), end.end());
    body = std::move(list);
  }
  g.define_rule(root, {body});
  g.root = root;
  g.validate();
  return g;
}

}  // namespace rf::server
