// HTTP/1.1 responses as bytes: the status line and headers of a response,
// chunked-body framing, and the interim 100 Continue. Requests are parsed
// elsewhere (http_parse.h); this is the writing half, with no I/O.
#pragma once

#include <string>
#include <string_view>

#include "server/http_handler.h"

namespace rf::server {

// "OK", "Not Found", ... ("" for a code without a phrase here).
const char* reason_phrase(int status);

// How a response is framed on the connection.
struct Framing {
  int request_version = 11;  // the request's HTTP version (10 or 11)
  bool keep_alive = true;    // the connection stays open after this response
};

// The head of `r`, and for a response that is not streamed its body too.
// Streamed responses use chunked transfer coding on HTTP/1.1; on HTTP/1.0
// the body is sent as it is and the connection closes after it.
std::string serialize_response(const HttpResponse& r, const Framing& f);

// One piece of a streamed body, framed for the request's version ("" for an
// empty piece: an empty chunk would end the body).
std::string body_piece(std::string_view data, int request_version);
// The end of a streamed body ("0\r\n\r\n" on HTTP/1.1).
std::string body_end(int request_version);

// An interim response that asks the client to go on sending (Expect:
// 100-continue); also a harmless probe of a half-closed connection.
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace rf::server
