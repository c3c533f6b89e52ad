// A fixed pool of worker threads with a blocking parallel_for. One pool is
// created by whoever owns the compute (the CPU backend) and passed around;
// there is no global pool.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rf {

class ThreadPool {
 public:
  // n_threads == 0: one per hardware thread.
  explicit ThreadPool(size_t n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Runs fn(begin, end) over [0, n) split into about size() chunks of at
  // least `grain` items; the caller's thread takes part. Blocks until done.
  // Not re-entrant: fn must not call parallel_for on the same pool. The first
  // exception thrown by fn is rethrown here once every chunk has finished.
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn);

 private:
  void worker_loop(size_t index);
  void run_chunk(const std::function<void(size_t, size_t)>& fn, size_t begin, size_t end);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0;
  size_t job_chunk_ = 0;
  size_t next_chunk_ = 0;
  size_t n_chunks_ = 0;
  size_t pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;  // guarded by error_mu_ while a job runs
  std::mutex error_mu_;
  std::mutex call_mu_;  // serializes parallel_for callers
};

}  // namespace rf
