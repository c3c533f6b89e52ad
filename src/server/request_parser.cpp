// Parsing and validation of completions and chat completions bodies into a
// GenerationRequest, and of /tokenize and /detokenize bodies (protocol.h). Ranges follow OpenAI's API reference;
// extensions (min_tokens, ignore_eos, speculative, top_k, min_p, repetition_penalty,
// add_generation_prompt) follow vLLM and llama.cpp.
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"
#include "server/protocol.h"
#include "server/request_fields.h"

namespace rf::server {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

struct TooDeep {};

void parse_stop(const FieldReader& f, GenerationRequest& r) {
  const Json* v = f.get("stop");
  if (!v) return;
  auto add = [&](const Json& s) {
    if (!s.is_string()) throw invalid_request("'stop' must be a string or a list of strings", "stop");
    std::string text = s.get<std::string>();
    if (!text.empty()) r.stop.push_back(std::move(text));
  };
  if (v->is_string()) {
    add(*v);
  } else if (v->is_array()) {
    if (v->size() > kMaxStopStrings)
      throw invalid_request("'stop' may hold at most " + std::to_string(kMaxStopStrings) + " strings", "stop");
    for (const Json& s : *v) add(s);
  } else {
    throw invalid_request(std::string("'stop' must be a string or a list of strings, not ") + json_type_name(*v),
                          "stop");
  }
}

// {"token id": bias, ...}: ids as decimal strings (OpenAI's form), biases in
// [-100, 100]. Whether an id is in the vocabulary is checked with the model.
void parse_logit_bias(const FieldReader& f, GenerationRequest& r) {
  const Json* v = f.get("logit_bias");
  if (!v) return;
  if (!v->is_object())
    throw invalid_request(std::string("'logit_bias' must be an object, not ") + json_type_name(*v), "logit_bias");
  for (const auto& [key, bias] : v->items()) {
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoll(key) > kInt32Max)
      throw invalid_request("'logit_bias' keys must be token ids (non-negative integers), not '" + key + "'",
                            "logit_bias");
    if (!bias.is_number() || !(bias.get<double>() >= -100.0 && bias.get<double>() <= 100.0))
      throw invalid_request("'logit_bias' values must be numbers in [-100, 100] (token " + key + ")", "logit_bias");
    r.logit_bias.emplace_back(int32_t(std::stoll(key)), float(bias.get<double>()));
  }
  std::sort(r.logit_bias.begin(), r.logit_bias.end());
  for (size_t i = 1; i < r.logit_bias.size(); ++i)
    if (r.logit_bias[i].first == r.logit_bias[i - 1].first)
      throw invalid_request("'logit_bias' names token " + std::to_string(r.logit_bias[i].first) + " twice",
                            "logit_bias");
}

// A known parameter that is fine only at its "off" value.
void refuse_if(bool present, const char* param, const std::string& detail = "") {
  if (present) throw unsupported_parameter(param, detail);
}

bool non_empty(const Json* v) { return v && !((v->is_array() || v->is_object() || v->is_string()) && v->empty()); }

// Fields shared by both endpoints.
void parse_stop_token_ids(const FieldReader& f, GenerationRequest& r);
void parse_structured_output(const FieldReader& f, GenerationRequest& r);

