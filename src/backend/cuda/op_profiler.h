// OpProfiler: per-op GPU time of a backend (CudaOptions::profile,
// ROCMFORGE_PROFILE=1). Events are recorded around each op on the backend's
// stream, summed by op name whenever the stream is synchronized anyway (or
// when the events run out), and the table is printed to stderr when the
// profiler is destroyed. Graphs are off while profiling (events inside a
// captured graph would time nothing).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/gpu.h"

namespace rf::gpu {

class OpProfiler {
 public:
  explicit OpProfiler(gpuStream_t stream);
  ~OpProfiler();  // prints the table
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // Times one op from construction to destruction; does nothing without a
  // profiler.
  class Scope {
   public:
    Scope(OpProfiler* p, std::string name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpProfiler* p_;
    int idx_ = -1;
  };

  // Synchronizes the stream and adds the finished ops to the totals.
  void collect();

 private:
  static constexpr int kEvents = 1 << 14;
  gpuStream_t stream_;
  std::vector<gpuEvent_t> events_;
  int next_ = 0;
  std::vector<std::pair<std::string, int>> pending_;         // name, index of the start event
  std::map<std::string, std::pair<double, long>> totals_;  // ms, count
};

}  // namespace rf::gpu
