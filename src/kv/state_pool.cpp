// StatePool implementation.
#include "kv/state_pool.h"

#include <algorithm>

#include "core/error.h"

namespace rf {

StatePool::StatePool(int32_t n_slots, int32_t n_checkpoints)
    : n_slots_(n_slots),
      row_state_(size_t(n_slots) + size_t(std::max(n_checkpoints, 0)), Row::Free),
      row_key_(row_state_.size(), 0),
      lru_pos_(row_state_.size()) {
  RF_CHECK(n_slots > 0 && n_checkpoints >= 0, "state pool: ", n_slots, " slots and ", n_checkpoints, " checkpoints");
  for (int32_t r = n_slots - 1; r >= 0; --r) free_slots_.push_back(r);
  for (int32_t r = n_rows() - 1; r >= n_slots; --r) free_rows_.push_back(r);
}

int32_t StatePool::acquire_slot() {
  RF_CHECK(!free_slots_.empty(), "state pool: no free sequence slot");
  const int32_t r = free_slots_.back();
  free_slots_.pop_back();
  row_state_[size_t(r)] = Row::Held;
  return r;
}

void StatePool::release_slot(int32_t r) {
  RF_CHECK(r >= 0 && r < n_slots_ && row_state_[size_t(r)] == Row::Held, "state pool: release of slot ", r,
           " that is not held");
  row_state_[size_t(r)] = Row::Free;
  free_slots_.push_back(r);
}

std::optional<int32_t> StatePool::find(uint64_t key) const {
  const auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

void StatePool::check_checkpoint_row(int32_t r, Row want, const char* what) const {
  RF_CHECK(r >= n_slots_ && r < n_rows() && row_state_[size_t(r)] == want, "state pool: ", what, " of row ", r,
           " in the wrong state");
}

void StatePool::touch(int32_t r) {
  check_checkpoint_row(r, Row::Committed, "touch");
  lru_.splice(lru_.end(), lru_, lru_pos_[size_t(r)]);
}

int32_t StatePool::reserve() {
  int32_t r = -1;
  if (!free_rows_.empty()) {
    r = free_rows_.back();
    free_rows_.pop_back();
  } else if (!lru_.empty()) {
    r = lru_.front();
    lru_.pop_front();
    by_key_.erase(row_key_[size_t(r)]);
    row_key_[size_t(r)] = 0;
    ++evictions_;
  } else {
    return -1;
  }
  row_state_[size_t(r)] = Row::Reserved;
  ++reserved_;
  return r;
}

void StatePool::free_row(int32_t r) {
  row_state_[size_t(r)] = Row::Free;
  row_key_[size_t(r)] = 0;
  free_rows_.push_back(r);
}

void StatePool::commit(int32_t r, uint64_t key) {
  check_checkpoint_row(r, Row::Reserved, "commit");
  --reserved_;
  if (by_key_.count(key)) {  // the same prefix was saved meanwhile: keep the older copy
    free_row(r);
    return;
  }
  row_state_[size_t(r)] = Row::Committed;
  row_key_[size_t(r)] = key;
  by_key_[key] = r;
  lru_pos_[size_t(r)] = lru_.insert(lru_.end(), r);
}

void StatePool::cancel(int32_t r) {
  check_checkpoint_row(r, Row::Reserved, "cancel");
  --reserved_;
  free_row(r);
}

void StatePool::drop(uint64_t key) {
  const auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  const int32_t r = it->second;
  by_key_.erase(it);
  lru_.erase(lru_pos_[size_t(r)]);
  free_row(r);
}

void StatePool::clear() {
  while (!lru_.empty()) drop(row_key_[size_t(lru_.front())]);
}

}  // namespace rf
