// Anthropic's Messages API: the request's translation and the reply's shapes.
#include "server/anthropic.h"

#include <limits>

#include "core/json_text.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace rf::server {
namespace {


// Text content: a string, or text blocks (joined by newlines).
std::string text_of(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw invalid_request("'" + param + "' must be a string or a list of content blocks", param);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& b = content[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!b.is_object() || !b.contains("type") || b["type"] != "text" || !b.contains("text") || !b["text"].is_string())
      throw invalid_request("'" + p + "' must be a text block {\"type\": \"text\", \"text\": ...}", p);
    if (!text.empty()) text += '\n';
    text += b["text"].get<std::string>();
  }
  return text;
}

const Json& field(const Json& b, const char* key, const std::string& param, bool (Json::*is)() const noexcept,
                  const char* what) {
  auto it = b.find(key);
  if (it == b.end() || !((*it).*is)())
    throw invalid_request("'" + param + "." + key + "' is required and must be " + what, param + "." + key);
  return *it;
}

// One Anthropic turn -> chat messages (a user turn's tool results become
// tool messages, ahead of its text).
void add_turn(const Json& m, size_t index, Json& out) {
  const std::string param = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) throw invalid_request("'" + param + "' must be an object", param);
  const Json& role = field(m, "role", param, &Json::is_string, "'user' or 'assistant'");
  if (role != "user" && role != "assistant")
    throw invalid_request("'" + param + ".role' must be 'user' or 'assistant'", param + ".role");
  auto content = m.find("content");
  if (content == m.end()) throw invalid_request("'" + param + ".content' is required", param + ".content");
  const bool user = role == "user";
  if (content->is_string()) {
    out.push_back(Json{{"role", role}, {"content", *content}});
    return;
  }
  if (!content->is_array())
    throw invalid_request("'" + param + ".content' must be a string or a list of content blocks", param + ".content");
  std::string text, thinking;
  Json calls = Json::array();
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& b = (*content)[i];
    const std::string p = param + ".content[" + std::to_string(i) + "]";
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string())
      throw invalid_request("'" + p + "' must be a content block with a 'type'", p);
    const std::string type = b["type"].get<std::string>();
    if (type == "text") {
      if (!text.empty()) text += '\n';
      text += field(b, "text", p, &Json::is_string, "a string").get<std::string>();
    } else if (type == "tool_result" && user) {
      const Json& id = field(b, "tool_use_id", p, &Json::is_string, "a string");
      std::string result;
      if (auto c = b.find("content"); c != b.end() && !c->is_null()) result = text_of(*c, p + ".content");
      if (auto err = b.find("is_error"); err != b.end() && !err->is_boolean())
        throw invalid_request("'" + p + ".is_error' must be a boolean", p + ".is_error");
      out.push_back(Json{{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
    } else if (type == "tool_use" && !user) {
      const Json& id = field(b, "id", p, &Json::is_string, "a string");
      const Json& name = field(b, "name", p, &Json::is_string, "a string");
      const Json& input = field(b, "input", p, &Json::is_object, "an object");
      calls.push_back(Json{{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", wire_json(input)}}}});
    } else if (type == "thinking" && !user) {
      thinking += field(b, "thinking", p, &Json::is_string, "a string").get<std::string>();
    } else if (type == "redacted_thinking" && !user) {
      // Encrypted thinking of another model: nothing this one can read.
    } else {
      throw unsupported_parameter(p, "content blocks of type '" + type + "' in " + role.get<std::string>() + " turns");
    }
  }
  if (user) {
    if (!text.empty() || content->empty()) out.push_back(Json{{"role", "user"}, {"content", text}});
    return;
  }
  Json msg = {{"role", "assistant"}, {"content", text}};
  if (!thinking.empty()) msg["reasoning_content"] = thinking;
  if (!calls.empty()) msg["tool_calls"] = calls;
  out.push_back(std::move(msg));
}

Json anthropic_tools(const Json& tools) {
  if (!tools.is_array()) throw invalid_request(std::string("'tools' must be a list, not ") + json_type_name(tools), "tools");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) throw invalid_request("'" + p + "' must be an object", p);
    if (t.contains("type") && !(t["type"].is_string() && (t["type"] == "custom")))
      throw unsupported_parameter(p + ".type", "server tools (only custom tools with an input_schema)");
    const Json& name = field(t, "name", p, &Json::is_string, "a string");
    const Json& schema = field(t, "input_schema", p, &Json::is_object, "a JSON Schema object");
    Json fn = {{"name", name}, {"parameters", schema}};
    if (auto d = t.find("description"); d != t.end() && !d->is_null()) {
      if (!d->is_string()) throw invalid_request("'" + p + ".description' must be a string", p + ".description");
      fn["description"] = *d;
    }
    out.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// The OpenAI chat body an Anthropic body means.
Json chat_body(const Json& body, bool need_max_tokens) {
  const FieldReader f(body);
  Json chat = Json::object();
  if (auto model = f.string("model")) chat["model"] = *model;
  if (need_max_tokens) {
    auto max = f.integer("max_tokens", 1, std::numeric_limits<int32_t>::max());
    if (!max) throw invalid_request("'max_tokens' is required", "max_tokens");
    chat["max_tokens"] = *max;
  }
  Json messages = Json::array();
  if (const Json* system = f.get("system")) messages.push_back(Json{{"role", "system"}, {"content", text_of(*system, "system")}});
  const Json* turns = f.get("messages");
  if (!turns || !turns->is_array() || turns->empty())
    throw invalid_request("'messages' is required and must be a non-empty list", "messages");
  for (size_t i = 0; i < turns->size(); ++i) add_turn((*turns)[i], i, messages);
  chat["messages"] = std::move(messages);
  if (auto t = f.number("temperature", 0.0, 1.0)) chat["temperature"] = *t;
  if (auto p = f.number("top_p", 0.0, 1.0)) chat["top_p"] = *p;
  if (auto k = f.integer("top_k", 0, std::numeric_limits<int32_t>::max())) chat["top_k"] = *k;
  if (const Json* stops = f.get("stop_sequences")) {
    if (!stops->is_array()) throw invalid_request("'stop_sequences' must be a list of strings", "stop_sequences");
    for (const Json& s : *stops)
      if (!s.is_string()) throw invalid_request("'stop_sequences' must be a list of strings", "stop_sequences");
    chat["stop"] = *stops;
  }
  if (auto stream = f.boolean("stream")) chat["stream"] = *stream;
  if (const Json* tools = f.get("tools")) chat["tools"] = anthropic_tools(*tools);
  if (const Json* tc = f.get("tool_choice")) {
    if (!tc->is_object() || !tc->contains("type") || !(*tc)["type"].is_string())
      throw invalid_request("'tool_choice' must be an object with a 'type'", "tool_choice");
    const std::string type = (*tc)["type"].get<std::string>();
    if (type == "auto" || type == "none") chat["tool_choice"] = type;
    else if (type == "any") chat["tool_choice"] = "required";
    else if (type == "tool") {
      if (!tc->contains("name") || !(*tc)["name"].is_string())
        throw invalid_request("'tool_choice.name' is required for type 'tool'", "tool_choice.name");
      chat["tool_choice"] = Json{{"type", "function"}, {"function", {{"name", (*tc)["name"]}}}};
    } else {
      throw invalid_request("'tool_choice.type' must be auto, any, tool or none, not '" + type + "'", "tool_choice.type");
    }
    if (auto d = FieldReader(*tc).boolean("disable_parallel_tool_use")) chat["parallel_tool_calls"] = !*d;
  }
  if (const Json* thinking = f.get("thinking")) {
    if (!thinking->is_object() || !thinking->contains("type") || !(*thinking)["type"].is_string())
      throw invalid_request("'thinking' must be an object with a 'type'", "thinking");
    const std::string type = (*thinking)["type"].get<std::string>();
    if (type == "enabled") {
      const auto budget = FieldReader(*thinking).integer("budget_tokens", 0, std::numeric_limits<int32_t>::max());
      if (!budget) throw invalid_request("'thinking.budget_tokens' is required when thinking is enabled", "thinking.budget_tokens");
      if (chat.contains("max_tokens") && *budget >= chat["max_tokens"].get<int64_t>())
        throw invalid_request("'thinking.budget_tokens' must be less than 'max_tokens'", "thinking.budget_tokens");
      chat["reasoning_budget"] = *budget;
      chat["chat_template_kwargs"] = Json{{"enable_thinking", true}};
    } else if (type == "disabled") {
      chat["reasoning_budget"] = 0;
      chat["chat_template_kwargs"] = Json{{"enable_thinking", false}};
    } else {
      throw invalid_request("'thinking.type' must be 'enabled' or 'disabled', not '" + type + "'", "thinking.type");
    }
  }
  // This server's extensions, as chat completions take them.
  for (const char* key : {"grammar", "logit_bias", "seed", "min_tokens", "ignore_eos", "speculative", "repetition_penalty", "min_p"})
    if (const Json* v = f.get(key)) chat[key] = *v;
  if (const Json* budget = f.get("reasoning_budget"); budget && !chat.contains("reasoning_budget")) chat["reasoning_budget"] = *budget;
  if (const Json* kwargs = f.get("chat_template_kwargs")) {
    Json merged = *kwargs;
    if (merged.is_object() && chat.contains("chat_template_kwargs"))
      for (const auto& [k, v] : chat["chat_template_kwargs"].items()) merged[k] = v;
    chat["chat_template_kwargs"] = std::move(merged);
  }
  if (const Json* md = f.get("metadata"); md && !md->is_object())
    throw invalid_request("'metadata' must be an object", "metadata");
  for (const char* unsupported : {"container", "mcp_servers"})
    if (const Json* v = f.get(unsupported); v && !(v->is_array() && v->empty())) throw unsupported_parameter(unsupported);
  return chat;
}

std::string stop_reason(const ChoiceResult& c) {
  if (!c.tool_calls.empty()) return "tool_use";
  if (c.finish == FinishReason::Length) return "max_tokens";
  if (!c.stop_string.empty()) return "stop_sequence";
  return "end_turn";
}

std::string tool_use_id(const ToolCall& call) { return "toolu_" + call.id.substr(call.id.find('_') + 1); }

Json usage_of(const ChoiceResult& c) {
  return Json{{"input_tokens", c.prompt_tokens}, {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", c.cached_tokens}, {"output_tokens", c.completion_tokens}};
}

void event(std::string& out, const char* name, const Json& data) {
  out += "event: ";
  out += name;
  out += "\ndata: ";
  out += wire_json(data);
  out += "\n\n";
}

}  // namespace

GenerationRequest parse_anthropic_messages(const Json& body) {
  GenerationRequest r = parse_chat_request(chat_body(body, true));
  r.endpoint = Endpoint::Messages;
  return r;
}

GenerationRequest parse_anthropic_count_tokens(const Json& body) {
  GenerationRequest r = parse_chat_request(chat_body(body, false));
  r.endpoint = Endpoint::Messages;
  return r;
}

void AnthropicWriter::begin(std::string& out, size_t, const std::vector<int32_t>& prompt_tokens) {
  const int32_t input = prompt_tokens.empty() ? 0 : prompt_tokens.front();
  event(out, "message_start",
        Json{{"type", "message_start"},
             {"message",
              {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_}, {"content", Json::array()},
               {"stop_reason", nullptr}, {"stop_sequence", nullptr},
               {"usage", {{"input_tokens", input}, {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 0},
                          {"output_tokens", 0}}}}}});
  keep_alive(out);
}

void AnthropicWriter::open(std::string& out, Block b) {
  if (block_ == b) return;
  close(out);
  block_ = b;
  ++index_;
  const Json block = b == Block::Thinking ? Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                          : Json{{"type", "text"}, {"text", ""}};
  event(out, "content_block_start", Json{{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
}

void AnthropicWriter::close(std::string& out) {
  if (block_ == Block::None) return;
  event(out, "content_block_stop", Json{{"type", "content_block_stop"}, {"index", index_}});
  block_ = Block::None;
}

void AnthropicWriter::delta(std::string& out, size_t, const ReplyDelta& d, const std::vector<TokenLogprob>&) {
  // (Anthropic's API has no logprobs.)
  auto text_delta = [&](Block b, const std::string& text) {
    open(out, b);
    std::string data = "{\"type\":\"content_block_delta\",\"index\":" + std::to_string(index_) + ",\"delta\":{\"type\":";
    data += b == Block::Thinking ? "\"thinking_delta\",\"thinking\":" : "\"text_delta\",\"text\":";
    append_json_string(data, text);
    data += "}}";
    out += "event: content_block_delta\ndata: " + data + "\n\n";
  };
  if (!d.reasoning.empty()) text_delta(Block::Thinking, d.reasoning);
  if (!d.content.empty()) text_delta(Block::Text, d.content);
}

void AnthropicWriter::tool_calls(std::string& out, size_t, const std::vector<ToolCall>& calls) {
  close(out);
  for (const ToolCall& call : calls) {
    ++index_;
    event(out, "content_block_start",
          Json{{"type", "content_block_start"},
               {"index", index_},
               {"content_block", {{"type", "tool_use"}, {"id", tool_use_id(call)}, {"name", call.name}, {"input", Json::object()}}}});
    event(out, "content_block_delta",
          Json{{"type", "content_block_delta"}, {"index", index_}, {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}});
    event(out, "content_block_stop", Json{{"type", "content_block_stop"}, {"index", index_}});
  }
}

void AnthropicWriter::finish(std::string& out, size_t, const ChoiceResult& c) {
  if (index_ < 0) open(out, Block::Text);  // a reply of nothing: one empty text block, as the body has
  close(out);
  const std::string reason = stop_reason(c);
  event(out, "message_delta",
        Json{{"type", "message_delta"},
             {"delta", {{"stop_reason", reason}, {"stop_sequence", reason == "stop_sequence" ? Json(c.stop_string) : Json()}}},
             {"usage", usage_of(c)}});
  event(out, "message_stop", Json{{"type", "message_stop"}});
}

void AnthropicWriter::error(std::string& out, const ApiError& e) {
  out += "event: error\ndata: " + anthropic_error_body(e) + "\n\n";
}

void AnthropicWriter::keep_alive(std::string& out) { out += "event: ping\ndata: {\"type\":\"ping\"}\n\n"; }

std::string AnthropicWriter::body(const std::vector<ChoiceResult>& choices, const Usage&) {
  const ChoiceResult& c = choices.front();
  Json content = Json::array();
  if (!c.reasoning.empty()) content.push_back(Json{{"type", "thinking"}, {"thinking", c.reasoning}, {"signature", ""}});
  if (!c.text.empty() || (c.tool_calls.empty() && c.reasoning.empty())) content.push_back(Json{{"type", "text"}, {"text", c.text}});
  for (const ToolCall& call : c.tool_calls)
    content.push_back(Json{{"type", "tool_use"}, {"id", tool_use_id(call)}, {"name", call.name},
                           {"input", Json::parse(call.arguments)}});
  const std::string reason = stop_reason(c);
  return wire_json(Json{{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_}, {"content", content},
                   {"stop_reason", reason},
                   {"stop_sequence", reason == "stop_sequence" ? Json(c.stop_string) : Json()},
                   {"usage", usage_of(c)}});
}

}  // namespace rf::server