void parse_common(const FieldReader& f, GenerationRequest& r) {
  if (auto model = f.string("model")) r.model = *model;
  r.stream = f.boolean("stream").value_or(false);
  if (const Json* so = f.get("stream_options")) {
    if (!so->is_object())
      throw invalid_request(std::string("'stream_options' must be an object, not ") + json_type_name(*so),
                            "stream_options");
    if (!r.stream) throw invalid_request("'stream_options' is only allowed when 'stream' is true", "stream_options");
    r.include_usage = FieldReader(*so).boolean("include_usage").value_or(false);
  }
  SamplingParams& sp = r.sampling;
  sp.temperature = float(f.number("temperature", 0.0, 2.0).value_or(1.0));
  sp.top_p = float(f.number("top_p", 0.0, 1.0, /*lo_open=*/true).value_or(1.0));
  const int64_t top_k = f.integer("top_k", -1, kInt32Max).value_or(0);
  sp.top_k = top_k < 0 ? 0 : int32_t(top_k);
  sp.min_p = float(f.number("min_p", 0.0, 1.0).value_or(0.0));
  sp.presence_penalty = float(f.number("presence_penalty", -2.0, 2.0).value_or(0.0));
  sp.frequency_penalty = float(f.number("frequency_penalty", -2.0, 2.0).value_or(0.0));
  sp.repetition_penalty = float(f.number("repetition_penalty", 0.0, 10.0, /*lo_open=*/true).value_or(1.0));
  if (auto seed = f.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    sp.seed = uint64_t(*seed);
    r.seed_given = true;
  }
  parse_stop(f, r);
  r.min_tokens = int32_t(f.integer("min_tokens", 0, kInt32Max).value_or(0));
  r.ignore_eos = f.boolean("ignore_eos").value_or(false);
  r.speculative = f.boolean("speculative").value_or(true);
  r.n = int32_t(f.integer("n", 1, kMaxN).value_or(1));
  parse_logit_bias(f, r);
  parse_stop_token_ids(f, r);
  parse_structured_output(f, r);
}

// A list of token ids (each an integer in [0, INT32_MAX]) of parameter `param`.
std::vector<int32_t> token_ids(const Json& ids, const std::string& param, const char* what) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (const Json& t : ids) {
    if (!t.is_number_integer() && !t.is_number_unsigned())
      throw invalid_request("'" + param + "' " + what + " must hold integer token ids", param);
    const int64_t id = t.is_number_unsigned() ? (t.get<uint64_t>() > uint64_t(kInt32Max) ? -1 : int64_t(t.get<uint64_t>()))
                                              : t.get<int64_t>();
    if (id < 0 || id > kInt32Max) throw invalid_request("'" + param + "' holds an invalid token id", param);
    out.push_back(int32_t(id));
  }
  return out;
}

// vLLM's `stop_token_ids`: a list of token ids (checked against the
// vocabulary where the model is known).
void parse_stop_token_ids(const FieldReader& f, GenerationRequest& r) {
  const Json* v = f.get("stop_token_ids");
  if (!v || v->is_null()) return;
  if (!v->is_array())
    throw invalid_request(std::string("'stop_token_ids' must be a list, not ") + json_type_name(*v), "stop_token_ids");
  if (v->size() > kMaxStopTokenIds)
    throw invalid_request("'stop_token_ids' may hold at most " + std::to_string(kMaxStopTokenIds) + " ids",
                          "stop_token_ids");
  r.stop_token_ids = token_ids(*v, "stop_token_ids", "as a list");
}

// A grammar from GBNF text; one that does not compile is a 400 naming `param`.
std::shared_ptr<const grammar::Grammar> compile_grammar(const std::string& gbnf, const std::string& param) {
  try {
    return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf));
  } catch (const Error& e) {
    throw invalid_request("'" + param + "' cannot be compiled: " + e.what(), param);
  }
}

// Structured output: response_format {"type": "text" | "json_object" |
// "json_schema", "json_schema": {"name", "schema", "strict"}} (OpenAI), or
// a GBNF `grammar` (llama.cpp); not both.
void parse_structured_output(const FieldReader& f, GenerationRequest& r) {
  if (const Json* g = f.get("grammar"); g && !g->is_null()) {
    if (!g->is_string()) throw invalid_request("'grammar' must be a string of GBNF rules", "grammar");
    r.grammar = compile_grammar(g->get<std::string>(), "grammar");
    r.raw_grammar = true;
  }
  const Json* rf = f.get("response_format");
  if (!rf || rf->is_null()) return;
  if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
    throw invalid_request("'response_format' must be an object with a 'type'", "response_format");
  const std::string type = (*rf)["type"].get<std::string>();
  if (type == "text") return;
  if (r.grammar) throw invalid_request("give either 'grammar' or a 'response_format', not both", "response_format");
  if (type == "json_object") {
    r.grammar = compile_grammar(grammar::json_object_gbnf(), "response_format");
    return;
  }
  if (type != "json_schema")
    throw invalid_request("'response_format.type' must be 'text', 'json_object' or 'json_schema', not '" + type + "'",
                          "response_format.type");
  const std::string param = "response_format.json_schema";
  if (!rf->contains("json_schema") || !(*rf)["json_schema"].is_object())
    throw invalid_request("'" + param + "' must be an object with a 'schema'", param);
  const Json& js = (*rf)["json_schema"];
  if (!js.contains("schema") || !js["schema"].is_object())
    throw invalid_request("'" + param + ".schema' must be a JSON Schema object", param + ".schema");
  std::string gbnf;
  try {
    gbnf = grammar::json_schema_to_gbnf(js["schema"]);
  } catch (const Error& e) {
    throw invalid_request(std::string("'") + param + ".schema' is not supported: " + e.what(), param + ".schema");
  }
  r.grammar = compile_grammar(gbnf, param + ".schema");
}

