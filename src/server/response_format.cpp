// OpenAI response and SSE chunk formatting (response_format.h).
#include "server/response_format.h"

#include <unordered_set>

#include "core/json_text.h"
#include "core/utf8.h"

namespace rf::server {

const char* openai_finish_reason(FinishReason r) { return r == FinishReason::Length ? "length" : "stop"; }

ResponseFormatter::ResponseFormatter(ResponseMeta meta, const Tokenizer& tok) : meta_(std::move(meta)), tok_(tok) {
  const bool chat = meta_.endpoint == Endpoint::ChatCompletions;
  std::string head = "{\"id\":";
  append_json_string(head, meta_.id);
  head += chat ? ",\"object\":\"chat.completion.chunk\"" : ",\"object\":\"text_completion\"";
  head += ",\"created\":" + std::to_string(meta_.created) + ",\"model\":";
  append_json_string(head, meta_.model);
  prefix_ = "data: " + head + ",\"choices\":[{\"index\":";
  suffix_ = meta_.include_usage ? "}],\"usage\":null}\n\n" : "}]}\n\n";
}

std::string ResponseFormatter::piece(int32_t token) const {
  try {
    return tok_.token_to_piece(token, /*render_special=*/true);
  } catch (const std::exception&) {
    return "";
  }
}

namespace {

void append_bytes(std::string& out, const std::string& s) {
  out += '[';
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(static_cast<unsigned char>(s[i]));
  }
  out += ']';
}

// [{"index"?, "id", "type": "function", "function": {"name", "arguments"}}]
void append_tool_calls(std::string& out, const std::vector<ToolCall>& calls, bool with_index) {
  out += '[';
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i) out += ',';
    out += '{';
    if (with_index) out += "\"index\":" + std::to_string(i) + ',';
    out += "\"id\":";
    append_json_string(out, calls[i].id);
    out += ",\"type\":\"function\",\"function\":{\"name\":";
    append_json_string(out, calls[i].name);
    out += ",\"arguments\":";
    append_json_string(out, calls[i].arguments);
    out += "}}";
  }
  out += ']';
}

void append_usage(std::string& out, const Usage& u, bool chat) {
  out += "{\"prompt_tokens\":" + std::to_string(u.prompt_tokens) +
         ",\"completion_tokens\":" + std::to_string(u.completion_tokens) +
         ",\"total_tokens\":" + std::to_string(u.prompt_tokens + u.completion_tokens) +
         ",\"prompt_tokens_details\":{\"cached_tokens\":" + std::to_string(u.cached_tokens) + "}";
  if (chat) out += ",\"completion_tokens_details\":{\"reasoning_tokens\":" + std::to_string(u.reasoning_tokens) + "}";
  out += '}';
}

}  // namespace

// {"content":[{"token","logprob","bytes","top_logprobs":[...]}],"refusal":null}
void ResponseFormatter::append_chat_logprobs(std::string& out, const std::vector<TokenLogprob>& lps) const {
  auto entry = [&](int32_t token, float logprob) {
    const std::string p = piece(token);
    out += "{\"token\":";
    append_json_string(out, p);
    out += ",\"logprob\":";
    append_json_number(out, logprob);
    out += ",\"bytes\":";
    append_bytes(out, p);
  };
  out += "{\"content\":[";
  for (size_t i = 0; i < lps.size(); ++i) {
    if (i) out += ',';
    entry(lps[i].token, lps[i].logprob);
    out += ",\"top_logprobs\":[";
    const size_t n = std::min(lps[i].top.size(), size_t(meta_.top_logprobs));
    for (size_t k = 0; k < n; ++k) {
      if (k) out += ',';
      entry(lps[i].top[k].first, lps[i].top[k].second);
      out += '}';
    }
    out += "]}";
  }
  out += "],\"refusal\":null}";
}

// {"tokens":[..],"token_logprobs":[..],"top_logprobs":[{piece: lp}],"text_offset":[..]}
// As OpenAI's legacy API: the top alternatives plus the sampled token.
void ResponseFormatter::append_completion_logprobs(std::string& out, const std::vector<TokenLogprob>& lps,
                                                   size_t& text_offset) const {
  std::vector<std::string> pieces;
  pieces.reserve(lps.size());
  for (const auto& lp : lps) pieces.push_back(piece(lp.token));
  out += "{\"tokens\":[";
  for (size_t i = 0; i < lps.size(); ++i) {
    if (i) out += ',';
    append_json_string(out, pieces[i]);
  }
  out += "],\"token_logprobs\":[";
  for (size_t i = 0; i < lps.size(); ++i) {
    if (i) out += ',';
    append_json_number(out, lps[i].logprob);
  }
  out += "],\"top_logprobs\":[";
  for (size_t i = 0; i < lps.size(); ++i) {
    if (i) out += ',';
    out += '{';
    std::unordered_set<std::string> seen;  // one key per distinct piece
    bool first = true;
    auto add = [&](const std::string& p, float lp) {
      if (!seen.insert(p).second) return;
      if (!first) out += ',';
      first = false;
      append_json_string(out, p);
      out += ':';
      append_json_number(out, lp);
    };
    const size_t n = std::min(lps[i].top.size(), size_t(meta_.top_logprobs));
    for (size_t k = 0; k < n; ++k) add(piece(lps[i].top[k].first), lps[i].top[k].second);
    add(pieces[i], lps[i].logprob);
    out += '}';
  }
  out += "],\"text_offset\":[";
  for (size_t i = 0; i < lps.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(text_offset);
    text_offset += pieces[i].size();
  }
  out += "]}";
}

