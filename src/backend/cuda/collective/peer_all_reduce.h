// PeerAllReduce: the memory and set-up of the one-shot peer-memory
// all-reduces (peer_all_reduce.cu) for the tensor-parallel ranks of one
// process: peer access between every pair of the GPUs, and per rank an
// inbox (three buffers of one kMaxBytes slot per rank, filled with the
// empty-slot sentinel) and per-block buffer counters, all allocated once
// here. NcclGroup
// uses it for the all-reduces of decode steps; larger ones go through NCCL.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/tensor.h"

namespace rf {

namespace gpu {
struct PeerReduceArgs;
}

class PeerAllReduce {
 public:
  static constexpr size_t kMaxBytes = size_t(1) << 20;

  // Null when some pair of the GPUs has no peer access, the build is a
  // portable one, or there are more ranks than the kernel takes.
  static std::unique_ptr<PeerAllReduce> create(std::span<CudaBackend* const> backends);
  ~PeerAllReduce();
  PeerAllReduce(const PeerAllReduce&) = delete;
  PeerAllReduce& operator=(const PeerAllReduce&) = delete;

  // Whether x (this size and type) goes through the peer kernel.
  bool fits(const Tensor& x) const;
  // x = the sum over ranks, queued on rank r's stream (every rank calls it).
  void run(int32_t r, Tensor& x);
  // Whether run_add_rms_norm takes these tensors.
  bool fits_add_rms_norm(const Tensor& partial, const Tensor& x, const Tensor& out) const;
  // x += the sum over ranks of partial (RMS-normed with *wy first, if
  // given); out = RMSNorm(x) * w — in one kernel (partial is left as it was).
  void run_add_rms_norm(int32_t r, Tensor& partial, Tensor& x, const Tensor* wy, const Tensor& w, float eps,
                        Tensor& out);
  // Releases every rank waiting in the kernel (another rank failed).
  void abort();

 private:
  explicit PeerAllReduce(std::span<CudaBackend* const> backends);
  std::vector<CudaBackend*> backends_;
  std::vector<gpu::PeerReduceArgs> args_;  // per rank
  std::vector<std::vector<void*>> owned_;  // per rank: its device allocations
  volatile uint32_t* abort_ = nullptr;      // pinned host memory, mapped on every GPU
};

}  // namespace rf
