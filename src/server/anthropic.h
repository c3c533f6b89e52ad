// Anthropic's Messages API: POST /v1/messages and /v1/messages/count_tokens.
// A request — system (text or text blocks), user and assistant turns of
// text, tool_use, tool_result and thinking blocks, tools with input_schema,
// tool_choice auto / any / tool / none (disable_parallel_tool_use),
// thinking enabled (budget_tokens: the reasoning budget) or disabled,
// stop_sequences, max_tokens, temperature, top_p, top_k, stream — is checked
// with Anthropic's field names and turned into the chat request it means
// (OpenAI's message shapes, which the chat template and the rest of the
// server take), so every chat feature applies unchanged; this server's
// extensions of chat completions (grammar, logit_bias, seed, min_tokens,
// reasoning_budget, chat_template_kwargs, ...) are taken too. Images,
// documents and server tools are refused by name.
// The reply: a message of thinking (signature ""), text and tool_use blocks,
// stop_reason end_turn, max_tokens, stop_sequence (with the sequence) or
// tool_use, usage; streamed as Anthropic's events: message_start, ping,
// content_block_start / _delta (thinking_delta, text_delta,
// input_json_delta) / _stop per block, message_delta (stop_reason, usage),
// message_stop; `event: error` when generation fails; pings keep it alive.
// Errors use Anthropic's shape (api_error.h, anthropic_error_body).
#pragma once

#include <string>
#include <vector>

#include "server/protocol.h"
#include "server/reply_writer.h"

namespace rf::server {

// Throws ApiError 400 naming the field.
GenerationRequest parse_anthropic_messages(const Json& body);
// count_tokens: the same fields, max_tokens not needed; the chat request
// whose prompt is counted.
GenerationRequest parse_anthropic_count_tokens(const Json& body);

class AnthropicWriter : public ReplyWriter {
 public:
  AnthropicWriter(std::string id, std::string model) : id_(std::move(id)), model_(std::move(model)) {}
  void begin(std::string& out, size_t n_choices, const std::vector<int32_t>& prompt_tokens) override;
  void delta(std::string& out, size_t choice, const ReplyDelta& d, const std::vector<TokenLogprob>& logprobs) override;
  void tool_calls(std::string& out, size_t choice, const std::vector<ToolCall>& calls) override;
  void finish(std::string& out, size_t choice, const ChoiceResult& c) override;
  void end(std::string&, const Usage&) override {}
  void error(std::string& out, const ApiError& e) override;
  void keep_alive(std::string& out) override;
  std::string body(const std::vector<ChoiceResult>& choices, const Usage& usage) override;

 private:
  enum class Block { None, Thinking, Text };
  void open(std::string& out, Block b);
  void close(std::string& out);

  std::string id_, model_;
  Block block_ = Block::None;
  int index_ = -1;  // the open block's (or the last one's)
};

}  // namespace rf::server
