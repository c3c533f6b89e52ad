// wait_spinning returns with the predicate true and the lock held, whether
// the condition comes while it still polls or only after it has blocked
// (then the notify wakes it), and at once when it already holds.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/spin_wait.h"

namespace rf {
namespace {

void expect_wakes_after(std::chrono::microseconds delay) {
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    std::unique_lock<std::mutex> lock(mu);
    wait_spinning(lock, cv, [&] { return ready; });
    EXPECT_TRUE(ready);
    EXPECT_TRUE(lock.owns_lock());
    returned = true;
  });
  std::this_thread::sleep_for(delay);
  EXPECT_FALSE(returned.load()) << "returned before the condition held";
  {
    std::lock_guard<std::mutex> lock(mu);
    ready = true;
  }
  cv.notify_all();
  waiter.join();
  EXPECT_TRUE(returned.load());
}

TEST(SpinWait, ReturnsAtOnceWhenTheConditionHolds) {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  wait_spinning(lock, cv, [] { return true; });
  EXPECT_TRUE(lock.owns_lock());
}

TEST(SpinWait, WakesWhileItPolls) { expect_wakes_after(std::chrono::microseconds(20)); }

TEST(SpinWait, WakesAfterItBlocked) { expect_wakes_after(kSpinBeforeBlocking * 50); }

}  // namespace
}  // namespace rf
