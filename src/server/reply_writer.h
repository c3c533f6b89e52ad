// ReplyWriter: how a Generation's news becomes a response in one API's
// shape — OpenAI's completions and chat completions (OpenAIWriter, below,
// on ResponseFormatter), Anthropic's messages (server/anthropic.h), OpenAI's
// responses (server/responses.h). The Generation parses replies (reasoning,
// content, tool calls) and keeps the accounting; the writer only formats.
// Streamed: begin, then per choice deltas, its tool calls and its finish,
// then end (or error); keep_alive when nothing was sent for a while.
// Non-streamed: body once every choice is done.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/api_error.h"
#include "server/reply_parser.h"
#include "server/response_format.h"

namespace rf::server {

class ReplyWriter {
 public:
  virtual ~ReplyWriter() = default;
  // `prompt_tokens`: each prompt's length (before the engine reports usage).
  virtual void begin(std::string& out, size_t n_choices, const std::vector<int32_t>& prompt_tokens) = 0;
  // Text of a choice that may go out now, with the logprobs of the tokens
  // that produced it (when requested).
  virtual void delta(std::string& out, size_t choice, const ReplyDelta& d, const std::vector<TokenLogprob>& logprobs) = 0;
  virtual void tool_calls(std::string& out, size_t choice, const std::vector<ToolCall>& calls) = 0;
  virtual void finish(std::string& out, size_t choice, const ChoiceResult& c) = 0;
  virtual void end(std::string& out, const Usage& usage) = 0;
  virtual void error(std::string& out, const ApiError& e) = 0;
  virtual void keep_alive(std::string& out) = 0;
  virtual std::string body(const std::vector<ChoiceResult>& choices, const Usage& usage) = 0;
};

// OpenAI's /v1/completions and /v1/chat/completions.
class OpenAIWriter : public ReplyWriter {
 public:
  OpenAIWriter(ResponseMeta meta, const Tokenizer& tok) : fmt_(std::move(meta), tok) {}
  void begin(std::string& out, size_t n_choices, const std::vector<int32_t>& prompt_tokens) override;
  void delta(std::string& out, size_t choice, const ReplyDelta& d, const std::vector<TokenLogprob>& logprobs) override;
  void tool_calls(std::string& out, size_t choice, const std::vector<ToolCall>& calls) override;
  void finish(std::string& out, size_t choice, const ChoiceResult& c) override;
  void end(std::string& out, const Usage& usage) override;
  void error(std::string& out, const ApiError& e) override;
  void keep_alive(std::string& out) override { out += ": keep-alive\n\n"; }
  std::string body(const std::vector<ChoiceResult>& choices, const Usage& usage) override;

 private:
  ResponseFormatter fmt_;
  std::vector<size_t> text_offset_;  // completions: where each choice's next text starts
};

}  // namespace rf::server
