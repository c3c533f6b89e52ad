// Minimal leveled logging to stderr and a terminal progress bar for long work
// (model loading, quantizing, benchmarks).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>

#include "core/error.h"

namespace rf {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_line(LogLevel level, const std::string& msg);

template <typename... Args> void log_debug(Args&&... a) { if (log_level() <= LogLevel::Debug) log_line(LogLevel::Debug, str(std::forward<Args>(a)...)); }
template <typename... Args> void log_info(Args&&... a) { if (log_level() <= LogLevel::Info) log_line(LogLevel::Info, str(std::forward<Args>(a)...)); }
template <typename... Args> void log_warn(Args&&... a) { if (log_level() <= LogLevel::Warn) log_line(LogLevel::Warn, str(std::forward<Args>(a)...)); }
template <typename... Args> void log_error(Args&&... a) { if (log_level() <= LogLevel::Error) log_line(LogLevel::Error, str(std::forward<Args>(a)...)); }

// Progress: prints "label  42% [=====     ] 1.2/3.0 GB" to stderr at most a
// few times a second, and a final line on finish(). Quiet when log level > Info.
class Progress {
 public:
  Progress(std::string label, double total, std::string unit = "");
  void update(double done);
  void finish();
  ~Progress();

 private:
  std::string label_, unit_;
  double total_;
  bool finished_ = false;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_;
  int last_pct_ = -1;
};

}  // namespace rf
