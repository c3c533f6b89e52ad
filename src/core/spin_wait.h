// wait_spinning: a condition-variable wait that first polls the predicate
// for a short while (releasing the lock and yielding between polls) before
// it blocks. For the hand-offs between tensor-parallel rank threads, which
// come every step and usually within microseconds: a blocked thread's wake-
// up costs tens of microseconds (more in a virtual machine), on the critical
// path of every step.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace rf {

// How long a waiter polls before it blocks.
inline constexpr std::chrono::microseconds kSpinBeforeBlocking{200};

// Returns with `lock` held and pred() true (as cv.wait(lock, pred)).
template <typename Pred>
void wait_spinning(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Pred pred) {
  const auto until = std::chrono::steady_clock::now() + kSpinBeforeBlocking;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) {
      cv.wait(lock, pred);
      return;
    }
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
}

}  // namespace rf
