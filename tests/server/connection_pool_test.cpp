// ConnectionPool (src/server/connection_pool.h): tasks that block (open
// streams) never keep new tasks waiting below max_threads; idle threads
// above the minimum go away; max_threads caps and queued tasks still run;
// shutdown joins everything.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "server/connection_pool.h"

namespace rf::server {
namespace {

using namespace std::chrono_literals;

// Tasks block until release(); counts how many run at once.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int running = 0, peak = 0, done = 0;

  std::function<void()> task() {
    return [this] {
      std::unique_lock<std::mutex> lock(mu);
      peak = std::max(peak, ++running);
      cv.notify_all();
      cv.wait(lock, [&] { return open; });
      --running;
      ++done;
      cv.notify_all();
    };
  }
  bool wait_running(int n, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return running >= n; });
  }
  bool wait_done(int n, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return done >= n; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(ServerConnectionPool, GrowsWithBlockedTasks) {
  ConnectionPool pool(2, 1000, 10s);
  Gate gate;
  for (int i = 0; i < 200; ++i) pool.enqueue(gate.task());
  EXPECT_TRUE(gate.wait_running(200)) << "only " << gate.peak << " tasks ran at once";
  EXPECT_GE(pool.threads(), 200u);
  EXPECT_EQ(pool.busy(), 200u);
  // One more, while all 200 are still blocked, starts too.
  std::atomic<bool> ran{false};
  pool.enqueue([&] { ran = true; });
  for (int i = 0; i < 500 && !ran; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(ran);
  gate.release();
  EXPECT_TRUE(gate.wait_done(200));
  pool.shutdown();
}

TEST(ServerConnectionPool, IdleThreadsExit) {
  ConnectionPool pool(1, 100, 50ms);
  Gate gate;
  for (int i = 0; i < 10; ++i) pool.enqueue(gate.task());
  ASSERT_TRUE(gate.wait_running(10));
  gate.release();
  ASSERT_TRUE(gate.wait_done(10));
  for (int i = 0; i < 300 && pool.threads() > 1; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(pool.threads(), 1u);
  // Still serves after shrinking.
  std::atomic<int> n{0};
  for (int i = 0; i < 5; ++i) pool.enqueue([&] { ++n; });
  for (int i = 0; i < 300 && n < 5; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(n.load(), 5);
}

TEST(ServerConnectionPool, MaxThreadsCapsAndQueues) {
  ConnectionPool pool(0, 3, 10s);
  Gate gate;
  for (int i = 0; i < 8; ++i) pool.enqueue(gate.task());
  ASSERT_TRUE(gate.wait_running(3));
  std::this_thread::sleep_for(50ms);
  EXPECT_LE(pool.threads(), 3u);
  gate.release();
  EXPECT_TRUE(gate.wait_done(8));
  EXPECT_EQ(gate.peak, 3);
}

TEST(ServerConnectionPool, ShutdownRunsQueuedTasksAndJoins) {
  std::atomic<int> n{0};
  {
    ConnectionPool pool(0, 1, 10s);
    for (int i = 0; i < 20; ++i)
      pool.enqueue([&] {
        std::this_thread::sleep_for(1ms);
        ++n;
      });
    pool.shutdown();
    EXPECT_EQ(n.load(), 20);
    EXPECT_EQ(pool.threads(), 0u);
  }
  EXPECT_EQ(n.load(), 20);
}

}  // namespace
}  // namespace rf::server
