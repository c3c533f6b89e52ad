// OpenAI's Responses API: the request's translation, the store, the shapes.
#include "server/responses.h"

#include <chrono>
#include <limits>

#include "core/json_text.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace rf::server {
namespace {


// A message item's content: a string, or parts of text.
std::string parts_text(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw invalid_request("'" + param + "' must be a string or a list of content parts", param);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw invalid_request("'" + p + "' must be a content part with a 'type'", p);
    const std::string type = part["type"].get<std::string>();
    if (type != "input_text" && type != "output_text" && type != "text" && type != "reasoning_text" &&
        type != "summary_text")
      throw unsupported_parameter(p, "content parts of type '" + type + "'");
    if (!part.contains("text") || !part["text"].is_string())
      throw invalid_request("'" + p + ".text' must be a string", p + ".text");
    if (!text.empty()) text += '\n';
    text += part["text"].get<std::string>();
  }
  return text;
}

std::string string_field(const Json& item, const char* key, const std::string& param) {
  auto it = item.find(key);
  if (it == item.end() || !it->is_string())
    throw invalid_request("'" + param + "." + key + "' is required and must be a string", param + "." + key);
  return it->get<std::string>();
}

// Input items -> chat messages appended to `out`. A reasoning item goes with
// the assistant turn after it; function calls join the assistant turn they
// follow (or start one).
void add_items(const Json& input, Json& out) {
  if (input.is_string()) {
    out.push_back(Json{{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array()) throw invalid_request("'input' must be a string or a list of items", "input");
  std::string reasoning;
  auto assistant = [&]() -> Json& {
    if (out.empty() || out.back()["role"] != "assistant" || out.back().contains("_closed"))
      out.push_back(Json{{"role", "assistant"}, {"content", ""}});
    Json& m = out.back();
    if (!reasoning.empty()) {
      m["reasoning_content"] = m.value("reasoning_content", "") + reasoning;
      reasoning.clear();
    }
    return m;
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const Json& item = input[i];
    const std::string p = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) throw invalid_request("'" + p + "' must be an object", p);
    const std::string type = item.contains("type") && item["type"].is_string() ? item["type"].get<std::string>() : "message";
    if (type == "message") {
      const std::string role = string_field(item, "role", p);
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        throw invalid_request("'" + p + ".role' must be user, assistant, system or developer", p + ".role");
      if (!item.contains("content")) throw invalid_request("'" + p + ".content' is required", p + ".content");
      const std::string text = parts_text(item["content"], p + ".content");
      if (role == "assistant") {
        Json& m = assistant();
        m["content"] = m["content"].get<std::string>() + text;
      } else {
        out.push_back(Json{{"role", role == "developer" ? "system" : role}, {"content", text}});
      }
    } else if (type == "function_call") {
      const std::string call_id = string_field(item, "call_id", p), name = string_field(item, "name", p),
                        args = string_field(item, "arguments", p);
      Json& m = assistant();
      if (!m.contains("tool_calls")) m["tool_calls"] = Json::array();
      m["tool_calls"].push_back(Json{{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}});
    } else if (type == "function_call_output") {
      const std::string call_id = string_field(item, "call_id", p);
      if (!item.contains("output")) throw invalid_request("'" + p + ".output' is required", p + ".output");
      if (!out.empty() && out.back()["role"] == "assistant") out.back()["_closed"] = true;
      out.push_back(Json{{"role", "tool"}, {"tool_call_id", call_id}, {"content", parts_text(item["output"], p + ".output")}});
    } else if (type == "reasoning") {
      std::string text;
      if (auto c = item.find("content"); c != item.end() && !c->is_null()) text = parts_text(*c, p + ".content");
      else if (auto s = item.find("summary"); s != item.end() && !s->is_null()) text = parts_text(*s, p + ".summary");
      reasoning += text;
    } else {
      throw unsupported_parameter(p + ".type", "input items of type '" + type + "'");
    }
  }
  for (Json& m : out) m.erase("_closed");
}

Json responses_tools(const Json& tools) {
  if (!tools.is_array()) throw invalid_request(std::string("'tools' must be a list, not ") + json_type_name(tools), "tools");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string())
      throw invalid_request("'" + p + "' must be an object with a 'type'", p);
    if (t["type"] != "function") throw unsupported_parameter(p + ".type", "tools of type '" + t["type"].get<std::string>() + "'");
    if (!t.contains("name") || !t["name"].is_string())
      throw invalid_request("'" + p + ".name' is required and must be a string", p + ".name");
    if (t.contains("parameters") && !t["parameters"].is_null() && !t["parameters"].is_object())
      throw invalid_request("'" + p + ".parameters' must be a JSON Schema object", p + ".parameters");
    Json fn = {{"name", t["name"]}};
    if (t.contains("description")) fn["description"] = t["description"];
    if (t.contains("parameters") && !t["parameters"].is_null()) fn["parameters"] = t["parameters"];
    out.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

Json tool_choice_of(const Json& tc) {
  if (tc.is_string()) return tc;  // none, auto, required (checked by the chat parser)
  if (tc.is_object() && tc.value("type", "") == "function" && tc.contains("name"))
    return Json{{"type", "function"}, {"function", {{"name", tc["name"]}}}};
  throw invalid_request("'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}",
                        "tool_choice");
}

Json format_of(const Json& text) {
  if (!text.is_object()) throw invalid_request("'text' must be an object", "text");
  auto fmt = text.find("format");
  if (fmt == text.end() || fmt->is_null()) return Json();
  if (!fmt->is_object() || !fmt->contains("type") || !(*fmt)["type"].is_string())
    throw invalid_request("'text.format' must be an object with a 'type'", "text.format");
  const std::string type = (*fmt)["type"].get<std::string>();
  if (type == "text" || type == "json_object") return Json{{"type", type}};
  if (type != "json_schema")
    throw invalid_request("'text.format.type' must be text, json_object or json_schema, not '" + type + "'", "text.format.type");
  if (!fmt->contains("schema") || !(*fmt)["schema"].is_object())
    throw invalid_request("'text.format.schema' must be a JSON Schema object", "text.format.schema");
  return Json{{"type", "json_schema"},
              {"json_schema", {{"name", fmt->value("name", "response")}, {"schema", (*fmt)["schema"]}}}};
}

}  // namespace

ResponsesRequest parse_responses_request(const Json& body, ResponseStore& store) {
  const FieldReader f(body);
  ResponsesRequest r;
  Json chat = Json::object();
  if (auto model = f.string("model")) chat["model"] = *model;
  Json messages = Json::array();
  const std::optional<std::string> instructions = f.string("instructions");
  if (instructions) messages.push_back(Json{{"role", "system"}, {"content", *instructions}});
  Json conversation = Json::array();
  const std::optional<std::string> previous = f.string("previous_response_id");
  if (previous) {
    const std::optional<ResponseStore::Entry> e = store.get(*previous);
    if (!e)
      throw ApiError(404,
                     "Previous response with id '" + *previous + "' not found: " +
                         (store.enabled() ? "it was never stored here (store: false), or it was dropped from the " +
                                                std::to_string(store.capacity() >> 20) +
                                                " MB response store (least recently used first)"
                                          : std::string("this server keeps no responses (start it with "
                                                        "--responses-store-mb to continue conversations)")),
                     "invalid_request_error", "previous_response_id", "previous_response_not_found");
    conversation = Json::parse(e->conversation);
  }
  const Json* input = f.get("input");
  if (!input) throw invalid_request("'input' is required", "input");
  add_items(*input, conversation);
  for (const Json& m : conversation) messages.push_back(m);
  if (messages.empty()) throw invalid_request("'input' holds no messages", "input");
  chat["messages"] = std::move(messages);
  r.conversation = std::move(conversation);

  if (auto max = f.integer("max_output_tokens", 1, std::numeric_limits<int32_t>::max())) chat["max_tokens"] = *max;
  // Responses fields chat completions shares, and this server's extensions.
  for (const char* key : {"temperature", "top_p", "stream", "parallel_tool_calls", "top_k", "min_p", "seed",
                          "logit_bias", "reasoning_budget", "chat_template_kwargs", "grammar", "min_tokens",
                          "ignore_eos", "speculative", "repetition_penalty", "stop"})
    if (const Json* v = f.get(key)) chat[key] = *v;
  if (const Json* tools = f.get("tools")) chat["tools"] = responses_tools(*tools);
  if (const Json* tc = f.get("tool_choice")) chat["tool_choice"] = tool_choice_of(*tc);
  if (const Json* text = f.get("text"))
    if (Json fmt = format_of(*text); !fmt.is_null()) chat["response_format"] = fmt;
  if (const Json* reasoning = f.get("reasoning")) {
    if (!reasoning->is_object()) throw invalid_request("'reasoning' must be an object", "reasoning");
    if (auto effort = FieldReader(*reasoning).string("effort")) chat["reasoning_effort"] = *effort;
    if (const Json* s = FieldReader(*reasoning).get("summary"); s && !s->is_string())
      throw invalid_request("'reasoning.summary' must be a string", "reasoning.summary");
  }
  r.store = f.boolean("store").value_or(true);
  if (const Json* md = f.get("metadata"); md && !md->is_object())
    throw invalid_request("'metadata' must be an object", "metadata");
  (void)f.string("user");  // (a string, or a 400)
  if (auto trunc = f.string("truncation"); trunc && *trunc != "disabled")
    throw unsupported_parameter("truncation", "only 'disabled' (the input must fit the context)");
  if (f.boolean("background").value_or(false)) throw unsupported_parameter("background");
  if (f.get("conversation")) throw unsupported_parameter("conversation", "use previous_response_id");
  if (const Json* top = f.get("top_logprobs"); top && !(top->is_number_integer() && top->get<int64_t>() == 0))
    throw unsupported_parameter("top_logprobs");
  if (const Json* inc = f.get("include")) {
    if (!inc->is_array()) throw invalid_request("'include' must be a list of strings", "include");
    for (const Json& s : *inc)
      if (!s.is_string()) throw invalid_request("'include' must be a list of strings", "include");
  }
  r.chat = parse_chat_request(chat);
  r.chat.endpoint = Endpoint::Responses;

  // What the response object repeats.
  Json& echo = r.echo;
  echo["instructions"] = instructions ? Json(*instructions) : Json();
  echo["max_output_tokens"] = chat.contains("max_tokens") ? chat["max_tokens"] : Json();
  echo["metadata"] = f.get("metadata") ? *f.get("metadata") : Json::object();
  echo["parallel_tool_calls"] = r.chat.parallel_tool_calls;
  echo["previous_response_id"] = previous ? Json(*previous) : Json();
  echo["reasoning"] = Json{{"effort", f.get("reasoning") ? f.get("reasoning")->value("effort", Json()) : Json()},
                           {"summary", nullptr}};
  echo["store"] = r.store && store.enabled();
  echo["temperature"] = r.chat.sampling.temperature;
  echo["text"] = Json{{"format", f.get("text") && f.get("text")->contains("format") ? (*f.get("text"))["format"]
                                                                                    : Json{{"type", "text"}}}};
  echo["tool_choice"] = f.get("tool_choice") ? *f.get("tool_choice") : Json("auto");
  echo["tools"] = f.get("tools") ? *f.get("tools") : Json::array();
  echo["top_p"] = r.chat.sampling.top_p;
  echo["truncation"] = "disabled";
  echo["user"] = f.get("user") && f.get("user")->is_string() ? *f.get("user") : Json();
  return r;
}

ResponsesWriter::ResponsesWriter(std::string id, std::string model, const ResponsesRequest& req, ResponseStore* store)
    : id_(std::move(id)), model_(std::move(model)), conversation_(req.conversation), echo_(req.echo),
      store_(req.store && store && store->enabled() ? store : nullptr),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()) {}

