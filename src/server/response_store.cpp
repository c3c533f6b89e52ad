// ResponseStore: an LRU list with a byte count.
#include "server/response_store.h"

namespace rf::server {

void ResponseStore::drop(std::list<Item>::iterator it) {
  bytes_ -= it->first.size() + it->second.bytes();
  index_.erase(it->first);
  lru_.erase(it);
}

void ResponseStore::put(const std::string& id, Entry e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(id); it != index_.end()) drop(it->second);
  const size_t size = id.size() + e.bytes();
  if (size > capacity_) return;
  lru_.emplace_front(id, std::move(e));
  index_[id] = lru_.begin();
  bytes_ += size;
  while (bytes_ > capacity_) {
    drop(std::prev(lru_.end()));
    ++evictions_;
  }
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  drop(it->second);
  return true;
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

uint64_t ResponseStore::evictions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evictions_;
}

}  // namespace rf::server