std::string ResponseFormatter::full_response(const std::vector<ChoiceResult>& choices) const {
  const bool chat = meta_.endpoint == Endpoint::ChatCompletions;
  std::string out = "{\"id\":";
  append_json_string(out, meta_.id);
  out += chat ? ",\"object\":\"chat.completion\"" : ",\"object\":\"text_completion\"";
  out += ",\"created\":" + std::to_string(meta_.created) + ",\"model\":";
  append_json_string(out, meta_.model);
  out += ",\"choices\":[";
  Usage usage;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    usage.add(c);
    if (i) out += ',';
    out += "{\"index\":" + std::to_string(i);
    if (chat) {
      out += ",\"message\":{\"role\":\"assistant\",\"content\":";
      if (!c.tool_calls.empty() && c.text.empty()) out += "null";
      else append_json_string(out, c.text);
      if (!c.reasoning.empty()) {
        out += ",\"reasoning_content\":";
        append_json_string(out, c.reasoning);
      }
      if (!c.tool_calls.empty()) {
        out += ",\"tool_calls\":";
        append_tool_calls(out, c.tool_calls, false);
      }
      out += ",\"refusal\":null}";
    } else {
      out += ",\"text\":";
      append_json_string(out, c.text);
    }
    out += ",\"logprobs\":";
    if (!meta_.logprobs) {
      out += "null";
    } else if (chat) {
      append_chat_logprobs(out, c.logprobs);
    } else {
      size_t offset = 0;
      append_completion_logprobs(out, c.logprobs, offset);
    }
    out += ",\"finish_reason\":\"";
    out += c.tool_calls.empty() ? openai_finish_reason(c.finish) : "tool_calls";
    out += "\"}";
  }
  out += "],\"usage\":";
  append_usage(out, usage, chat);
  out += '}';
  return out;
}

void ResponseFormatter::role_chunk(std::string& out, int index) const {
  out += prefix_;
  out += std::to_string(index);
  out += ",\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null";
  out += suffix_;
}

void ResponseFormatter::delta_chunk(std::string& out, int index, std::string_view text,
                                    const std::vector<TokenLogprob>& logprobs, size_t& text_offset) const {
  const bool chat = meta_.endpoint == Endpoint::ChatCompletions;
  out += prefix_;
  out += std::to_string(index);
  if (chat) {
    out += ",\"delta\":{\"content\":";
    append_json_string(out, text);
    out += "},\"logprobs\":";
  } else {
    out += ",\"text\":";
    append_json_string(out, text);
    out += ",\"logprobs\":";
  }
  if (!meta_.logprobs) out += "null";
  else if (chat) append_chat_logprobs(out, logprobs);
  else append_completion_logprobs(out, logprobs, text_offset);
  out += ",\"finish_reason\":null";
  out += suffix_;
}

void ResponseFormatter::reasoning_chunk(std::string& out, int index, std::string_view text,
                                        const std::vector<TokenLogprob>& logprobs) const {
  out += prefix_;
  out += std::to_string(index);
  out += ",\"delta\":{\"reasoning_content\":";
  append_json_string(out, text);
  out += "},\"logprobs\":";
  if (meta_.logprobs) append_chat_logprobs(out, logprobs);
  else out += "null";
  out += ",\"finish_reason\":null";
  out += suffix_;
}

void ResponseFormatter::tool_calls_chunk(std::string& out, int index, const std::vector<ToolCall>& calls) const {
  out += prefix_;
  out += std::to_string(index);
  out += ",\"delta\":{\"tool_calls\":";
  append_tool_calls(out, calls, true);
  out += "},\"logprobs\":null,\"finish_reason\":null";
  out += suffix_;
}

void ResponseFormatter::finish_chunk(std::string& out, int index, FinishReason reason, bool tool_calls) const {
  const bool chat = meta_.endpoint == Endpoint::ChatCompletions;
  out += prefix_;
  out += std::to_string(index);
  out += chat ? ",\"delta\":{}" : ",\"text\":\"\"";
  out += ",\"logprobs\":null,\"finish_reason\":\"";
  out += tool_calls ? "tool_calls" : openai_finish_reason(reason);
  out += '"';
  out += suffix_;
}

void ResponseFormatter::usage_chunk(std::string& out, const Usage& usage) const {
  // The prefix without its open choice: `data: {head},"choices":[],"usage":{...}}`.
  const size_t head_end = prefix_.size() - std::string_view(",\"choices\":[{\"index\":").size();
  out.append(prefix_, 0, head_end);
  out += ",\"choices\":[],\"usage\":";
  append_usage(out, usage, meta_.endpoint == Endpoint::ChatCompletions);
  out += "}\n\n";
}

void ResponseFormatter::error_event(std::string& out, const ApiError& e) {
  out += "data: ";
  out += error_body(e);
  out += "\n\n";
}

std::string tokenize_body(const std::vector<int32_t>& tokens, int32_t max_model_len, const Tokenizer* token_strs,
                          const Tokenizer* pieces) {
  Json body = {{"count", tokens.size()}, {"max_model_len", max_model_len}, {"tokens", tokens}};
  if (pieces) {
    Json list = Json::array();
    for (int32_t t : tokens) {
      const std::string p = pieces->token_to_piece(t, /*render_special=*/true);
      Json piece = p;
      if (!utf8::is_valid(p)) {
        piece = Json::array();
        for (unsigned char b : p) piece.push_back(int(b));
      }
      list.push_back(Json{{"id", t}, {"piece", std::move(piece)}});
    }
    body["tokens"] = std::move(list);
  }
  if (token_strs) {
    Json strs = Json::array();
    for (int32_t t : tokens) strs.push_back(token_strs->token_text(t));
    body["token_strs"] = std::move(strs);
  }
  return wire_json(body);
}

std::string detokenize_body(const std::string& text) {
  return wire_json(Json{{"prompt", text}});
}

}  // namespace rf::server