std::string ResponsesWriter::item_id(const char* prefix) {
  // The response's own id, made unique per item.
  return std::string(prefix) + "_" + id_.substr(id_.find('_') + 1) + std::to_string(next_id_++);
}

void ResponsesWriter::event(std::string& out, const char* type, Json data) {
  Json e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [k, v] : data.items()) e[k] = std::move(v);
  out += "event: ";
  out += type;
  out += "\ndata: ";
  out += wire_json(e);
  out += "\n\n";
}

Json ResponsesWriter::response(const char* status, const ChoiceResult* c) const {
  Json r = {{"id", id_}, {"object", "response"}, {"created_at", created_}, {"status", status}, {"error", nullptr},
            {"incomplete_details", nullptr}, {"model", model_}, {"output", Json::array()}};
  for (const auto& [k, v] : echo_.items()) r[k] = v;
  r["usage"] = nullptr;
  if (c) {
    r["usage"] = Json{{"input_tokens", c->prompt_tokens},
                      {"input_tokens_details", {{"cached_tokens", c->cached_tokens}}},
                      {"output_tokens", c->completion_tokens},
                      {"output_tokens_details", {{"reasoning_tokens", c->reasoning_tokens}}},
                      {"total_tokens", c->prompt_tokens + c->completion_tokens}};
    if (c->finish == FinishReason::Length && c->tool_calls.empty()) {
      r["status"] = "incomplete";
      r["incomplete_details"] = Json{{"reason", "max_output_tokens"}};
    }
  }
  return r;
}

