// HttpServer: the OpenAI-compatible HTTP front end (cpp-httplib). Routes:
//   POST /v1/completions, POST /v1/chat/completions  (JSON or SSE streams)
//   GET  /v1/models, /v1/models/{id}, /health, /metrics
// HTTP threads never touch the model: they parse, validate, submit to the
// engine through a ModelService and read the returned handles. The server
// listens before the model is loaded (health answers 503 until
// set_service), and on shutdown refuses new work with 503 while in-flight
// requests finish. Connections are served by a ConnectionPool that grows
// with demand, so open streams never block new requests. httplib stays
// inside http_server.cpp (this header does not include it).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "server/model_service.h"

namespace rf::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                        // 0: any free port (see HttpServer::port)
  std::string api_key;                    // "": no authentication
  size_t max_body_bytes = size_t(8) << 20;
  size_t max_connection_threads = 8192;   // threads serving connections, at most
};

class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving on a thread of its own. Throws rf::Error when
  // the address cannot be bound.
  void start();
  int port() const;
  // False once the listener has stopped (after stop(), or on a socket error).
  bool listening() const;

  // The model is ready: API requests are served from now on. `svc` must
  // outlive stop().
  void set_service(ModelService* svc);
  // Stop accepting work: new API requests (and /health) get 503.
  void begin_shutdown();
  // Waits until no API request is in flight, at most `timeout`; true if none is.
  bool wait_idle(std::chrono::milliseconds timeout);
  // Closes the listener and joins every connection thread.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rf::server
