// ApiRoutes: the OpenAI- and Anthropic-compatible application behind the
// HTTP transport (an HttpHandler). Routes:
//   POST /v1/completions, POST /v1/chat/completions  (JSON or SSE streams)
//   POST /v1/messages, /v1/messages/count_tokens     (Anthropic, server/anthropic.h)
//   POST /v1/responses, GET and DELETE /v1/responses/{id}  (server/responses.h)
//   POST /v1/embeddings  (with --embeddings; server/embeddings.h)
//   POST /tokenize, /detokenize  (prompt or chat -> the ids the model gets, and back)
//   GET  /v1/models, /v1/models/{id}, /health, /metrics
// The key is taken from `Authorization: Bearer KEY` or `x-api-key: KEY`.
// Errors of /v1/messages* are in Anthropic's shape, all others in OpenAI's.
// It owns the server's state — loading (503 until a ModelService is set),
// ready, draining (503 for new work) — the API key, the HTTP metrics and the
// count of generations in flight. Unknown routes, a missing or wrong key and
// a server that is not ready are answered from the head, before any body
// byte is read. Generations become DeferredResponses that the transport
// drives; each is cancelled when its client goes away. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "server/api_key.h"
#include "server/http_handler.h"
#include "server/http_metrics.h"
#include "server/model_service.h"

namespace rf::server {

class ApiRoutes : public HttpHandler {
 public:
  explicit ApiRoutes(const std::string& api_key);
  ~ApiRoutes() override;

  std::optional<HttpResponse> check_head(const HttpRequestHead& head) override;
  HandlerResult handle(HttpRequest& request) override;
  HttpResponse refuse(int status, const std::string& message) override;
  void responded(int status) override { metrics_.count_response(status); }
  bool draining() const override { return state_.load() == State::Draining; }

  // The model is ready: API requests are served from now on. `svc` must
  // outlive every request.
  void set_service(ModelService* svc);
  // New API requests (and /health) get 503 from now on.
  void begin_shutdown() { state_ = State::Draining; }
  // Waits until no generation is in flight, at most `timeout`; true if none is.
  bool wait_idle(std::chrono::milliseconds timeout);
  // Open connections, for /metrics (set by the server).
  void set_connection_count(std::function<size_t()> count) { connections_ = std::move(count); }
  const HttpMetrics& metrics() const { return metrics_; }

  // Generations in flight (shared with the responses, which may outlive a call).
  struct InFlight {
    std::mutex mu;
    std::condition_variable cv;
    size_t count = 0;
  };

 private:
  enum class State { Loading, Ready, Draining };
  enum class Route {
    None, Health, Metrics, Models, Model, Completions, ChatCompletions, Messages, CountTokens, Responses,
    GetResponse, DeleteResponse, Embeddings, Tokenize, Detokenize
  };

  static Route route_of(const HttpRequestHead& head);
  ModelService& ready_service() const;  // throws ApiError 503
  HandlerResult generation(const HttpRequest& request, Route route);
  HandlerResult stored_response(const HttpRequest& request, Route route);
  std::string metrics_text() const;

  ApiKey key_;
  std::atomic<ModelService*> service_{nullptr};
  std::atomic<State> state_{State::Loading};
  HttpMetrics metrics_;
  std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
  std::function<size_t()> connections_;
};

}  // namespace rf::server
