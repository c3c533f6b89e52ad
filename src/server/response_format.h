// OpenAI response bodies: the non-streamed JSON of /v1/completions
// ("text_completion") and /v1/chat/completions ("chat.completion"; the
// thinking in message.reasoning_content, never in content; usage with
// completion_tokens_details.reasoning_tokens), and the
// server-sent events of their streamed forms ("data: {...}\n\n" chunks,
// then "data: [DONE]\n\n"); and the bodies of /tokenize and /detokenize. Chunks are built by appending to a prefix made
// once per request (id, object, created, model), so a token costs one
// string escape, not a JSON re-serialization.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "server/api_error.h"
#include "server/protocol.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace rf::server {

// The outcome of one choice (one prompt) of a request.
struct ChoiceResult {
  std::string text;
  std::vector<TokenLogprob> logprobs;  // when requested
  FinishReason finish = FinishReason::None;
  std::string error;                   // finish == Error
  int32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  std::vector<ToolCall> tool_calls;    // chat: parsed from the text (which is then the rest)
  std::string reasoning;               // chat: the thinking, apart from `text`
  int32_t reasoning_tokens = 0;        // of completion_tokens, the thinking's
  std::string stop_string;             // the stop string that ended it, if one did
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, reasoning_tokens = 0;
  void add(const ChoiceResult& c) {
    prompt_tokens += c.prompt_tokens;
    completion_tokens += c.completion_tokens;
    cached_tokens += c.cached_tokens;
    reasoning_tokens += c.reasoning_tokens;
  }
};

struct ResponseMeta {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;
  int64_t created = 0;
  std::string model;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  bool include_usage = false;  // streams: "usage": null on chunks, then a usage chunk
};

// "stop" / "length" (OpenAI's values; cancelled and failed choices never
// reach a client as a finish reason).
const char* openai_finish_reason(FinishReason r);

// /tokenize: {"count", "max_model_len", "tokens"[, "token_strs": the
// vocabulary's text of each token]} (vLLM's shape); with `pieces` (llama.cpp's
// with_pieces) the tokens are {"id", "piece"}: the token's text, or its
// bytes as a list where they are not valid UTF-8.
std::string tokenize_body(const std::vector<int32_t>& tokens, int32_t max_model_len, const Tokenizer* token_strs,
                          const Tokenizer* pieces = nullptr);
// /detokenize: {"prompt": text}.
std::string detokenize_body(const std::string& text);

class ResponseFormatter {
 public:
  ResponseFormatter(ResponseMeta meta, const Tokenizer& tok);

  // Non-streamed body.
  std::string full_response(const std::vector<ChoiceResult>& choices) const;

  // Streamed events, appended to `out`.
  void role_chunk(std::string& out, int index) const;  // chat: the assistant role, first
  // A text delta with the logprobs of the tokens that produced it.
  // `text_offset` (completions) is where this text starts in the choice's output.
  void delta_chunk(std::string& out, int index, std::string_view text, const std::vector<TokenLogprob>& logprobs,
                   size_t& text_offset) const;
  void finish_chunk(std::string& out, int index, FinishReason reason, bool tool_calls = false) const;
  // Chat: thinking text (delta.reasoning_content).
  void reasoning_chunk(std::string& out, int index, std::string_view text, const std::vector<TokenLogprob>& logprobs) const;
  // Chat: the choice's tool calls, whole (OpenAI's delta.tool_calls shape).
  void tool_calls_chunk(std::string& out, int index, const std::vector<ToolCall>& calls) const;
  void usage_chunk(std::string& out, const Usage& usage) const;
  static void error_event(std::string& out, const ApiError& e);
  static void done_event(std::string& out) { out += "data: [DONE]\n\n"; }

  const ResponseMeta& meta() const { return meta_; }

 private:
  void append_chat_logprobs(std::string& out, const std::vector<TokenLogprob>& lps) const;
  void append_completion_logprobs(std::string& out, const std::vector<TokenLogprob>& lps, size_t& text_offset) const;
  std::string piece(int32_t token) const;

  ResponseMeta meta_;
  const Tokenizer& tok_;
  std::string prefix_;  // data: {"id":..,"object":..,"created":..,"model":..,"choices":[{"index":
  std::string suffix_;  // }]  [,"usage":null]  }\n\n
};

}  // namespace rf::server
