// A fixed pool of worker threads with a blocking parallel_for. One pool is
// created by whoever owns the compute (the CPU backend) and passed around;
// there is no global pool.
//
// A decode step runs hundreds of small parallel_for calls, so a call costs
// no allocation and no lock on its fast path: the job is published through
// atomics, idle workers poll for the next job for kSpinBeforeSleep before
// they block on a condition variable, and the caller polls for the
// stragglers. Chunks are claimed from, and counted finished in, 64-bit
// counters that carry the job's generation, so a worker late from an
// earlier job never takes or counts a chunk of the next one. The claim word
// also carries the job's chunk count: a worker compares the next chunk with
// the count of the job its claim belongs to, never with a count the caller
// may already have written for the next job.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace rf {

// One step of a spin-wait: tells the core this thread is polling.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// A non-owning reference to a callable void(size_t, size_t): what
// parallel_for takes, so passing a lambda allocates nothing. The callable
// must outlive the call it is passed to.
class RangeFn {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(F&& f)  // NOLINT: implicit, as std::function
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, size_t b, size_t e) { (*static_cast<std::remove_reference_t<F>*>(o))(b, e); }) {}
  void operator()(size_t b, size_t e) const { call_(obj_, b, e); }

 private:
  void* obj_;
  void (*call_)(void*, size_t, size_t);
};

class ThreadPool {
 public:
  // How long an idle worker polls for the next job before it blocks.
  static constexpr std::chrono::microseconds kSpinBeforeSleep{300};
  // Chunks of one job: the count and the next chunk share a 32-bit half of
  // the claim word.
  static constexpr size_t kMaxChunks = 0xFFFF;

  // n_threads == 0: one per hardware thread.
  explicit ThreadPool(size_t n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Runs fn(begin, end) over [0, n) split into up to 4 * size() chunks (at
  // most kMaxChunks) of at
  // least `grain` items; the caller's thread takes part. Blocks until done.
  // Not re-entrant: fn must not call parallel_for on the same pool. The first
  // exception thrown by fn is rethrown here once every chunk has finished.
  // Calls from several threads are serialized.
  void parallel_for(size_t n, size_t grain, RangeFn fn);

 private:
  void worker_loop();
  // Claims and runs chunks of job `gen` until none is left.
  void run_chunks(uint32_t gen);

  std::vector<std::thread> workers_;
  // The current job: fields written by the caller before generation_ is
  // published; read by workers only while their chunk claim succeeds.
  std::atomic<const RangeFn*> job_{nullptr};
  std::atomic<size_t> job_n_{0}, job_chunk_{0};
  // generation << 32 | chunk count << 16 | next chunk
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<uint64_t> done_{0};       // generation << 32 | chunks of it finished
  std::atomic<int> sleepers_{0};        // workers blocked on wake_
  std::atomic<bool> stop_{false};
  std::mutex mu_;                       // guards the sleep / wake hand-off
  std::condition_variable wake_;
  std::mutex error_mu_;
  std::exception_ptr error_;            // first exception of the current job
  std::mutex call_mu_;                  // serializes parallel_for callers
};

}  // namespace rf
