// OpProfiler: events around ops, totals by name, the table at exit.
#include "backend/cuda/op_profiler.h"

#include <algorithm>
#include <cstdio>

namespace rf::gpu {

OpProfiler::OpProfiler(gpuStream_t stream) : stream_(stream), events_(kEvents) {
  for (auto& e : events_) RF_GPU_CHECK(gpuEventCreate(&e));
}

OpProfiler::~OpProfiler() {
  try {
    collect();
  } catch (...) {
  }
  std::vector<std::pair<std::string, std::pair<double, long>>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  double total = 0;
  for (const auto& r : rows) total += r.second.first;
  std::fprintf(stderr, "\nGPU op profile (%.1f ms in ops):\n%10s %8s %9s  %s\n", total, "ms", "count", "us/op", "op");
  for (const auto& [name, t] : rows)
    std::fprintf(stderr, "%10.2f %8ld %9.1f  %s\n", t.first, t.second, 1e3 * t.first / double(t.second), name.c_str());
  for (auto& e : events_) (void)gpuEventDestroy(e);
}

void OpProfiler::collect() {
  if (pending_.empty()) return;
  RF_GPU_CHECK(gpuStreamSynchronize(stream_));
  for (const auto& [name, i] : pending_) {
    float ms = 0;
    RF_GPU_CHECK(gpuEventElapsedTime(&ms, events_[size_t(i)], events_[size_t(i + 1)]));
    auto& t = totals_[name];
    t.first += ms;
    t.second++;
  }
  pending_.clear();
  next_ = 0;
}

OpProfiler::Scope::Scope(OpProfiler* p, std::string name) : p_(p) {
  if (!p) return;
  if (p->next_ + 2 > kEvents) p->collect();
  if (p->next_ + 2 > kEvents) return;
  idx_ = p->next_;
  p->next_ += 2;
  RF_GPU_CHECK(gpuEventRecord(p->events_[size_t(idx_)], p->stream_));
  p->pending_.emplace_back(std::move(name), idx_);
}

OpProfiler::Scope::~Scope() {
  if (idx_ >= 0) (void)gpuEventRecord(p_->events_[size_t(idx_ + 1)], p_->stream_);
}

}  // namespace rf::gpu
