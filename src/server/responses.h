// OpenAI's Responses API: POST /v1/responses (and GET / DELETE
// /v1/responses/{id} for stored ones). A request — `input` as text or items
// (messages of input_text / output_text parts; function_call and
// function_call_output items; reasoning items with reasoning_text), 
// `instructions`, function tools, tool_choice, parallel_tool_calls,
// text.format (text, json_object, json_schema), reasoning.effort,
// max_output_tokens, temperature, top_p, stream — becomes the chat request it
// means, so every chat feature applies. `previous_response_id` continues the
// conversation of a stored response (server/response_store.h): the server is
// stateless unless started with a store, and an id never stored, dropped
// from the bounded store or stored with store=false is a 404
// (previous_response_not_found). Responses are stored unless `store` is false.
// The reply: a response object whose output holds a reasoning item
// (reasoning_text content), a message (output_text) and function_call
// items; status completed, or incomplete (max_output_tokens); usage with
// reasoning tokens. Streamed: response.created, response.in_progress, then
// per item response.output_item.added, its content_part.added,
// reasoning_text / output_text deltas (function_call_arguments deltas for
// calls) and their .done events, content_part.done, output_item.done, and
// response.completed (or response.incomplete; response.failed on an
// error), each with a sequence_number.
#pragma once

#include <string>
#include <vector>

#include "server/protocol.h"
#include "server/reply_writer.h"
#include "server/response_store.h"

namespace rf::server {

struct ResponsesRequest {
  GenerationRequest chat;
  Json conversation;      // the chat messages before the reply, instructions aside (what a later request continues)
  Json echo;              // request fields the response object repeats
  bool store = true;
};

// Throws ApiError 400 naming the field, 404 for a previous_response_id the
// store does not have.
ResponsesRequest parse_responses_request(const Json& body, ResponseStore& store);

class ResponsesWriter : public ReplyWriter {
 public:
  // `store` gets the response when the request asked for it (null: not kept).
  ResponsesWriter(std::string id, std::string model, const ResponsesRequest& req, ResponseStore* store);
  void begin(std::string& out, size_t n_choices, const std::vector<int32_t>& prompt_tokens) override;
  void delta(std::string& out, size_t choice, const ReplyDelta& d, const std::vector<TokenLogprob>& logprobs) override;
  void tool_calls(std::string& out, size_t choice, const std::vector<ToolCall>& calls) override;
  void finish(std::string& out, size_t choice, const ChoiceResult& c) override;
  void end(std::string&, const Usage&) override {}
  void error(std::string& out, const ApiError& e) override;
  void keep_alive(std::string& out) override { out += ": keep-alive\n\n"; }
  std::string body(const std::vector<ChoiceResult>& choices, const Usage& usage) override;

 private:
  enum class Item { None, Reasoning, Message };
  void event(std::string& out, const char* type, Json data);
  void open(std::string& out, Item item);
  void close(std::string& out);
  // The response object: in progress (no result yet), or finished.
  Json response(const char* status, const ChoiceResult* c) const;
  Json output_of(const ChoiceResult& c);  // the items: as streamed, or (not streamed) reasoning, message, calls
  void keep(const Json& response, const ChoiceResult& c);  // into the store

  std::string id_, model_;
  Json conversation_, echo_;
  ResponseStore* store_;
  int64_t created_;
  int64_t sequence_ = 0;
  Item item_ = Item::None;
  // Streamed: the items so far, in order (the final response repeats them).
  struct Streamed {
    Item kind;
    std::string id, text;
  };
  std::vector<Streamed> items_;
  std::vector<std::string> call_ids_;  // fc_ ids of the calls, in order
  int next_id_ = 0;
  std::string item_id(const char* prefix);
};

}  // namespace rf::server
