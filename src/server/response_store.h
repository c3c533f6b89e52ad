// ResponseStore: the responses of /v1/responses kept in memory so that a
// later request may continue from one (previous_response_id) — bounded in
// bytes, the least recently used dropped first. An entry holds the
// conversation through that response (chat messages as JSON text: the
// inputs that led to it and its output) and the response object itself.
// Capacity 0 keeps nothing (the server is stateless). Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace rf::server {

class ResponseStore {
 public:
  struct Entry {
    std::string conversation;  // JSON array of chat messages
    std::string response;      // JSON object
    size_t bytes() const { return conversation.size() + response.size(); }
  };

  explicit ResponseStore(size_t capacity_bytes) : capacity_(capacity_bytes) {}

  bool enabled() const { return capacity_ > 0; }
  size_t capacity() const { return capacity_; }
  // Keeps `e` under `id` (replacing one already there), then drops the least
  // recently used entries until the rest fit. An entry larger than the
  // whole capacity is not kept.
  void put(const std::string& id, Entry e);
  // The entry (now the most recently used), or nullopt: never stored, or dropped.
  std::optional<Entry> get(const std::string& id);
  bool erase(const std::string& id);

  size_t bytes() const;
  size_t size() const;
  uint64_t evictions() const;

 private:
  using Item = std::pair<std::string, Entry>;
  void drop(std::list<Item>::iterator it);  // under mu_

  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Item> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Item>::iterator> index_;
  size_t bytes_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace rf::server