PromptInput token_prompt(const Json& ids, const char* what) {
  PromptInput p;
  p.is_tokens = true;
  p.tokens = token_ids(ids, "prompt", what);
  if (p.tokens.empty()) throw invalid_request("'prompt' holds an empty list of token ids", "prompt");
  return p;
}

void parse_prompt(const FieldReader& f, GenerationRequest& r) {
  const Json* v = f.get("prompt");
  if (!v) throw invalid_request("'prompt' is required", "prompt");
  if (v->is_string()) {
    r.prompts.push_back(PromptInput{false, v->get<std::string>(), {}});
    return;
  }
  if (!v->is_array())
    throw invalid_request(std::string("'prompt' must be a string, a list of strings, a list of token ids or a list of "
                                      "lists of token ids, not ") + json_type_name(*v), "prompt");
  if (v->empty()) throw invalid_request("'prompt' is an empty list", "prompt");
  const Json& first = v->front();
  if (first.is_number()) {
    r.prompts.push_back(token_prompt(*v, "as a list of token ids"));
    return;
  }
  if (v->size() > kMaxPrompts)
    throw invalid_request("'prompt' may hold at most " + std::to_string(kMaxPrompts) + " prompts", "prompt");
  for (const Json& p : *v) {
    if (p.is_string() && first.is_string()) r.prompts.push_back(PromptInput{false, p.get<std::string>(), {}});
    else if (p.is_array() && first.is_array()) r.prompts.push_back(token_prompt(p, "as a list of lists"));
    else
      throw invalid_request("'prompt' must be a list of strings or a list of lists of token ids, without mixing",
                            "prompt");
  }
}

// Chat content: a string, null, or a list of text parts (joined by newlines).
std::string message_content(const Json& content, size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw invalid_request("'" + param + "' must be a string or a list of content parts", param);
  std::string text;
  bool first = true;
  for (const Json& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw invalid_request("each part of '" + param + "' must be an object with a 'type'", param);
    const std::string type = part["type"].get<std::string>();
    if (type != "text") throw unsupported_parameter(param, "content parts of type '" + type + "'");
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) throw invalid_request("a text part of '" + param + "' needs a 'text' string", param);
    if (!first) text += '\n';
    text += t->get<std::string>();
    first = false;
  }
  return text;
}

// An assistant message's tool_calls as templates expect them (as vLLM
// passes them): each call's `arguments` JSON text parsed into an object.
void template_tool_calls(Json& msg, const std::string& param) {
  auto calls = msg.find("tool_calls");
  if (calls == msg.end() || calls->is_null()) return;
  if (!calls->is_array()) throw invalid_request("'" + param + ".tool_calls' must be a list", param + ".tool_calls");
  for (Json& call : *calls) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      throw invalid_request("each of '" + param + ".tool_calls' needs a 'function' object", param + ".tool_calls");
    Json& args = call["function"]["arguments"];
    if (args.is_string()) {
      Json parsed = Json::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_discarded() && parsed.is_object()) args = std::move(parsed);
    }
  }
}

