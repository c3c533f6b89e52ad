// HTTP-level counters for /metrics, beside the engine's: responses by
// status code, clients that left before their generation ended, requests in
// flight, open connections, and the process's resident memory. All atomics;
// rendered in the Prometheus text format.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace rf::server {

class HttpMetrics {
 public:
  void count_response(int status);
  void count_disconnect() { disconnects_.fetch_add(1); }
  uint64_t responses(int status) const;
  uint64_t disconnects() const { return disconnects_.load(); }

  std::string prometheus_text(size_t in_flight, size_t connections, bool ready) const;

 private:
  static constexpr std::array<int, 15> kCodes = {200, 400, 401, 404, 405, 408, 413, 414, 417, 429, 431, 500, 501, 503, 505};
  std::array<std::atomic<uint64_t>, kCodes.size() + 1> responses_{};  // the last slot: any other code
  std::atomic<uint64_t> disconnects_{0};
};

}  // namespace rf::server
