// The contract between the HTTP transport (http_connection.h) and the
// application behind it (api_routes.h): a parsed request, a response, a
// response produced over time (a generation), and the handler that maps one
// to the other. Nothing here knows sockets or Boost; the transport owns
// framing, keep-alive, limits and deadlines, the handler owns meaning.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rf::server {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Case-insensitive lookup of a header's value ("" when absent).
std::string_view find_header(const HeaderList& headers, std::string_view name);

// A request head: what is known before the body is read.
struct HttpRequestHead {
  std::string method;
  std::string target;  // as sent: path and query
  int version = 11;    // 10 or 11
  HeaderList headers;
  bool has_body = false;  // a Content-Length above 0 or a chunked body follows

  std::string_view header(std::string_view name) const { return find_header(headers, name); }
  std::string_view path() const;  // the target without its query
};

struct HttpRequest {
  HttpRequestHead head;
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HeaderList headers;  // besides Content-Type, Content-Length/Transfer-Encoding and Connection
  std::string body;
  bool streamed = false;  // the body follows in pieces (DeferredResponse::pull); `body` is its first piece
  bool close = false;     // end the connection after this response
};

// What DeferredResponse::pull gives.
struct Pulled {
  std::optional<HttpResponse> start;  // the response's status and headers, once, first
  std::string data;                   // more of a streamed body
  bool end = false;                   // the response is complete
};

// A response that takes time (a generation). The transport calls start()
// once, then pull() whenever it was woken and can write; idle() when nothing
// was written for a while. Destroying it before it ended means the client is
// gone: whatever still runs is cancelled.
class DeferredResponse {
 public:
  virtual ~DeferredResponse() = default;
  // `wake` may be called from any thread, any number of times, and says that
  // pull() may have something new. It is cheap and never blocks.
  virtual void start(std::function<void()> wake) = 0;
  virtual void pull(Pulled& out) = 0;
  // Nothing was written for about a second: a keep-alive for streams, or the
  // end when the server gave up on the request.
  virtual void idle(Pulled& out) = 0;
};

using HandlerResult = std::variant<HttpResponse, std::unique_ptr<DeferredResponse>>;

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // The head is complete and the body is not read yet. A response here is
  // sent without reading the body (unknown route, authentication, not
  // ready), and the connection closes if a body was coming.
  virtual std::optional<HttpResponse> check_head(const HttpRequestHead& head) = 0;
  // The whole request. Never throws.
  virtual HandlerResult handle(HttpRequest& request) = 0;
  // The response to a request the transport refuses itself (malformed,
  // over a limit, too slow): `status` with an error body.
  virtual HttpResponse refuse(int status, const std::string& message) = 0;
  // Every response the transport writes, by status (for metrics).
  virtual void responded(int status) = 0;
  // True while the server drains: responses close their connections.
  virtual bool draining() const = 0;
};

}  // namespace rf::server
