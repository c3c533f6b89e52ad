// The collective family's launchers (peer_all_reduce.cu): in-place sums over
// tensor-parallel ranks through peer memory, alone or fused with the
// residual add and RMSNorm. peer_all_reduce.h owns the memory and
// nccl_comm.h the communicator that chooses between them and NCCL.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/gpu.h"
#include "core/dtype.h"

namespace rf::gpu {

// In-place sums over tensor-parallel ranks through peer memory, one kernel
// per call (backend/cuda/peer_all_reduce.h owns the memory). Every call of
// every rank launches kPeerBlocks blocks. NVIDIA only: supported() is false
// in portable builds.
constexpr int kPeerMaxRanks = 8, kPeerBlocks = 32, kPeerThreads = 512;
struct PeerReduceArgs {
  void* inbox[kPeerMaxRanks];      // each rank's inbox: 3 buffers x n_ranks slots of slot_bytes
  uint32_t* buffers;               // this rank's last inbox buffer (0..2), per block
  const volatile uint32_t* abort;  // set (host memory) when another rank failed
  size_t slot_bytes;
  int rank, n_ranks;
};
// The word an empty inbox holds.
constexpr uint32_t kPeerInboxSentinel = 0x80008000u;
bool peer_all_reduce_supported();
// x (f16 or f32; bytes a multiple of 16, <= slot_bytes) = the sum over ranks.
void peer_all_reduce(const PeerReduceArgs& args, DType type, void* x, size_t bytes, const LaunchCtx& ctx);
// add_rms_norm (norm.cu) of x with the sum over ranks of partial (f16
// [rows, cols], cols % 8 == 0 and <= kPeerFusedMaxCols, <= slot_bytes): x
// (f32) += that sum (RMS-normed with wy first, if not null); out =
// RMSNorm(x) * w (f16 or f32). partial is left as it was.
constexpr int kPeerFusedMaxCols = 8 * kPeerThreads * 2;
void peer_all_reduce_add_rms_norm(const PeerReduceArgs& args, const void* partial, float* x, const float* wy,
                                  const float* w, void* out, DType out_type, int rows, int cols, float eps,
                                  const LaunchCtx& ctx);

}  // namespace rf::gpu
