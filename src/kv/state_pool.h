// StatePool: the bookkeeping of a hybrid model's recurrent-state rows (no
// device memory here; model/kv_cache holds the rows, kv/memory_plan sizes
// them). Rows [0, n_slots) are sequence slots: a running sequence holds one
// for its whole life on the device (released when it is preempted or ends).
// Rows [n_slots, n_slots + n_checkpoints) hold prefix checkpoints: the state
// after the first k * block_size tokens of some prefix, keyed like the KV
// block that ends there (BlockPool::group_key of a full-attention group),
// so that a later sequence with that prefix restores the state instead of
// recomputing it. A checkpoint row is reserved when a step will write it,
// committed under its key once the step ran (or cancelled), and evicted
// least recently used first when a new one needs its row, or dropped with
// its KV block when the BlockPool evicts that.
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace rf {

class StatePool {
 public:
  StatePool(int32_t n_slots, int32_t n_checkpoints);

  int32_t n_slots() const { return n_slots_; }
  int32_t n_checkpoint_rows() const { return int32_t(row_state_.size()) - n_slots_; }
  int32_t n_rows() const { return int32_t(row_state_.size()); }

  // --- sequence slots ---
  int32_t num_free_slots() const { return int32_t(free_slots_.size()); }
  bool has_free_slot() const { return !free_slots_.empty(); }
  int32_t acquire_slot();  // throws when none is free
  void release_slot(int32_t row);

  // --- prefix checkpoints ---
  // The committed checkpoint under `key`; nullopt when none.
  std::optional<int32_t> find(uint64_t key) const;
  // Marks a committed checkpoint most recently used.
  void touch(int32_t row);
  // A row for a checkpoint a step is about to write: a free one, else the
  // least recently used committed one (its checkpoint evicted); -1 when
  // every checkpoint row is reserved (or there are none).
  int32_t reserve();
  // The reserved row now holds the checkpoint `key` (if another row holds
  // that key already, this row goes back to the free rows).
  void commit(int32_t row, uint64_t key);
  void cancel(int32_t row);  // a reserved row that was not written
  void drop(uint64_t key);   // forgets key's checkpoint (its KV block is gone)
  void clear();              // forgets every committed checkpoint

  int32_t num_checkpoints() const { return int32_t(by_key_.size()); }  // committed
  int32_t num_reserved() const { return reserved_; }
  uint64_t num_evictions() const { return evictions_; }  // checkpoints evicted for a new one's row

 private:
  enum class Row : uint8_t { Free, Held, Reserved, Committed };
  void check_checkpoint_row(int32_t row, Row want, const char* what) const;
  void free_row(int32_t row);

  int32_t n_slots_;
  std::vector<Row> row_state_;       // [n_rows]
  std::vector<uint64_t> row_key_;    // [n_rows]: committed rows' keys
  std::vector<int32_t> free_slots_;  // stack
  std::vector<int32_t> free_rows_;   // checkpoint rows, stack
  std::list<int32_t> lru_;           // committed checkpoint rows: front is least recently used
  std::vector<std::list<int32_t>::iterator> lru_pos_;
  std::unordered_map<uint64_t, int32_t> by_key_;
  int32_t reserved_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace rf