// An earlier turn's thinking, for templates that show it again:
// `reasoning_content` (or vLLM's `reasoning`), a string, given to the
// template as `reasoning_content` and, for harmony templates, `thinking`.
void message_reasoning(Json& msg, const std::string& param) {
  for (const char* key : {"reasoning_content", "reasoning", "thinking"}) {
    auto it = msg.find(key);
    if (it == msg.end() || it->is_null()) continue;
    if (!it->is_string()) throw invalid_request("'" + param + "." + key + "' must be a string", param + "." + key);
  }
  if (!msg.contains("reasoning_content") || msg["reasoning_content"].is_null()) {
    if (msg.contains("reasoning") && msg["reasoning"].is_string()) msg["reasoning_content"] = msg["reasoning"];
    else if (msg.contains("thinking") && msg["thinking"].is_string()) msg["reasoning_content"] = msg["thinking"];
    else return;
  }
  if (!msg.contains("thinking") || msg["thinking"].is_null()) msg["thinking"] = msg["reasoning_content"];
}

// The roles of OpenAI's chat API (function: the deprecated form of tool).
bool known_role(const std::string& role) {
  for (const char* r : {"system", "developer", "user", "assistant", "tool", "function"})
    if (role == r) return true;
  return false;
}

void parse_messages(const FieldReader& f, GenerationRequest& r) {
  const Json* v = f.get("messages");
  if (!v) throw invalid_request("'messages' is required", "messages");
  if (!v->is_array()) throw invalid_request(std::string("'messages' must be a list, not ") + json_type_name(*v), "messages");
  if (v->empty()) throw invalid_request("'messages' must not be empty", "messages");
  r.messages = Json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& m = (*v)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw invalid_request("'" + param + "' must be an object", param);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      throw invalid_request("'" + param + ".role' is required and must be a string", param + ".role");
    if (!known_role(role->get<std::string>()))
      throw invalid_request("'" + param + ".role' is '" + role->get<std::string>() +
                                "'; expected one of system, developer, user, assistant, tool, function",
                            param + ".role");
    Json msg = m;
    auto content = m.find("content");
    msg["content"] = message_content(content == m.end() ? Json() : *content, i);
    template_tool_calls(msg, param);
    message_reasoning(msg, param);
    r.messages.push_back(std::move(msg));
  }
}

// `tools`: a list of {"type": "function", "function": {"name", "description"?,
// "parameters"?}} with distinct names of 1-64 letters, digits, '_' or '-'.
Json parse_tool_list(const Json& tools, std::vector<std::string>& names) {
  if (!tools.is_array()) throw invalid_request(std::string("'tools' must be a list, not ") + json_type_name(tools), "tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string param = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("type") || t["type"] != "function")
      throw invalid_request("'" + param + "' must be an object of type 'function'", param);
    if (!t.contains("function") || !t["function"].is_object())
      throw invalid_request("'" + param + ".function' must be an object", param + ".function");
    const Json& fn = t["function"];
    const bool named = fn.contains("name") && fn["name"].is_string();
    const std::string name = named ? fn["name"].get<std::string>() : "";
    const bool valid = !name.empty() && name.size() <= 64 &&
                       name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
                           std::string::npos;
    if (!valid)
      throw invalid_request("'" + param + ".function.name' must be 1-64 letters, digits, '_' or '-'",
                            param + ".function.name");
    if (fn.contains("parameters") && !fn["parameters"].is_object())
      throw invalid_request("'" + param + ".function.parameters' must be a JSON Schema object",
                            param + ".function.parameters");
    if (fn.contains("description") && !fn["description"].is_string())
      throw invalid_request("'" + param + ".function.description' must be a string", param + ".function.description");
    if (std::find(names.begin(), names.end(), name) != names.end())
      throw invalid_request("'tools' offers the function '" + name + "' twice", param + ".function.name");
    names.push_back(name);
  }
  return tools;
}

