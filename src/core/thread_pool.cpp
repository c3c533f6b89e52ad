// ThreadPool: jobs published through atomics; workers poll, then sleep on a
// condition variable; chunks claimed by compare-and-swap on a counter tagged
// with the job's generation (see thread_pool.h).
#include "core/thread_pool.h"

#include <algorithm>

namespace rf {

ThreadPool::ThreadPool(size_t n_threads) {
  if (n_threads == 0) n_threads = std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(size_t n, size_t grain, RangeFn fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  const size_t max_chunks = (n + grain - 1) / grain;
  const size_t chunks = std::min({max_chunks, size() * 4, kMaxChunks});
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  const size_t chunk = (n + chunks - 1) / chunks;
  const uint32_t nc = uint32_t((n + chunk - 1) / chunk);
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_.store(&fn, std::memory_order_relaxed);
  job_n_.store(n, std::memory_order_relaxed);
  job_chunk_.store(chunk, std::memory_order_relaxed);
  done_.store(uint64_t(gen) << 32, std::memory_order_relaxed);
  claim_.store(uint64_t(gen) << 32 | uint64_t(nc) << 16, std::memory_order_release);
  generation_.store(gen, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    wake_.notify_all();
  }
  run_chunks(gen);
  const uint64_t all_done = (uint64_t(gen) << 32) | nc;
  for (unsigned spins = 0; done_.load(std::memory_order_acquire) != all_done; ++spins) {
    if (spins < 4096) cpu_relax();
    else std::this_thread::yield();
  }
  job_.store(nullptr, std::memory_order_relaxed);
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    err = std::exchange(error_, nullptr);
  }
  if (err) std::rethrow_exception(err);
}

void ThreadPool::run_chunks(uint32_t gen) {
  for (;;) {
    uint64_t c = claim_.load(std::memory_order_acquire);
    if (uint32_t(c >> 32) != gen) return;
    // The bound comes from the claim word itself: once a job's chunks are all
    // taken, the caller may write the next job's fields while the word still
    // reads "generation gen, all taken", and a bound read from those fields
    // would let this claim succeed on a chunk of the next job.
    const uint32_t next = uint32_t(c & 0xFFFF), nc = uint32_t((c >> 16) & 0xFFFF);
    if (next >= nc) return;
    // Read the job before the claim: a successful claim of an untaken chunk
    // proves the caller has not moved on to the next job, so these are this
    // job's fields.
    const RangeFn* fn = job_.load(std::memory_order_relaxed);
    const size_t n = job_n_.load(std::memory_order_relaxed), chunk = job_chunk_.load(std::memory_order_relaxed);
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
    const size_t begin = size_t(next) * chunk;
    try {
      (*fn)(begin, std::min(n, begin + chunk));
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    // Counted for this job only (the caller cannot have moved on: it waits
    // for this chunk).
    uint64_t d = done_.load(std::memory_order_relaxed);
    while (uint32_t(d >> 32) == gen && !done_.compare_exchange_weak(d, d + 1, std::memory_order_acq_rel)) {}
  }
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    if (gen == seen && !stop_.load(std::memory_order_relaxed)) {
      const auto until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
      for (unsigned i = 1; (gen = generation_.load(std::memory_order_acquire)) == seen; ++i) {
        if (stop_.load(std::memory_order_relaxed)) return;
        cpu_relax();
        if (i % 64 == 0 && std::chrono::steady_clock::now() >= until) {
          std::unique_lock<std::mutex> lock(mu_);
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          wake_.wait(lock, [&] {
            return stop_.load(std::memory_order_seq_cst) || generation_.load(std::memory_order_seq_cst) != seen;
          });
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
        }
      }
    }
    if (stop_.load(std::memory_order_relaxed)) return;
    seen = gen;
    run_chunks(gen);
  }
}

}  // namespace rf
