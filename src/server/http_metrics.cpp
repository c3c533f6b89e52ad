// HttpMetrics: counting and Prometheus rendering.
#include "server/http_metrics.h"

namespace rf::server {

void HttpMetrics::count_response(int status) {
  size_t slot = kCodes.size();
  for (size_t i = 0; i < kCodes.size(); ++i)
    if (kCodes[i] == status) slot = i;
  responses_[slot].fetch_add(1);
}

uint64_t HttpMetrics::responses(int status) const {
  for (size_t i = 0; i < kCodes.size(); ++i)
    if (kCodes[i] == status) return responses_[i].load();
  return 0;
}

std::string HttpMetrics::prometheus_text(size_t in_flight, size_t connection_threads, bool ready) const {
  std::string out;
  out += "# HELP rocmforge_http_responses_total HTTP responses sent, by status code.\n";
  out += "# TYPE rocmforge_http_responses_total counter\n";
  for (size_t i = 0; i <= kCodes.size(); ++i) {
    const std::string code = i < kCodes.size() ? std::to_string(kCodes[i]) : "other";
    out += "rocmforge_http_responses_total{code=\"" + code + "\"} " + std::to_string(responses_[i].load()) + "\n";
  }
  auto metric = [&](const char* name, const char* type, const char* help, uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::to_string(v) + "\n";
  };
  metric("rocmforge_http_client_disconnects_total", "counter", "Streams whose client left before the end.",
         disconnects_.load());
  metric("rocmforge_http_requests_in_flight", "gauge", "API requests being served.", in_flight);
  metric("rocmforge_http_connection_threads", "gauge", "Threads serving HTTP connections.", connection_threads);
  metric("rocmforge_server_ready", "gauge", "1 when the model is loaded and requests are accepted.", ready ? 1 : 0);
  return out;
}

}  // namespace rf::server