// tools, tool_choice ("none", "auto", "required" or a named function: the
// latter two constrain the reply to calls) and parallel_tool_calls; the
// legacy functions / function_call are refused.
void parse_tools(const FieldReader& f, GenerationRequest& r) {
  refuse_if(non_empty(f.get("functions")), "functions");
  if (const Json* fc = f.get("function_call")) refuse_if(!(fc->is_string() && *fc == "none"), "function_call");
  if (const Json* tools = f.get("tools"); tools && !tools->is_null()) {
    r.tools = parse_tool_list(*tools, r.tool_names);
    if (r.tool_names.empty()) r.tools = Json();
  }
  r.parallel_tool_calls = f.boolean("parallel_tool_calls").value_or(true);
  const Json* tc = f.get("tool_choice");
  if (!tc || tc->is_null()) {
    r.tool_choice_auto = !r.tool_names.empty();
    return;
  }
  if (tc->is_string() && (*tc == "none" || *tc == "auto")) {
    r.tool_choice_auto = *tc == "auto" && !r.tool_names.empty();
    return;
  }
  const bool required = tc->is_string() && *tc == "required";
  const bool named = tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
                     (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string();
  if (required || named) {
    if (r.tool_names.empty()) throw invalid_request("'tool_choice' asks for a call but no 'tools' are given", "tool_choice");
    if (r.grammar)
      throw invalid_request("'tool_choice' forcing a call cannot be combined with 'response_format' or 'grammar'",
                            "tool_choice");
    r.tool_call_forced = true;
    if (named) {
      r.tool_call_name = (*tc)["function"]["name"].get<std::string>();
      if (std::find(r.tool_names.begin(), r.tool_names.end(), r.tool_call_name) == r.tool_names.end())
        throw invalid_request("'tool_choice' names the function '" + r.tool_call_name + "', which 'tools' does not offer",
                              "tool_choice");
    }
    return;
  }
  throw invalid_request("'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": "
                        "{\"name\": ...}}",
                        "tool_choice");
}

// chat_template_kwargs: an object of template variables, none of those
// the server sets itself.
Json parse_template_kwargs(const FieldReader& f) {
  const Json* v = f.get("chat_template_kwargs");
  if (!v) return Json();
  if (!v->is_object())
    throw invalid_request(std::string("'chat_template_kwargs' must be an object, not ") + json_type_name(*v),
                          "chat_template_kwargs");
  for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})
    if (v->contains(reserved))
      throw invalid_request(std::string("'chat_template_kwargs' may not set '") + reserved +
                                "' (the request's own fields give it)",
                            "chat_template_kwargs");
  return *v;
}

// Reasoning controls of a chat request: chat_template_kwargs, OpenAI's
// reasoning_effort (a template variable, as gpt-oss's template reads it),
// and the thinking budget `reasoning_budget` (tokens; -1: no limit).
void parse_reasoning(const FieldReader& f, GenerationRequest& r) {
  r.chat_template_kwargs = parse_template_kwargs(f);
  if (auto effort = f.string("reasoning_effort")) {
    bool known = false;
    for (const char* e : {"none", "minimal", "low", "medium", "high"}) known = known || *effort == e;
    if (!known)
      throw invalid_request("'reasoning_effort' must be one of none, minimal, low, medium, high, not '" + *effort + "'",
                            "reasoning_effort");
    if (!r.chat_template_kwargs.is_object()) r.chat_template_kwargs = Json::object();
    if (!r.chat_template_kwargs.contains("reasoning_effort")) r.chat_template_kwargs["reasoning_effort"] = *effort;
  }
  if (auto budget = f.integer("reasoning_budget", -1, kInt32Max)) r.reasoning_budget = int32_t(*budget);
}

}  // namespace

Json parse_json_body(std::string_view body) {
  const Json::parser_callback_t limit_depth = [](int depth, Json::parse_event_t, Json&) {
    if (size_t(depth) > kMaxJsonDepth) throw TooDeep{};
    return true;
  };
  Json j;
  try {
    j = Json::parse(body.begin(), body.end(), limit_depth);
  } catch (const Json::exception& e) {  // a syntax error, or a number too large for a double
    throw invalid_request(std::string("the body is not valid JSON: ") + e.what(), "", "invalid_json");
  } catch (const TooDeep&) {
    throw invalid_request("the body nests JSON deeper than " + std::to_string(kMaxJsonDepth) + " levels", "",
                          "invalid_json");
  }
  if (!j.is_object())
    throw invalid_request(std::string("the body must be a JSON object, not ") + json_type_name(j), "", "invalid_json");
  return j;
}

