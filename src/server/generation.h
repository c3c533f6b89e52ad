// Generation: one API request in flight. Turns a parsed GenerationRequest
// into engine requests (tokenizing prompts or rendering the chat), submits
// them, and reads the handles: all at once for a JSON response, or event by
// event for an SSE stream. Whatever has not finished when the Generation is
// destroyed (an error, a client that left) is cancelled, so the engine frees
// its KV blocks within a step.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "server/model_service.h"
#include "server/protocol.h"
#include "server/response_format.h"

namespace rf::server {

// Tokenized prompts and engine requests for a parsed request. Throws
// ApiError 400 (empty prompt, token id out of range, context exceeded,
// chat template failure).
std::vector<Request> build_engine_requests(ModelService& svc, const GenerationRequest& req);

class Generation {
 public:
  using Writer = std::function<bool(std::string_view)>;

  // Builds and submits; throws ApiError (400 bad request, 503 queue full or
  // shutting down).
  Generation(ModelService& svc, const GenerationRequest& req);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Non-streamed: waits for every choice and returns the JSON body; throws
  // ApiError 500 if generation failed, 503 if it was cut by shutdown.
  std::string run_to_completion();

  // Streamed: writes SSE events as they come, ending with "data: [DONE]".
  // Returns false when a write fails (the client left): its requests are
  // cancelled at once.
  bool stream(const Writer& write);

  void cancel();

 private:
  ModelService& svc_;
  ResponseFormatter fmt_;
  std::vector<RequestHandle> handles_;
};

}  // namespace rf::server
