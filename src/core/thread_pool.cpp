// ThreadPool: workers sleep on a condition variable and claim chunks of the
// current job; the caller claims chunks too and waits for the stragglers.
#include "core/thread_pool.h"

#include <algorithm>
#include <utility>

namespace rf {

ThreadPool::ThreadPool(size_t n_threads) {
  if (n_threads == 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t max_chunks = (n + grain - 1) / grain;
  const size_t chunks = std::min(max_chunks, size() * 4);
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = (n + chunks - 1) / chunks;
  n_chunks_ = (n + job_chunk_ - 1) / job_chunk_;
  next_chunk_ = 0;
  pending_ = n_chunks_;
  ++generation_;
  wake_.notify_all();
  error_ = nullptr;
  while (next_chunk_ < n_chunks_) {
    const size_t c = next_chunk_++;
    lock.unlock();
    run_chunk(fn, c * job_chunk_, std::min(n, (c + 1) * job_chunk_));
    lock.lock();
    --pending_;
  }
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::run_chunk(const std::function<void(size_t, size_t)>& fn, size_t begin, size_t end) {
  try {
    fn(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker_loop(size_t) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ && next_chunk_ < n_chunks_); });
    if (stop_) return;
    seen = generation_;
    while (job_ && next_chunk_ < n_chunks_) {
      const size_t c = next_chunk_++;
      const auto* fn = job_;
      const size_t n = job_n_, chunk = job_chunk_;
      lock.unlock();
      run_chunk(*fn, c * chunk, std::min(n, (c + 1) * chunk));
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }
}

}  // namespace rf
