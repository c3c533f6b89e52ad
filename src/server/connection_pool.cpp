// ConnectionPool: a thread pool that grows with demand (connection_pool.h).
#include "server/connection_pool.h"

#include "core/log.h"

namespace rf::server {

ConnectionPool::ConnectionPool(size_t min_threads, size_t max_threads, std::chrono::milliseconds idle_timeout)
    : min_threads_(min_threads), max_threads_(std::max<size_t>(max_threads, 1)), idle_timeout_(idle_timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < min_threads_ && i < max_threads_; ++i) spawn_locked();
}

ConnectionPool::~ConnectionPool() { shutdown(); }

void ConnectionPool::spawn_locked() {
  std::thread t([this] { worker(); });
  const auto id = t.get_id();
  threads_.emplace(id, std::move(t));
}

void ConnectionPool::reap_locked() {
  for (const auto& id : exited_) {
    auto it = threads_.find(id);
    if (it == threads_.end()) continue;
    it->second.join();  // it has left worker() already
    threads_.erase(it);
  }
  exited_.clear();
}

void ConnectionPool::enqueue(std::function<void()> task) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) {  // no thread will take it: run it here
      lock.unlock();
      task();
      return;
    }
    reap_locked();
    tasks_.push_back(std::move(task));
    if (tasks_.size() > idle_ && threads_.size() < max_threads_) spawn_locked();
  }
  cv_.notify_one();
}

void ConnectionPool::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    const bool woke = cv_.wait_for(lock, idle_timeout_, [&] { return stopping_ || !tasks_.empty(); });
    --idle_;
    if (!tasks_.empty()) {
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      ++busy_;
      lock.unlock();
      try {
        task();
      } catch (const std::exception& e) {  // a task's failure must not end the thread (or the process)
        log_error("connection thread: ", e.what());
      } catch (...) {
        log_error("connection thread: unknown exception");
      }
      task = nullptr;  // release captures before taking the lock again
      lock.lock();
      --busy_;
      continue;
    }
    if (stopping_) break;
    if (!woke && threads_.size() - exited_.size() > min_threads_) break;  // idle too long
  }
  if (!stopping_) exited_.push_back(std::this_thread::get_id());
}

void ConnectionPool::shutdown() {
  std::unordered_map<std::thread::id, std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  // From here on enqueue() runs tasks itself, so no thread is added.
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
    exited_.clear();
  }
  for (auto& [id, t] : threads) t.join();
}

size_t ConnectionPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size() - exited_.size();
}

size_t ConnectionPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

}  // namespace rf::server
