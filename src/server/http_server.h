// HttpServer: the OpenAI-compatible HTTP front end. A listener and a fixed
// small pool of I/O threads (Boost.Asio) serve every connection; a
// connection costs a socket and a few buffers, never a thread, so thousands
// of idle or slow clients and open streams cost little. The application —
// routes, authentication, readiness, draining — is ApiRoutes
// (api_routes.h); the HTTP/1.1 transport is Connection (http_connection.h).
// The server listens before the model is loaded (health answers 503 until
// set_service), and on shutdown refuses new work with 503 while in-flight
// requests finish; stop() ends every connection at once, whatever its
// clients do. Boost stays inside the .cpp files.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "server/http_parse.h"
#include "server/model_service.h"

namespace rf::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (see HttpServer::port)
  std::string api_key;  // "": no authentication
  HttpLimits limits;    // URL, header and body sizes
  std::chrono::milliseconds header_timeout{10000};      // a request's head, from its first byte
  std::chrono::milliseconds body_timeout{60000};        // its body, once the head is in
  std::chrono::milliseconds keep_alive_timeout{65000};  // an idle connection between requests
  std::chrono::milliseconds write_timeout{30000};       // a client that stopped reading
  size_t max_connections = 10000;  // beyond: 503 and close
  int io_threads = 4;
};

class HttpServer {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving on the I/O threads. Throws rf::Error when the
  // address cannot be bound (or the API key is too long).
  void start();
  int port() const;
  // False once the listener has stopped (after stop(), or on a socket error).
  bool listening() const;

  // The model is ready: API requests are served from now on. `svc` must
  // outlive stop().
  void set_service(ModelService* svc);
  // Stop accepting work: new API requests (and /health) get 503, and every
  // response closes its connection.
  void begin_shutdown();
  // Waits until no generation is in flight, at most `timeout`; true if none is.
  bool wait_idle(std::chrono::milliseconds timeout);
  // Closes the listener and every connection (cancelling what they run),
  // and joins the I/O threads. Returns within about a second.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rf::server
