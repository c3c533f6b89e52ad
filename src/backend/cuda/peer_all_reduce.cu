// One-shot all-reduce over peer memory (NVLink) for the small all-reduces of
// tensor-parallel decode steps: every rank copies its tensor into its own
// staging buffer, tells every peer so with a flag written into the peer's
// memory, waits for every peer's flag, then reads every rank's staging
// buffer and sums them in rank order (so every rank gets the same bits).
// One kernel, no host involvement: it is captured into the decode graphs
// like any op. See peer_all_reduce.h for the memory it works on.
//
// Ordering: a block publishes its slice with a release store of its flag
// after __syncthreads (system scope: the flag and the data cross GPUs) and
// reads peers' slices after an acquire load of their flags; the peer reads
// bypass L1 (__ldcg), which is not coherent across kernels.
// Double buffering: call e uses staging half e & 1, and writes its half
// before waiting. That is safe because every block of call e - 1 saw each
// peer's flag of call e - 1, so the peer's call e - 2 (the last reader of
// that half) had finished. This needs every call to launch the same grid
// (kPeerBlocks), so that block counters move together on every rank.
// NVIDIA only (release/acquire PTX); portable builds use NCCL/RCCL instead.
#include "backend/cuda/kernels.h"

namespace rf::gpu {

#if !defined(RF_PORTABLE)
namespace {

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <typename T>
struct Vec8 {  // 16 bytes of T
  static constexpr int n = 16 / sizeof(T);
};

template <typename T>
__device__ __forceinline__ void accumulate(float (&acc)[Vec8<T>::n], uint4 v) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < Vec8<T>::n; ++i) acc[i] += to_float(e[i]);
}

template <typename T>
__global__ void __launch_bounds__(kPeerThreads) peer_all_reduce_kernel(PeerReduceArgs a, uint4* x, int n_vec) {
  pdl_wait();
  const uint32_t epoch = a.epochs[blockIdx.x] + 1;
  const size_t half = (epoch & 1u) ? a.half_bytes : 0;
  uint4* mine = reinterpret_cast<uint4*>(static_cast<char*>(a.stage[a.rank]) + half);
  const int stride = int(gridDim.x * blockDim.x);
  const int first = int(blockIdx.x * blockDim.x + threadIdx.x);
  for (int i = first; i < n_vec; i += stride) mine[i] = x[i];
  __syncthreads();
  if (int(threadIdx.x) < a.n_ranks) {
    const int peer = int(threadIdx.x);
    store_release_sys(a.flags[peer] + blockIdx.x * kPeerMaxRanks + a.rank, epoch);
    const uint32_t* seen = a.flags[a.rank] + blockIdx.x * kPeerMaxRanks + peer;
    // Wrap-safe wait for the peer's flag to reach this epoch; a set abort
    // flag (another rank failed) ends it, leaving garbage in x.
    for (uint32_t spins = 1; int32_t(load_acquire_sys(seen) - epoch) < 0; ++spins)
      if (spins % 4096 == 0 && *a.abort) break;  // host memory: read it rarely
  }
  __syncthreads();
  pdl_trigger();
  for (int i = first; i < n_vec; i += stride) {
    float acc[Vec8<T>::n] = {};
    for (int r = 0; r < a.n_ranks; ++r)
      accumulate<T>(acc, __ldcg(reinterpret_cast<const uint4*>(static_cast<const char*>(a.stage[r]) + half) + i));
    uint4 out;
    T* o = reinterpret_cast<T*>(&out);
#pragma unroll
    for (int k = 0; k < Vec8<T>::n; ++k) o[k] = from_float<T>(acc[k]);
    x[i] = out;
  }
  if (threadIdx.x == 0) a.epochs[blockIdx.x] = epoch;
}

}  // namespace

bool peer_all_reduce_supported() { return true; }

void peer_all_reduce(const PeerReduceArgs& args, DType type, void* x, size_t bytes, const LaunchCtx& ctx) {
  RF_CHECK(bytes % 16 == 0 && bytes <= args.half_bytes, "peer all-reduce: ", bytes, " bytes do not fit");
  const int n_vec = int(bytes / 16);
  switch (type) {
    case DType::F16:
      launch(peer_all_reduce_kernel<__half>, dim3(kPeerBlocks), dim3(kPeerThreads), 0, ctx, args,
             static_cast<uint4*>(x), n_vec);
      break;
    case DType::F32:
      launch(peer_all_reduce_kernel<float>, dim3(kPeerBlocks), dim3(kPeerThreads), 0, ctx, args,
             static_cast<uint4*>(x), n_vec);
      break;
    default: fail("peer all-reduce: ", dtype_name(type), " tensors are not supported");
  }
}
#else
bool peer_all_reduce_supported() { return false; }

void peer_all_reduce(const PeerReduceArgs&, DType, void*, size_t, const LaunchCtx&) {
  fail("peer all-reduce: not in portable builds (NCCL/RCCL serve them)");
}
#endif

}  // namespace rf::gpu
