// NcclGroup: tensor-parallel ranks on the GPUs of one host, joined by NCCL
// (RCCL on AMD: the same API) — one communicator per GPU, made together by
// ncclCommInitAll for this one process, which drives every GPU from a
// thread of its own. The library is loaded at run time, so the build needs
// no NCCL and one-GPU runs never load it; it is found the usual way
// (LD_LIBRARY_PATH, the loader's cache). A rank's all_reduce_sum is queued
// on its backend's stream, so it is captured into that backend's graphs
// like any op — the small ones of decode steps through the one-shot
// peer-memory kernel (peer_all_reduce.h) where the GPUs reach each other's
// memory, the rest through NCCL; the host-side exchanges of vocabulary-parallel sampling go
// through an in-process LoopbackGroup.
// Several hosts (not built): rank 0 would make an ncclUniqueId
// (ncclGetUniqueId) and send it to the other processes over TCP, each
// calling ncclCommInitRank — NCCL's own bootstrap; nothing else changes.
#pragma once

#include <memory>
#include <shared_mutex>
#include <span>
#include <vector>

#include "backend/collective.h"
#include "backend/cuda/collective/peer_all_reduce.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/loopback_comm.h"

namespace rf {

class NcclGroup {
 public:
  // One rank per backend (each on its own GPU), in order.
  explicit NcclGroup(std::span<CudaBackend* const> backends);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int32_t size() const { return int32_t(comms_.size()); }
  Communicator& rank(int32_t r) { return *comms_[size_t(r)]; }

  // Rank r's NCCL all-reduce of x, queued on `stream` (rank r's); throws
  // CollectiveAborted once the group was aborted.
  void nccl_all_reduce(int32_t r, Tensor& x, void* stream);
  // A rank failed: releases every rank from collectives it waits in — the
  // host exchanges, the peer-memory kernels (their abort flag) and NCCL's
  // (ncclCommAbort, which also frees the communicators) — for good.
  void abort();

  struct Library;  // the loaded NCCL entry points

 private:
  std::unique_ptr<Library> lib_;
  LoopbackGroup host_;
  std::vector<void*> handles_;  // ncclComm_t per rank
  std::unique_ptr<PeerAllReduce> peer_;  // null: NCCL for every all-reduce
  std::shared_mutex abort_mu_;           // NCCL calls share it; abort() takes it alone
  bool aborted_ = false;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

}  // namespace rf
