// HTTP/1.1 response serialization and the request-head helpers of
// http_handler.h.
#include "server/http_wire.h"

#include <cstdio>

namespace rf::server {
namespace {

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = char(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = char(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace

std::string_view find_header(const HeaderList& headers, std::string_view name) {
  for (const auto& [k, v] : headers)
    if (iequal(k, name)) return v;
  return {};
}

std::string_view HttpRequestHead::path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "";
  }
}

std::string serialize_response(const HttpResponse& r, const Framing& f) {
  std::string out;
  out.reserve(160 + r.body.size());
  out += "HTTP/1.1 ";
  out += std::to_string(r.status);
  out += ' ';
  out += reason_phrase(r.status);
  out += "\r\nContent-Type: ";
  out += r.content_type;
  out += "\r\n";
  for (const auto& [k, v] : r.headers) {
    out += k;
    out += ": ";
    out += v;
    out += "\r\n";
  }
  if (!r.streamed) {
    out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  } else if (f.request_version >= 11) {
    out += "Transfer-Encoding: chunked\r\n";
  }
  const bool keep = f.keep_alive && !(r.streamed && f.request_version < 11);
  if (!keep) out += "Connection: close\r\n";
  else if (f.request_version < 11) out += "Connection: keep-alive\r\n";
  out += "\r\n";
  if (r.streamed) out += body_piece(r.body, f.request_version);
  else out += r.body;
  return out;
}

std::string body_piece(std::string_view data, int request_version) {
  if (data.empty()) return {};
  if (request_version < 11) return std::string(data);
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out;
  out.reserve(size_t(n) + data.size() + 2);
  out.append(size, size_t(n));
  out += data;
  out += "\r\n";
  return out;
}

std::string body_end(int request_version) { return request_version < 11 ? std::string() : std::string("0\r\n\r\n"); }

}  // namespace rf::server
