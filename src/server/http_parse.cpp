// RequestParser: Beast's request parser plus the checks Beast leaves to the
// server (see http_parse.h for the rules and their status codes).
#include "server/http_parse.h"

#include <boost/beast/http.hpp>

#include <algorithm>
#include <vector>

namespace rf::server {
namespace http = boost::beast::http;

namespace {

// Slack for the method, the version and the separators of the request line.
constexpr size_t kRequestLineSlack = 64;

std::string lower_trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return out;
}

}  // namespace

struct RequestParser::Beast {
  http::request_parser<http::string_body> parser;
};

RequestParser::RequestParser(const HttpLimits& limits) : limits_(limits), beast_(std::make_unique<Beast>()) {
  auto& p = beast_->parser;
  const size_t head_limit = limits_.max_url_bytes + limits_.max_header_bytes + kRequestLineSlack;
  p.header_limit(static_cast<std::uint32_t>(std::min<size_t>(head_limit, UINT32_MAX)));
  p.body_limit(static_cast<std::uint64_t>(limits_.max_body_bytes));
  p.eager(false);  // stop after the head
}

RequestParser::~RequestParser() = default;

void RequestParser::fail(int status, std::string message) {
  state_ = State::Failed;
  error_status_ = status;
  error_message_ = std::move(message);
}

size_t RequestParser::feed(std::string_view data) {
  if (state_ == State::Failed || state_ == State::BodyDone || state_ == State::HeadDone || data.empty()) return 0;
  auto& p = beast_->parser;
  size_t used = 0;
  while (used < data.size()) {
    boost::system::error_code ec;
    const size_t n = p.put(boost::asio::buffer(data.data() + used, data.size() - used), ec);
    used += n;
    bytes_ += n;
    if (ec == http::error::need_more) break;
    if (ec == http::error::header_limit) {
      // Over the head's limit: the URL's fault if the request line alone is too long.
      const std::string_view first = data.substr(0, data.find('\n'));
      if (first.size() > limits_.max_url_bytes) fail(414, "the request URL is longer than " + std::to_string(limits_.max_url_bytes) + " bytes");
      else fail(431, "the request's header fields are larger than " + std::to_string(limits_.max_header_bytes) + " bytes");
      return used;
    }
    if (ec == http::error::body_limit) {
      fail(413, "the request body is larger than the limit of " + std::to_string(limits_.max_body_bytes) + " bytes");
      return used;
    }
    if (ec) {
      fail(400, "malformed HTTP request: " + ec.message());
      return used;
    }
    if (!in_body_ && p.is_header_done()) {
      check_head();
      return used;
    }
    if (p.is_done()) {
      state_ = State::BodyDone;
      return used;
    }
    if (n == 0) break;
  }
  return used;
}

void RequestParser::begin_body() {
  if (state_ != State::HeadDone) return;
  auto& p = beast_->parser;
  p.eager(true);
  in_body_ = true;
  state_ = p.is_done() ? State::BodyDone : State::NeedMore;
}

void RequestParser::check_head() {
  auto& p = beast_->parser;
  const auto& msg = p.get();
  head_.method = std::string(msg.method_string());
  head_.target = std::string(msg.target());
  head_.version = msg.version();
  size_t count = 0, n_length = 0, n_coding = 0, n_host = 0;
  for (const auto& f : msg) {
    ++count;
    if (f.name() == http::field::content_length) ++n_length;
    if (f.name() == http::field::transfer_encoding) ++n_coding;
    if (f.name() == http::field::host) ++n_host;
  }
  if (head_.target.size() > limits_.max_url_bytes)
    return fail(414, "the request URL is longer than " + std::to_string(limits_.max_url_bytes) + " bytes");
  const size_t line = head_.method.size() + head_.target.size() + 12;  // "M T HTTP/1.1\r\n"
  if (count > limits_.max_headers)
    return fail(431, "the request has more than " + std::to_string(limits_.max_headers) + " header fields");
  if (bytes_ > line + limits_.max_header_bytes)
    return fail(431, "the request's header fields are larger than " + std::to_string(limits_.max_header_bytes) + " bytes");
  if (n_length > 1 || msg[http::field::content_length].find(',') != std::string_view::npos)
    return fail(400, "malformed HTTP request: more than one Content-Length");
  if (n_coding > 0) {
    if (n_length > 0) return fail(400, "malformed HTTP request: both Content-Length and Transfer-Encoding");
    if (head_.version < 11) return fail(400, "malformed HTTP request: Transfer-Encoding in an HTTP/1.0 request");
    // Only "chunked" is understood; it must come last and once, or the body's end is unknown.
    const std::string codings = lower_trimmed(msg[http::field::transfer_encoding]);
    std::vector<std::string> list;
    for (size_t pos = 0; pos <= codings.size();) {
      const size_t comma = std::min(codings.find(',', pos), codings.size());
      list.push_back(lower_trimmed(std::string_view(codings).substr(pos, comma - pos)));
      pos = comma + 1;
    }
    const bool chunked_last_once = n_coding == 1 && list.back() == "chunked" &&
                                   std::count(list.begin(), list.end(), "chunked") == 1;
    if (!chunked_last_once)
      return fail(400, "malformed HTTP request: the body's length is unknown (Transfer-Encoding: " + codings + ")");
    if (list.size() > 1) return fail(501, "transfer coding '" + codings + "' is not supported (only chunked)");
  }
  if (head_.version >= 11 && n_host != 1) return fail(400, "malformed HTTP request: HTTP/1.1 needs exactly one Host header");
  if (msg.count(http::field::expect) > 0) {
    if (msg.count(http::field::expect) > 1 || lower_trimmed(msg[http::field::expect]) != "100-continue")
      return fail(417, "the only expectation supported is 100-continue");
    expect_continue_ = head_.version >= 11;
  }
  const auto length = p.content_length();
  if (length && *length > limits_.max_body_bytes)
    return fail(413, "the request body is larger than the limit of " + std::to_string(limits_.max_body_bytes) + " bytes");
  head_.has_body = p.chunked() || (length && *length > 0);
  keep_alive_ = p.keep_alive();
  head_.headers.reserve(count);
  for (const auto& f : msg) head_.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  state_ = State::HeadDone;
}

HttpRequest RequestParser::take() {
  HttpRequest r;
  r.head = std::move(head_);
  r.body = std::move(beast_->parser.get().body());
  return r;
}

}  // namespace rf::server