GenerationRequest parse_completion_request(const Json& body) {
  GenerationRequest r;
  r.endpoint = Endpoint::Completions;
  const FieldReader f(body);
  parse_common(f, r);
  parse_prompt(f, r);
  r.max_tokens = f.integer("max_tokens", 1, kInt32Max);
  if (auto lp = f.integer("logprobs", 0, kMaxLogprobs)) {
    r.logprobs = true;
    r.sampling.top_logprobs = int32_t(*lp);
  }
  refuse_if(f.boolean("echo").value_or(false), "echo");
  refuse_if(!f.string("suffix").value_or("").empty(), "suffix");
  refuse_if(f.integer("best_of", 1, 128).value_or(1) > 1, "best_of", "only best_of = 1 is supported");
  return r;
}

TokenizeRequest parse_tokenize_request(const Json& body) {
  TokenizeRequest r;
  const FieldReader f(body);
  if (auto model = f.string("model")) r.model = *model;
  // vLLM's `prompt` or `messages`, or llama.cpp's `content` (special
  // tokens added only with its `add_special`). A body with both `prompt`
  // and `content` is tokenized from `prompt` (vLLM's field; `content` is
  // then ignored, though still checked to be a string).
  const bool has_prompt = f.get("prompt") != nullptr, has_messages = f.get("messages") != nullptr,
             has_content = f.get("content") != nullptr;
  if (has_messages && (has_prompt || has_content))
    throw invalid_request("give either 'messages' (a chat) or a text ('prompt' or 'content'), not both", "messages");
  if (!has_prompt && !has_messages && !has_content)
    throw invalid_request("give one of 'prompt' (a string), 'messages' (a chat) or 'content' (a string)", "prompt");
  r.return_token_strs = f.boolean("return_token_strs").value_or(false);
  r.with_pieces = f.boolean("with_pieces").value_or(false);
  const std::optional<bool> add_special_tokens = f.boolean("add_special_tokens"), add_special = f.boolean("add_special");
  if (has_prompt || has_content) {
    const std::optional<std::string> content = f.string("content");
    r.prompt = has_prompt ? *f.string("prompt") : *content;
    // Either server's flag; vLLM's when both are given. The default is the
    // text field's server's: BOS for `prompt`, none for `content`.
    r.add_special_tokens = add_special_tokens.value_or(add_special.value_or(has_prompt));
    r.parse_special = f.boolean("parse_special").value_or(true);
    return r;
  }
  GenerationRequest chat;
  parse_messages(f, chat);
  r.chat = true;
  r.messages = std::move(chat.messages);
  std::vector<std::string> names;
  if (const Json* tools = f.get("tools"); tools && !tools->is_null()) r.tools = parse_tool_list(*tools, names);
  r.add_generation_prompt = f.boolean("add_generation_prompt").value_or(true);
  r.chat_template_kwargs = parse_template_kwargs(f);
  return r;
}

DetokenizeRequest parse_detokenize_request(const Json& body) {
  DetokenizeRequest r;
  const FieldReader f(body);
  if (auto model = f.string("model")) r.model = *model;
  const Json* v = f.get("tokens");
  if (!v) throw invalid_request("'tokens' is required", "tokens");
  if (!v->is_array()) throw invalid_request(std::string("'tokens' must be a list, not ") + json_type_name(*v), "tokens");
  r.tokens = token_ids(*v, "tokens", "as a list");
  return r;
}

GenerationRequest parse_chat_request(const Json& body) {
  GenerationRequest r;
  r.endpoint = Endpoint::ChatCompletions;
  const FieldReader f(body);
  parse_common(f, r);
  parse_messages(f, r);
  r.max_tokens = f.integer("max_completion_tokens", 1, kInt32Max);
  if (!r.max_tokens) r.max_tokens = f.integer("max_tokens", 1, kInt32Max);
  r.logprobs = f.boolean("logprobs").value_or(false);
  if (auto top = f.integer("top_logprobs", 0, kMaxLogprobs)) {
    if (!r.logprobs) throw invalid_request("'top_logprobs' needs 'logprobs' set to true", "top_logprobs");
    r.sampling.top_logprobs = int32_t(*top);
  }
  r.add_generation_prompt = f.boolean("add_generation_prompt").value_or(true);
  parse_tools(f, r);
  parse_reasoning(f, r);
  return r;
}

}  // namespace rf::server
