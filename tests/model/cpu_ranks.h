// CPU backends for n tensor-parallel ranks (one thread each unless `make`
// says otherwise) joined by in-process collectives, the CI stand-in for
// NCCL: what the model tests run split models on.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/loopback_comm.h"

namespace rf::test {

struct CpuRanks {
  explicit CpuRanks(int32_t n, const std::function<std::unique_ptr<CpuBackend>()>& make = [] {
    return std::make_unique<CpuBackend>(1);
  }) : group(n) {
    for (int32_t r = 0; r < n; ++r) {
      owned.push_back(make());
      backends.push_back(owned.back().get());
      comms.push_back(&group.rank(r));
    }
  }
  std::vector<std::unique_ptr<CpuBackend>> owned;
  std::vector<Backend*> backends;
  std::vector<Communicator*> comms;
  LoopbackGroup group;
};

}  // namespace rf::test
