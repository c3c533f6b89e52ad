// ThreadPool::parallel_for: every index of [0, n) runs exactly once, call
// after call (thousands of small jobs back to back, as a decode step makes,
// and jobs after the workers have gone to sleep); the first exception comes
// back to the caller once every chunk is done; callers on several threads
// are serialized; a pool of one thread runs inline.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace rf {
namespace {

void expect_each_once(ThreadPool& pool, size_t n, size_t grain) {
  std::vector<std::atomic<int>> hits(n);
  pool.parallel_for(n, grain, [&](size_t b, size_t e) {
    ASSERT_LE(b, e);
    ASSERT_LE(e, n);
    for (size_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
  });
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i << " of " << n;
}

TEST(ThreadPool, EveryIndexOnceOverManySmallJobs) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 4000; ++rep) expect_each_once(pool, size_t(1 + rep % 37), size_t(1 + rep % 3));
  expect_each_once(pool, 100000, 7);
}

TEST(ThreadPool, JobsAfterTheWorkersSleep) {
  ThreadPool pool(2);
  for (int rep = 0; rep < 3; ++rep) {
    std::this_thread::sleep_for(ThreadPool::kSpinBeforeSleep * 10);
    expect_each_once(pool, 64, 1);
  }
}

TEST(ThreadPool, RethrowsTheFirstExceptionAfterAllChunks) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_for(16, 1,
                                 [&](size_t b, size_t) {
                                   ran.fetch_add(1);
                                   if (b == 4) throw std::runtime_error("chunk at 4");
                                 }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 8);  // 16 items, at most 4 * 2 chunks: every one ran
  expect_each_once(pool, 50, 1);  // usable afterwards
}

TEST(ThreadPool, CallersOnSeveralThreadsAreSerialized) {
  ThreadPool pool(2);
  std::atomic<int> inside{0}, worst{0};
  auto caller = [&] {
    for (int rep = 0; rep < 300; ++rep)
      pool.parallel_for(8, 1, [&](size_t, size_t) {
        const int now = inside.fetch_add(1) + 1;
        int w = worst.load();
        while (now > w && !worst.compare_exchange_weak(w, now)) {}
        inside.fetch_sub(1);
      });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_LE(worst.load(), 2);  // one job's chunks at a time, on at most 2 threads
}

TEST(ThreadPool, OneThreadRunsInline) {
  ThreadPool pool(1);
  const auto me = std::this_thread::get_id();
  pool.parallel_for(10, 1, [&](size_t, size_t) { EXPECT_EQ(std::this_thread::get_id(), me); });
  expect_each_once(pool, 10, 1);
}

}  // namespace
}  // namespace rf
