// HttpMetrics: counting and Prometheus rendering.
#include "server/http_metrics.h"

#include <unistd.h>

#include <fstream>

namespace rf::server {
namespace {

// Resident set size from /proc/self/statm (0 where there is none).
uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * uint64_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

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

std::string HttpMetrics::prometheus_text(size_t in_flight, size_t connections, bool ready) const {
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
  metric("rocmforge_http_client_disconnects_total", "counter",
         "Generations whose client left before the end (they are cancelled).", disconnects_.load());
  metric("rocmforge_http_requests_in_flight", "gauge", "Generation requests being served.", in_flight);
  metric("rocmforge_http_connections", "gauge", "Open HTTP connections.", connections);
  metric("rocmforge_server_ready", "gauge", "1 when the model is loaded and requests are accepted.", ready ? 1 : 0);
  metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", resident_bytes());
  return out;
}

}  // namespace rf::server
