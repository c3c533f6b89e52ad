// Logging and progress output.
#include "core/log.h"

#include <unistd.h>

#include <mutex>

namespace rf {
namespace {
std::atomic<int> g_level{int(LogLevel::Info)};
std::mutex g_log_mu;
}  // namespace

LogLevel log_level() { return LogLevel(g_level.load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { g_level.store(int(level)); }

void log_line(LogLevel level, const std::string& msg) {
  static const char* tags[] = {"debug", "info", "warn", "error"};
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::fprintf(stderr, "[%s] %s\n", tags[int(level)], msg.c_str());
}

Progress::Progress(std::string label, double total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), tty_(isatty(2)),
      start_(std::chrono::steady_clock::now()), last_(start_) {}

void Progress::update(double done) {
  if (log_level() > LogLevel::Info || finished_) return;
  const int pct = total_ > 0 ? int(100.0 * done / total_) : 100;
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_ < std::chrono::milliseconds(100) && pct != 100) return;
    const int width = 30, filled = pct * width / 100;
    std::lock_guard<std::mutex> lock(g_log_mu);
    std::fprintf(stderr, "\r%s %3d%% [%.*s%*s] %.1f/%.1f %s", label_.c_str(), pct, filled,
                 "==============================", width - filled, "", done, total_, unit_.c_str());
    std::fflush(stderr);
  } else if (pct / 10 != last_pct_ / 10) {
    std::lock_guard<std::mutex> lock(g_log_mu);
    std::fprintf(stderr, "%s %d%% (%.1f/%.1f %s)\n", label_.c_str(), pct, done, total_, unit_.c_str());
  }
  last_pct_ = pct;
  last_ = now;
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (log_level() > LogLevel::Info) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::fprintf(stderr, "%s%s done: %.1f %s in %.2f s\n", tty_ ? "\r\033[K" : "", label_.c_str(), total_,
               unit_.c_str(), s);
}

Progress::~Progress() { finish(); }

}  // namespace rf
