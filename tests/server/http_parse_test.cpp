// RequestParser (src/server/http_parse.h) and the response bytes of
// http_wire.h, without sockets: requests fed whole, byte by byte and
// pipelined; every refusal with its status (400 for ambiguous framing, 413,
// 414, 417, 431, 501); chunked bodies; and the framing of responses.
#include <gtest/gtest.h>

#include <string>

#include "server/http_parse.h"
#include "server/http_wire.h"

namespace rf::server {
namespace {

using State = RequestParser::State;

// Feeds `bytes` (in pieces of `step`) through head and body; returns the parser.
struct Parsed {
  State state;
  int status = 0;
  HttpRequest request;
  size_t used = 0;
};

Parsed parse(const std::string& bytes, HttpLimits limits = {}, size_t step = SIZE_MAX) {
  RequestParser p(limits);
  std::string pending;
  size_t used = 0, fed = 0;
  while (p.state() == State::NeedMore || p.state() == State::HeadDone) {
    if (p.state() == State::HeadDone) {
      p.begin_body();
      continue;
    }
    if (fed == bytes.size() && pending.empty()) break;
    const size_t n = std::min(step, bytes.size() - fed);
    pending += bytes.substr(fed, n);
    fed += n;
    const size_t u = p.feed(pending);
    pending.erase(0, u);
    used += u;
    if (u == 0 && fed == bytes.size()) break;
  }
  Parsed out{p.state(), p.error_status(), {}, used};
  if (p.state() == State::BodyDone) out.request = p.take();
  return out;
}

TEST(ServerHttpParse, ASimpleRequestWholeAndByteByByte) {
  const std::string req =
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n"
      "{\"prompt\":\"x\"}";
  for (size_t step : {SIZE_MAX, size_t(1), size_t(7)}) {
    const Parsed p = parse(req.substr(0, req.size() - 1), {}, step);  // 13 bytes of body
    ASSERT_EQ(p.state, State::BodyDone) << step;
    EXPECT_EQ(p.request.head.method, "POST");
    EXPECT_EQ(p.request.head.path(), "/v1/completions");
    EXPECT_EQ(p.request.head.header("content-type"), "application/json");
    EXPECT_EQ(p.request.body, "{\"prompt\":\"x\"");
  }
}

TEST(ServerHttpParse, PipelinedRequestsLeaveTheNextOneUnread) {
  const std::string first = "GET /health HTTP/1.1\r\nHost: a\r\n\r\n";
  const Parsed p = parse(first + "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(p.state, State::BodyDone);
  EXPECT_EQ(p.used, first.size());
  EXPECT_EQ(p.request.head.target, "/health");
}

TEST(ServerHttpParse, TheHeadStopsBeforeTheBody) {
  RequestParser p({});
  const std::string head = "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n";
  EXPECT_EQ(p.feed(head + "hello"), head.size());
  ASSERT_EQ(p.state(), State::HeadDone);
  EXPECT_TRUE(p.head().has_body);
  EXPECT_TRUE(p.expects_continue());
  EXPECT_TRUE(p.keep_alive());
  p.begin_body();
  EXPECT_EQ(p.feed("hello"), 5u);
  EXPECT_EQ(p.state(), State::BodyDone);
  EXPECT_EQ(p.take().body, "hello");
}

TEST(ServerHttpParse, ChunkedBodies) {
  const Parsed p = parse("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: x\r\n\r\n", {}, 3);
  ASSERT_EQ(p.state, State::BodyDone);
  EXPECT_EQ(p.request.body, "abcde");
  EXPECT_TRUE(p.request.head.has_body);
}

TEST(ServerHttpParse, AmbiguousFramingIsRefused) {
  const struct {
    const char* name;
    std::string bytes;
    int status;
  } cases[] = {
      {"conflicting lengths", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
      {"repeated length", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na", 400},
      {"length list", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 1\r\n\r\na", 400},
      {"negative length", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400},
      {"signed length", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\na", 400},
      {"length and chunked", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"chunked and length", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
      {"gzip only", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\nabc", 400},
      {"chunked twice", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400},
      {"two coding fields", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"gzip, chunked", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},
      {"coding on 1.0", "POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"no colon", "GET / HTTP/1.1\r\nHost: a\r\nBroken\r\n\r\n", 400},
      {"NUL in value", std::string("GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n", 35), 400},
      {"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400},
      {"bare CR", "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", 400},
      {"bare LF", "GET / HTTP/1.1\nHost: a\n\n", 400},
      {"no Host", "GET / HTTP/1.1\r\n\r\n", 400},
      {"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
      {"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400},
      {"bad chunk size", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n", 400},
      {"unknown expectation", "POST /x HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\na", 417},
  };
  for (const auto& c : cases) {
    const Parsed p = parse(c.bytes);
    EXPECT_EQ(p.state, State::Failed) << c.name;
    EXPECT_EQ(p.status, c.status) << c.name;
  }
  // HTTP/1.0 needs no Host; obs-fold is unfolded.
  EXPECT_EQ(parse("GET / HTTP/1.0\r\n\r\n").state, State::BodyDone);
  const Parsed folded = parse("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n");
  ASSERT_EQ(folded.state, State::BodyDone);
  EXPECT_EQ(folded.request.head.header("X"), "a b");
}

TEST(ServerHttpParse, Limits) {
  HttpLimits l;
  l.max_url_bytes = 1000;
  l.max_header_bytes = 2000;
  l.max_headers = 10;
  l.max_body_bytes = 100;
  auto head_with = [](const std::string& target, int fields, size_t value_size) {
    std::string s = "GET " + target + " HTTP/1.1\r\nHost: a\r\n";
    for (int i = 0; i < fields; ++i) s += "X-" + std::to_string(i) + ": " + std::string(value_size, 'v') + "\r\n";
    return s + "\r\n";
  };
  EXPECT_EQ(parse(head_with("/" + std::string(990, 'u'), 8, 200), l).state, State::BodyDone);
  EXPECT_EQ(parse(head_with("/" + std::string(1500, 'u'), 1, 1), l).status, 414);
  EXPECT_EQ(parse(head_with("/" + std::string(100000, 'u'), 1, 1), l).status, 414);  // over the whole head's limit
  EXPECT_EQ(parse(head_with("/", 10, 1), l).status, 431);                            // 11 fields with Host
  EXPECT_EQ(parse(head_with("/", 5, 500), l).status, 431);                           // 2.5 KB of fields
  EXPECT_EQ(parse(head_with("/", 9, 100000), l).status, 431);                        // far over: refused early
  const std::string body(101, 'b');
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n" + body, l).status, 413);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", l).status, 400);
  const std::string chunked = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(parse(chunked + "50\r\n" + std::string(80, 'b') + "\r\n50\r\n" + std::string(80, 'b') + "\r\n0\r\n\r\n", l).status,
            413);
}

TEST(ServerHttpWire, ResponsesAndChunks) {
  HttpResponse r;
  r.status = 404;
  r.body = "{}";
  r.headers = {{"Retry-After", "1"}};
  EXPECT_EQ(serialize_response(r, {11, true}),
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nRetry-After: 1\r\nContent-Length: 2\r\n\r\n{}");
  EXPECT_EQ(serialize_response(r, {11, false}).find("Connection: close\r\n") != std::string::npos, true);
  EXPECT_NE(serialize_response(r, {10, true}).find("Connection: keep-alive\r\n"), std::string::npos);
  HttpResponse s;
  s.content_type = "text/event-stream";
  s.streamed = true;
  s.body = "data: x\n\n";
  EXPECT_EQ(serialize_response(s, {11, true}),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata: x\n\n\r\n");
  // HTTP/1.0 has no chunks: the body as it is, ended by closing.
  EXPECT_EQ(serialize_response(s, {10, true}),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: x\n\n");
  EXPECT_EQ(body_piece("", 11), "");
  EXPECT_EQ(body_piece(std::string(300, 'a'), 11).substr(0, 5), "12c\r\n");
  EXPECT_EQ(body_end(11), "0\r\n\r\n");
  EXPECT_EQ(body_end(10), "");
}

}  // namespace
}  // namespace rf::server
