// Generation: one API request in flight. Turns a parsed GenerationRequest
// into engine requests (server/request_builder.h), submits them, and reads
// the handles without ever blocking: a listener says when there is news, and
// pull_* take what is ready — the response body once all choices are done,
// or stream events as they come — in the shape of the API the request came
// in (a ReplyWriter). Chat replies are parsed as they stream
// (server/reply_parser.h): thinking apart from content, tool calls when the
// request parses them. Whatever has not finished when the Generation is
// destroyed (an error, a client that left) is cancelled, so the engine frees
// its KV blocks within a step. Not thread-safe: one owner calls it (the
// listener may fire on any thread).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "server/model_service.h"
#include "server/pending_work.h"
#include "server/protocol.h"
#include "server/reply_parser.h"
#include "server/reply_writer.h"
#include "server/request_builder.h"

namespace rf::server {

// The OpenAI writer for a completions or chat completions request (a fresh id).
std::unique_ptr<ReplyWriter> openai_writer(ModelService& svc, const GenerationRequest& req);

class Generation : public PendingWork {
 public:
  // Builds and submits; throws ApiError (400 bad request, 503 queue full or
  // shutting down). Without a writer: OpenAI's shape.
  Generation(ModelService& svc, const GenerationRequest& req, std::unique_ptr<ReplyWriter> writer = nullptr);
  ~Generation() override;
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // `fn` runs (on the engine thread) whenever a choice has news for pull_*;
  // it must be quick. Without one, poll pull_* now and then.
  void set_listener(std::function<void()> fn) override;

  // Streamed: appends the events that are ready. True once the stream has
  // ended (its last event appended); then nothing more comes.
  bool pull_events(std::string& out) override;
  // Streamed, when nothing was sent for a while: a keep-alive, or the end
  // (an error event) once the server is stopping.
  bool idle_events(std::string& out) override;

  // Non-streamed: the JSON body once every choice has finished, nullopt
  // before. Throws ApiError 500 if generation failed, 503 if it was cut by
  // shutdown.
  std::optional<std::string> pull_result() override;
  // Non-streamed, when nothing came for a while: throws ApiError 503 once the
  // server is stopping.
  void check_stopping() const override;

  void cancel();

 private:
  // Takes every event that is ready; `sse` gets the stream's events.
  void drain(std::string* sse);
  void on_event(size_t i, StreamEvent& ev, std::string* sse);
  bool end_stream(std::string& out);

  // n > 1: choices p * n + 1 .. p * n + n - 1 wait for their prompt's
  // first choice to finish its prefill, then take its prompt blocks from
  // the prefix cache (only the last partial block is computed again).
  void submit_followers(size_t leader);
  RequestHandle submit(Request r);

  ModelService& svc_;
  std::unique_ptr<ReplyWriter> writer_;
  bool chat_ = false;
  bool logprobs_ = false;
  size_t n_per_prompt_ = 1;
  std::vector<int32_t> prompt_tokens_;
  std::vector<std::optional<Request>> held_;  // followers not yet submitted
  std::function<void()> listener_;
  std::vector<RequestHandle> handles_;        // null while held
  std::vector<ReplyParser> parsers_;          // chat: one per choice
  std::vector<ChoiceResult> results_;         // text and logprobs so far
  std::vector<bool> done_;
  size_t live_ = 0;
  Usage usage_;
  std::optional<ApiError> failure_;
  bool started_ = false, ended_ = false;  // streams: the first events, the last
};

}  // namespace rf::server
