// The peer-memory all-reduce's set-up and calls (see peer_all_reduce.h).
#include "backend/cuda/collective/peer_all_reduce.h"

#include "backend/cuda/collective/collective.cuh"
#include "backend/cuda/gpu.h"
#include "core/error.h"
#include "core/log.h"

namespace rf {

namespace {

// Whether device a can read and write device b's memory; enables it if so.
bool enable_peer(int a, int b) {
  int ok = 0;
  RF_GPU_CHECK(gpuDeviceCanAccessPeer(&ok, a, b));
  if (!ok) return false;
  RF_GPU_CHECK(gpuSetDevice(a));
  const gpuError_t err = gpuDeviceEnablePeerAccess(b, 0);
  if (err == gpuErrorPeerAccessAlreadyEnabled) {
    (void)gpuGetLastError();  // NCCL may have enabled it: not an error
    return true;
  }
  RF_GPU_CHECK(err);
  return true;
}

}  // namespace

std::unique_ptr<PeerAllReduce> PeerAllReduce::create(std::span<CudaBackend* const> backends) {
  if (!gpu::peer_all_reduce_supported() || backends.size() < 2 || backends.size() > size_t(gpu::kPeerMaxRanks))
    return nullptr;
  for (CudaBackend* a : backends)
    for (CudaBackend* b : backends)
      if (a != b && !enable_peer(a->device_index(), b->device_index())) {
        log_info("tensor parallel: GPU ", a->device_index(), " cannot reach GPU ", b->device_index(),
                 "'s memory: every all-reduce goes through NCCL");
        return nullptr;
      }
  return std::unique_ptr<PeerAllReduce>(new PeerAllReduce(backends));
}

PeerAllReduce::PeerAllReduce(std::span<CudaBackend* const> backends)
    : backends_(backends.begin(), backends.end()), args_(backends.size()), owned_(backends.size()) {
  void* host = nullptr;
  RF_GPU_CHECK(gpuHostAlloc(&host, sizeof(uint32_t), gpuHostAllocMapped | gpuHostAllocPortable));
  abort_ = static_cast<volatile uint32_t*>(host);
  *abort_ = 0;
  const size_t counter_bytes = size_t(gpu::kPeerBlocks) * sizeof(uint32_t);
  const std::vector<uint32_t> zeros(gpu::kPeerBlocks, 0);
  for (size_t r = 0; r < backends_.size(); ++r) {
    CudaBackend& b = *backends_[r];
    auto take = [&](size_t bytes, const char* what) {
      void* p = b.alloc(bytes, what);
      owned_[r].push_back(p);
      return p;
    };
    const size_t inbox_bytes = 3 * backends_.size() * kMaxBytes;
    void* inbox = take(inbox_bytes, "peer all-reduce inbox");
    const std::vector<uint32_t> empty(inbox_bytes / 4, gpu::kPeerInboxSentinel);
    b.copy_to_device(inbox, empty.data(), inbox_bytes);
    auto* buffers = static_cast<uint32_t*>(take(counter_bytes, "peer all-reduce counters"));
    b.copy_to_device(buffers, zeros.data(), counter_bytes);
    for (gpu::PeerReduceArgs& a : args_) a.inbox[r] = inbox;  // every rank's view of rank r
    args_[r].buffers = buffers;
    args_[r].abort = abort_;
    args_[r].slot_bytes = kMaxBytes;
    args_[r].rank = int(r);
    args_[r].n_ranks = int(backends_.size());
  }
  log_info("tensor parallel: all-reduces of up to ", kMaxBytes >> 10, " KB through peer memory");
}

PeerAllReduce::~PeerAllReduce() {
  for (size_t r = 0; r < backends_.size(); ++r)
    for (void* p : owned_[r]) backends_[r]->free(p);
  if (abort_) (void)gpuFreeHost(const_cast<uint32_t*>(abort_));
}

bool PeerAllReduce::fits(const Tensor& x) const {
  const size_t bytes = x.bytes();
  return (x.type == DType::F16 || x.type == DType::F32) && bytes % 16 == 0 && bytes <= kMaxBytes;
}

void PeerAllReduce::run(int32_t r, Tensor& x) {
  const CudaBackend& b = *backends_[size_t(r)];
  gpu::peer_all_reduce(args_[size_t(r)], x.type, x.data, x.bytes(), b.ctx());
}

bool PeerAllReduce::fits_add_rms_norm(const Tensor& partial, const Tensor& x, const Tensor& out) const {
  return partial.type == DType::F16 && x.type == DType::F32 && partial.cols() == x.cols() &&
         partial.rows() == x.rows() && out.cols() == x.cols() && out.rows() == x.rows() && x.cols() % 8 == 0 &&
         x.cols() <= gpu::kPeerFusedMaxCols &&
         (out.type == DType::F16 || out.type == DType::F32) && partial.bytes() <= kMaxBytes;
}

void PeerAllReduce::run_add_rms_norm(int32_t r, Tensor& partial, Tensor& x, const Tensor* wy, const Tensor& w,
                                     float eps, Tensor& out) {
  const CudaBackend& b = *backends_[size_t(r)];
  gpu::peer_all_reduce_add_rms_norm(args_[size_t(r)], partial.data, x.ptr<float>(), wy ? wy->ptr<float>() : nullptr,
                                    w.ptr<float>(), out.data, out.type, int(x.rows()), int(x.cols()), eps, b.ctx());
}

void PeerAllReduce::abort() { *abort_ = 1; }

}  // namespace rf
