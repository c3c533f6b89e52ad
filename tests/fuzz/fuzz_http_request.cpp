// libFuzzer target: RequestParser (server/http_parse.h) on arbitrary bytes,
// fed in pieces whose sizes the input chooses, with small limits. It never
// crashes, never uses more bytes than it was given, ends in a refusal with
// a 4xx/5xx status that the server sends (400, 413, 414, 417, 431, 501) or
// in a request within the limits, and reaches the same end however the
// bytes are split: refused both times, or the same request (the status of a
// refusal may differ: a head is checked as it arrives, so a syntax error and
// a size limit can be met in either order).
// Input: byte 0 seeds the split sizes; the rest is what a client sent.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/http_parse.h"

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_http_request: invariant violated: %s\n", what);
  std::abort();
}

struct Outcome {
  rf::server::RequestParser::State state;
  int status;
  std::string body;
  size_t used;
};

Outcome run(std::string_view bytes, uint32_t seed, const rf::server::HttpLimits& limits) {
  using State = rf::server::RequestParser::State;
  rf::server::RequestParser p(limits);
  std::string pending;
  size_t fed = 0, used = 0;
  for (;;) {
    if (p.state() == State::HeadDone) {
      if (p.head().target.size() > limits.max_url_bytes) violated("URL within its limit");
      if (p.head().headers.size() > limits.max_headers) violated("header count within its limit");
      p.begin_body();
      continue;
    }
    if (p.state() != State::NeedMore || fed == bytes.size()) break;
    seed = seed * 1103515245u + 12345u;
    const size_t n = std::min<size_t>(1 + (seed >> 16) % 64, bytes.size() - fed);
    pending.append(bytes.substr(fed, n));
    fed += n;
    const size_t u = p.feed(pending);
    if (u > pending.size()) violated("used more than it was given");
    pending.erase(0, u);
    used += u;
  }
  Outcome o{p.state(), p.error_status(), {}, used};
  if (o.state == State::Failed) {
    const int s = o.status;
    if (s != 400 && s != 413 && s != 414 && s != 417 && s != 431 && s != 501) violated("a known refusal status");
  }
  if (o.state == State::BodyDone) {
    o.body = p.take().body;
    if (o.body.size() > limits.max_body_bytes) violated("body within its limit");
  }
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  rf::server::HttpLimits limits;
  limits.max_url_bytes = 256;
  limits.max_header_bytes = 1024;
  limits.max_headers = 16;
  limits.max_body_bytes = 4096;
  const Outcome a = run(bytes, data[0], limits);
  const Outcome whole = run(bytes, 0xFFFFFFFFu, limits);  // other piece sizes
  using State = rf::server::RequestParser::State;
  const bool ended = a.state != State::NeedMore && whole.state != State::NeedMore;
  if (ended && (a.state != whole.state || a.body != whole.body))
    violated("the same outcome however the bytes are split");
  return 0;
}
