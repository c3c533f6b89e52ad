// LoopbackGroup: N tensor-parallel ranks in one process joined by
// in-memory collectives over host data: the whole communicator of CPU ranks
// (the CPU build's stand-in for NCCL, so CI runs the sharding logic), and
// the host-side exchanges of GPU ranks. Each rank runs on its own thread; a
// collective waits until every rank has called it. Sums are taken in rank
// order, so every rank gets bit-identical results. After abort() every
// waiting and later collective throws.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/collective.h"

namespace rf {

class LoopbackGroup {
 public:
  explicit LoopbackGroup(int32_t size);
  int32_t size() const { return size_; }
  // Rank r's communicator (owned by the group).
  Communicator& rank(int32_t r) { return *comms_[size_t(r)]; }

 private:
  friend class LoopbackComm;
  // Waits until every rank has arrived; throws when the group was aborted.
  void barrier();
  void abort();

  int32_t size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int32_t arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::vector<const void*> posted_;  // [size]: each rank's buffer in the current collective
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace rf