namespace {

Json reasoning_item(const std::string& id, const std::string& text) {
  return Json{{"id", id}, {"type", "reasoning"}, {"summary", Json::array()},
              {"content", Json::array({Json{{"type", "reasoning_text"}, {"text", text}}})}};
}

Json text_part(const std::string& text) {
  return Json{{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}, {"logprobs", Json::array()}};
}

Json message_item(const std::string& id, const std::string& text, const char* status) {
  return Json{{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"},
              {"content", Json::array({text_part(text)})}};
}

Json call_item(const std::string& id, const ToolCall& call, const char* status) {
  return Json{{"id", id}, {"type", "function_call"}, {"status", status}, {"call_id", call.id}, {"name", call.name},
              {"arguments", call.arguments}};
}

}  // namespace

void ResponsesWriter::begin(std::string& out, size_t, const std::vector<int32_t>&) {
  const Json r = response("in_progress", nullptr);
  event(out, "response.created", Json{{"response", r}});
  event(out, "response.in_progress", Json{{"response", r}});
}

void ResponsesWriter::open(std::string& out, Item item) {
  if (item_ == item) return;
  close(out);
  item_ = item;
  const bool reasoning = item == Item::Reasoning;
  items_.push_back({item, item_id(reasoning ? "rs" : "msg"), ""});
  const Streamed& s = items_.back();
  const int index = int(items_.size()) - 1;
  Json added = reasoning ? Json{{"id", s.id}, {"type", "reasoning"}, {"summary", Json::array()}, {"content", Json::array()}}
                         : Json{{"id", s.id}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
                                {"content", Json::array()}};
  event(out, "response.output_item.added", Json{{"output_index", index}, {"item", added}});
  const Json part = reasoning ? Json{{"type", "reasoning_text"}, {"text", ""}} : text_part("");
  event(out, "response.content_part.added", Json{{"item_id", s.id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
}

void ResponsesWriter::close(std::string& out) {
  if (item_ == Item::None) return;
  const Streamed& s = items_.back();
  const int index = int(items_.size()) - 1;
  const Json where = {{"item_id", s.id}, {"output_index", index}, {"content_index", 0}};
  if (item_ == Item::Reasoning) {
    Json done = where;
    done["text"] = s.text;
    event(out, "response.reasoning_text.done", done);
    Json part = where;
    part["part"] = Json{{"type", "reasoning_text"}, {"text", s.text}};
    event(out, "response.content_part.done", part);
    event(out, "response.output_item.done", Json{{"output_index", index}, {"item", reasoning_item(s.id, s.text)}});
  } else {
    Json done = where;
    done["text"] = s.text;
    done["logprobs"] = Json::array();
    event(out, "response.output_text.done", done);
    Json part = where;
    part["part"] = text_part(s.text);
    event(out, "response.content_part.done", part);
    event(out, "response.output_item.done", Json{{"output_index", index}, {"item", message_item(s.id, s.text, "completed")}});
  }
  item_ = Item::None;
}

void ResponsesWriter::delta(std::string& out, size_t, const ReplyDelta& d, const std::vector<TokenLogprob>&) {
  auto text_delta = [&](Item item, const std::string& text, const char* type) {
    open(out, item);
    Streamed& s = items_.back();
    s.text += text;
    std::string data = "{\"type\":\"";
    data += type;
    data += "\",\"sequence_number\":" + std::to_string(sequence_++) + ",\"item_id\":";
    append_json_string(data, s.id);
    data += ",\"output_index\":" + std::to_string(items_.size() - 1) + ",\"content_index\":0,\"delta\":";
    append_json_string(data, text);
    if (item == Item::Message) data += ",\"logprobs\":[]";
    data += '}';
    out += "event: ";
    out += type;
    out += "\ndata: " + data + "\n\n";
  };
  if (!d.reasoning.empty()) text_delta(Item::Reasoning, d.reasoning, "response.reasoning_text.delta");
  if (!d.content.empty()) text_delta(Item::Message, d.content, "response.output_text.delta");
}

void ResponsesWriter::tool_calls(std::string& out, size_t, const std::vector<ToolCall>& calls) {
  close(out);
  for (const ToolCall& call : calls) {
    call_ids_.push_back(item_id("fc"));
    const std::string& id = call_ids_.back();
    const int index = int(items_.size() + call_ids_.size()) - 1;
    event(out, "response.output_item.added", Json{{"output_index", index}, {"item", call_item(id, call, "in_progress")}});
    event(out, "response.function_call_arguments.delta", Json{{"item_id", id}, {"output_index", index}, {"delta", call.arguments}});
    event(out, "response.function_call_arguments.done",
          Json{{"item_id", id}, {"output_index", index}, {"name", call.name}, {"arguments", call.arguments}});
    event(out, "response.output_item.done", Json{{"output_index", index}, {"item", call_item(id, call, "completed")}});
  }
}

Json ResponsesWriter::output_of(const ChoiceResult& c) {
  Json output = Json::array();
  if (items_.empty() && call_ids_.empty()) {  // not streamed: reasoning, message, calls
    if (!c.reasoning.empty()) items_.push_back({Item::Reasoning, item_id("rs"), c.reasoning});
    if (!c.text.empty() || (c.reasoning.empty() && c.tool_calls.empty()))
      items_.push_back({Item::Message, item_id("msg"), c.text});
    for (size_t i = 0; i < c.tool_calls.size(); ++i) call_ids_.push_back(item_id("fc"));
  }
  for (const Streamed& s : items_)
    output.push_back(s.kind == Item::Reasoning ? reasoning_item(s.id, s.text) : message_item(s.id, s.text, "completed"));
  for (size_t i = 0; i < c.tool_calls.size() && i < call_ids_.size(); ++i)
    output.push_back(call_item(call_ids_[i], c.tool_calls[i], "completed"));
  return output;
}

void ResponsesWriter::keep(const Json& r, const ChoiceResult& c) {
  if (!store_) return;
  // The conversation through this reply, as chat messages.
  Json conversation = conversation_;
  Json reply = {{"role", "assistant"}, {"content", c.text}};
  if (!c.reasoning.empty()) reply["reasoning_content"] = c.reasoning;
  if (!c.tool_calls.empty()) {
    Json calls = Json::array();
    for (const ToolCall& call : c.tool_calls)
      calls.push_back(Json{{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    reply["tool_calls"] = std::move(calls);
  }
  conversation.push_back(std::move(reply));
  store_->put(id_, ResponseStore::Entry{wire_json(conversation), wire_json(r)});
}

void ResponsesWriter::finish(std::string& out, size_t, const ChoiceResult& c) {
  close(out);
  Json r = response("completed", &c);
  r["output"] = output_of(c);
  keep(r, c);
  const bool incomplete = r["status"] == "incomplete";
  event(out, incomplete ? "response.incomplete" : "response.completed", Json{{"response", std::move(r)}});
}

void ResponsesWriter::error(std::string& out, const ApiError& e) {
  Json r = response("failed", nullptr);
  r["error"] = Json{{"code", e.status() >= 500 ? "server_error" : "invalid_request"}, {"message", e.what()}};
  event(out, "response.failed", Json{{"response", std::move(r)}});
}

std::string ResponsesWriter::body(const std::vector<ChoiceResult>& choices, const Usage&) {
  const ChoiceResult& c = choices.front();
  Json r = response("completed", &c);
  r["output"] = output_of(c);
  keep(r, c);
  return wire_json(r);
}

}  // namespace rf::server
