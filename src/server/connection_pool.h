// ConnectionPool: the threads that serve HTTP connections. httplib's own
// pool has a fixed size and one thread stays busy for as long as a stream
// is open, so a fixed pool would make idle streaming clients block new
// requests. This pool grows a thread whenever a task would otherwise wait
// (up to max_threads, sized above what the engine can hold), and threads
// beyond min_threads exit after idle_timeout without work.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace rf::server {

class ConnectionPool {
 public:
  ConnectionPool(size_t min_threads, size_t max_threads, std::chrono::milliseconds idle_timeout);
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // Runs `task` on a free thread, starting one if none is free. At
  // max_threads the task waits for the next free thread.
  void enqueue(std::function<void()> task);
  // Runs what is queued, waits for running tasks, joins every thread.
  void shutdown();

  size_t threads() const;
  size_t busy() const;

 private:
  void worker();
  void spawn_locked();
  void reap_locked();

  const size_t min_threads_, max_threads_;
  const std::chrono::milliseconds idle_timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::unordered_map<std::thread::id, std::thread> threads_;
  std::vector<std::thread::id> exited_;  // threads that left, to join
  size_t idle_ = 0;
  size_t busy_ = 0;
  bool stopping_ = false;
};

}  // namespace rf::server
