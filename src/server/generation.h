// Generation: one API request in flight. Turns a parsed GenerationRequest
// into engine requests (tokenizing prompts or rendering the chat), submits
// them, and reads the handles without ever blocking: a listener says when
// there is news, and pull_* take what is ready — the JSON response once all
// choices are done, or SSE events as they come. Whatever has not finished
// when the Generation is destroyed (an error, a client that left) is
// cancelled, so the engine frees its KV blocks within a step. Not
// thread-safe: one owner calls it (the listener may fire on any thread).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "server/model_service.h"
#include "server/protocol.h"
#include "server/response_format.h"
#include "server/tool_calls.h"

namespace rf::server {

// Tokenized prompts and engine requests for a parsed request: n per
// prompt, choice p * n + j for prompt p (OpenAI's order), choice j's seed
// the request's seed + j when one was given. Throws ApiError 400 (empty
// prompt, token id out of range, context exceeded, chat template failure,
// more than kMaxChoices choices).
std::vector<Request> build_engine_requests(ModelService& svc, const GenerationRequest& req);

// /tokenize: the ids a completion (prompt) or a chat completion (messages)
// would be given — the same code path. Throws ApiError 400.
std::vector<int32_t> tokenize_request(const ModelService& svc, const TokenizeRequest& req);
// /detokenize: the text of the ids, special tokens rendered, as valid UTF-8.
// Throws ApiError 400 for an id outside the vocabulary.
std::string detokenize_request(const ModelService& svc, const DetokenizeRequest& req);

class Generation {
 public:
  // Builds and submits; throws ApiError (400 bad request, 503 queue full or
  // shutting down).
  Generation(ModelService& svc, const GenerationRequest& req);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // `fn` runs (on the engine thread) whenever a choice has news for pull_*;
  // it must be quick. Without one, poll pull_* now and then.
  void set_listener(std::function<void()> fn);

  // Streamed: appends the SSE events that are ready. True once the stream
  // has ended ("data: [DONE]" appended); then nothing more comes.
  bool pull_events(std::string& out);
  // Streamed, when nothing was sent for a while: a keep-alive comment, or
  // the end (an error event and [DONE]) once the server is stopping.
  bool idle_events(std::string& out);

  // Non-streamed: the JSON body once every choice has finished, nullopt
  // before. Throws ApiError 500 if generation failed, 503 if it was cut by
  // shutdown.
  std::optional<std::string> pull_result();
  // Non-streamed, when nothing came for a while: throws ApiError 503 once the
  // server is stopping.
  void check_stopping() const;

  void cancel();

 private:
  // Takes every event that is ready; `sse` gets the stream's chunks.
  void drain(std::string* sse);
  void on_event(size_t i, StreamEvent& ev, std::string* sse);
  bool end_stream(std::string& out);

  // n > 1: choices p * n + 1 .. p * n + n - 1 wait for their prompt's
  // first choice to finish its prefill, then take its prompt blocks from
  // the prefix cache (only the last partial block is computed again).
  void submit_followers(size_t leader);
  RequestHandle submit(Request r);

  ModelService& svc_;
  ResponseFormatter fmt_;
  size_t n_per_prompt_ = 1;
  std::vector<std::optional<Request>> held_;  // followers not yet submitted
  std::function<void()> listener_;
  std::vector<RequestHandle> handles_;        // null while held
  // tool_choice auto: replies parsed for tool calls; streams hold back text
  // from where a call may start.
  bool parse_tools_ = false;
  ToolCallFormat tool_format_ = ToolCallFormat::Hermes;
  std::vector<std::string> tool_names_;
  bool parallel_tool_calls_ = true;
  std::vector<std::string> reply_;  // streamed choices' text so far (tool parsing)
  std::vector<size_t> sent_;        // of it, what went out as content
  ParsedReply parse_reply(size_t i, const std::string& text) const;
  void on_tool_event(size_t i, StreamEvent& ev, std::string& sse);
  std::vector<ChoiceResult> results_;   // non-streamed: text and logprobs so far
  std::vector<size_t> text_offset_;     // streamed completions: where each choice's next text starts
  std::vector<bool> done_;
  size_t live_ = 0;
  Usage usage_;
  std::optional<ApiError> failure_;
  bool started_ = false, ended_ = false;  // streams: the role chunks, [DONE]
};

}  // namespace rf::server
