// RequestParser: one HTTP/1.1 request parsed from bytes as they arrive
// (Boost.Beast's parser underneath), with the limits and the strictness a
// server behind a reverse proxy needs. The head stops the parser, so the
// caller can answer from the headers (authentication, routing, 413) before
// any body byte is read; begin_body() goes on. Refused requests say which
// status they get:
//   400  malformed: bad request line or header syntax (a line without a
//        colon, control characters, obs-fold is unfolded), conflicting or
//        repeated Content-Length, Content-Length with Transfer-Encoding, a
//        Transfer-Encoding on HTTP/1.0 or not ending in chunked, a bad chunk,
//        HTTP/1.1 without exactly one Host
//   413  a body over max_body_bytes (from Content-Length, or while chunked)
//   414  a target over max_url_bytes
//   417  an Expect other than 100-continue
//   431  header fields over max_header_bytes in all, or more than max_headers
//   501  a transfer coding other than chunked
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "server/http_handler.h"

namespace rf::server {

struct HttpLimits {
  size_t max_url_bytes = 8192;
  size_t max_header_bytes = 16384;  // the header fields, the request line not counted
  size_t max_headers = 100;
  size_t max_body_bytes = size_t(8) << 20;
};

class RequestParser {
 public:
  enum class State { NeedMore, HeadDone, BodyDone, Failed };

  explicit RequestParser(const HttpLimits& limits);
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Parses from `data` and returns how many bytes it used (the rest belongs
  // to what comes next). Stops at the end of the head, and at the end of the
  // request once begin_body() was called.
  size_t feed(std::string_view data);
  // After HeadDone: parse the body from now on (BodyDone at once without one).
  void begin_body();

  State state() const { return state_; }
  bool started() const { return bytes_ > 0; }  // some of the request has arrived
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // Valid from HeadDone on.
  const HttpRequestHead& head() const { return head_; }
  bool expects_continue() const { return expect_continue_; }
  bool keep_alive() const { return keep_alive_; }
  // After BodyDone: the request (the parser is spent).
  HttpRequest take();

 private:
  struct Beast;
  void fail(int status, std::string message);
  void check_head();

  HttpLimits limits_;
  std::unique_ptr<Beast> beast_;
  State state_ = State::NeedMore;
  size_t bytes_ = 0;  // fed and used so far
  int error_status_ = 0;
  std::string error_message_;
  HttpRequestHead head_;
  bool expect_continue_ = false, keep_alive_ = false;
  bool in_body_ = false;  // begin_body() was called
};

}  // namespace rf::server
