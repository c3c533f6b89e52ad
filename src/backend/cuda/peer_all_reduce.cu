// One-shot all-reduces over peer memory (NVLink) for the small all-reduces
// of tensor-parallel decode steps, alone and fused with the residual add and
// the next RMSNorm. Every rank writes its tensor straight into each peer's
// inbox (remote stores, which need no round trip), tells each peer so with a
// flag written into the peer's memory, waits for every peer's flag, then
// sums its own tensor and its inbox in rank order (so every rank gets the
// same bits). One kernel, no host involvement: captured into the decode
// graphs like any op. peer_all_reduce.h owns the memory.
//
// Ordering: a block's stores reach the peer before its flag (release store
// at system scope after __syncthreads); a block reads its inbox after an
// acquire load of each peer's flag, bypassing L1 (__ldcg: L1 is not
// coherent with stores from other GPUs).
// Double buffering: call e uses inbox half e & 1 and writes the peers'
// halves before it waits. That is safe because every block of this rank's
// call e - 1 saw each peer's flag of call e - 1, so that peer's call e - 2
// (the last reader of the half) had finished. It needs every call of either
// kernel to launch the same grid (kPeerBlocks), so that the per-block call
// counters move together on every rank.
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

// This block's call number (1, 2, ...) and its inbox half.
struct Call {
  uint32_t epoch;
  size_t half;  // byte offset of the half in an inbox
};
__device__ __forceinline__ Call begin_call(const PeerReduceArgs& a) {
  const uint32_t epoch = a.epochs[blockIdx.x] + 1;
  return {epoch, (epoch & 1u) ? size_t(a.n_ranks) * a.slot_bytes : 0};
}
__device__ __forceinline__ void end_call(const PeerReduceArgs& a, const Call& c) {
  if (threadIdx.x == 0) a.epochs[blockIdx.x] = c.epoch;
}
// Rank `to`'s inbox slot for this rank's data, and this rank's slot for `from`'s.
__device__ __forceinline__ uint4* slot_at_peer(const PeerReduceArgs& a, const Call& c, int to) {
  return reinterpret_cast<uint4*>(static_cast<char*>(a.inbox[to]) + c.half + size_t(a.rank) * a.slot_bytes);
}
__device__ __forceinline__ const uint4* slot_from_peer(const PeerReduceArgs& a, const Call& c, int from) {
  return reinterpret_cast<const uint4*>(static_cast<const char*>(a.inbox[a.rank]) + c.half + size_t(from) * a.slot_bytes);
}

// Publishes this block's stores to every peer and waits for every peer's
// block of the same index to have done the same.
__device__ __forceinline__ void exchange(const PeerReduceArgs& a, const Call& c) {
  __syncthreads();
  const int peer = int(threadIdx.x);
  if (peer < a.n_ranks && peer != a.rank) {
    store_release_sys(a.flags[peer] + blockIdx.x * kPeerMaxRanks + a.rank, c.epoch);
    const uint32_t* seen = a.flags[a.rank] + blockIdx.x * kPeerMaxRanks + peer;
    // Wrap-safe wait; a set abort flag (another rank failed) ends it,
    // leaving garbage in the result. The host flag is read rarely.
    for (uint32_t spins = 1; int32_t(load_acquire_sys(seen) - c.epoch) < 0; ++spins)
      if (spins % 4096 == 0 && *a.abort) break;
  }
  __syncthreads();
}

template <typename T>
constexpr int kPerVec = 16 / int(sizeof(T));

template <typename T>
__device__ __forceinline__ void accumulate(float (&acc)[kPerVec<T>], uint4 v) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < kPerVec<T>; ++i) acc[i] += to_float(e[i]);
}

// The rank-order sum of 16-byte vector i: this rank's from `own`, the
// others' from the inbox.
template <typename T>
__device__ __forceinline__ uint4 sum_vector(const PeerReduceArgs& a, const Call& c, uint4 own, int i) {
  float acc[kPerVec<T>] = {};
  for (int r = 0; r < a.n_ranks; ++r) accumulate<T>(acc, r == a.rank ? own : __ldcg(slot_from_peer(a, c, r) + i));
  uint4 out;
  T* o = reinterpret_cast<T*>(&out);
#pragma unroll
  for (int k = 0; k < kPerVec<T>; ++k) o[k] = from_float<T>(acc[k]);
  return out;
}

__device__ __forceinline__ void push_vector(const PeerReduceArgs& a, const Call& c, uint4 v, int i) {
  for (int s = 0; s < a.n_ranks; ++s)
    if (s != a.rank) slot_at_peer(a, c, s)[i] = v;
}

// x = the sum over ranks, in place; blocks take vectors in turn.
template <typename T>
__global__ void __launch_bounds__(kPeerThreads) peer_all_reduce_kernel(PeerReduceArgs a, uint4* x, int n_vec) {
  pdl_wait();
  const Call c = begin_call(a);
  const int stride = int(gridDim.x * blockDim.x);
  const int first = int(blockIdx.x * blockDim.x + threadIdx.x);
  for (int i = first; i < n_vec; i += stride) push_vector(a, c, x[i], i);
  exchange(a, c);
  pdl_trigger();
  for (int i = first; i < n_vec; i += stride) x[i] = sum_vector<T>(a, c, x[i], i);
  end_call(a, c);
}

// Per row: x += the sum over ranks of partial (f16 [rows, cols], rounded to
// f16 as all_reduce_sum stores it; RMS-normed with wy first, if given), and
// out = RMSNorm(x) * w — what all_reduce_sum followed by add_rms_norm
// computes. Blocks take rows in turn; a thread holds its kFusedVecs 8-wide
// slices of a row in registers (cols <= kPeerFusedMaxCols). The norm
// weights are loaded before pdl_wait (constant), the block's first residual
// row before the exchange, so after it only the inbox is read before the
// norm. partial is left as it was.
constexpr int kFusedVecs = kPeerFusedMaxCols / (8 * kPeerThreads);

__device__ __forceinline__ void load8(float (&v)[8], const float* p) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void store8(float* p, const float (&v)[8]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

template <typename OutT, bool kNormY>
__global__ void __launch_bounds__(kPeerThreads)
    peer_all_reduce_add_rms_norm_kernel(PeerReduceArgs a, const __half* partial, float* x, const float* wy,
                                        const float* w, OutT* out, int rows, int cols, float eps) {
  __shared__ float scratch[32];
  const int row_vecs = cols / 8;
  auto vec_of = [&](int k) { return int(threadIdx.x) + k * int(blockDim.x); };  // this thread's k-th slice
  float wv[kFusedVecs][8], wyv[kFusedVecs][8];
#pragma unroll
  for (int k = 0; k < kFusedVecs; ++k)
    if (vec_of(k) < row_vecs) {
      load8(wv[k], w + vec_of(k) * 8);
      if constexpr (kNormY) load8(wyv[k], wy + vec_of(k) * 8);
    }
  pdl_wait();
  const Call c = begin_call(a);
  const uint4* p = reinterpret_cast<const uint4*>(partial);
  for (int r = int(blockIdx.x); r < rows; r += int(gridDim.x))
    for (int j = int(threadIdx.x); j < row_vecs; j += int(blockDim.x)) push_vector(a, c, p[r * row_vecs + j], r * row_vecs + j);
  float xv[kFusedVecs][8];
  auto load_x = [&](int r) {
#pragma unroll
    for (int k = 0; k < kFusedVecs; ++k)
      if (vec_of(k) < row_vecs) load8(xv[k], x + size_t(r) * cols + vec_of(k) * 8);
  };
  if (int(blockIdx.x) < rows) load_x(int(blockIdx.x));
  exchange(a, c);
  for (int r = int(blockIdx.x); r < rows; r += int(gridDim.x)) {
    if (r != int(blockIdx.x)) load_x(r);
    float sv[kFusedVecs][8];
    float ssy = 0.0f;
#pragma unroll
    for (int k = 0; k < kFusedVecs; ++k) {
      if (vec_of(k) >= row_vecs) continue;
      const int i = r * row_vecs + vec_of(k);
      const uint4 sum = sum_vector<__half>(a, c, p[i], i);
      const __half* h = reinterpret_cast<const __half*>(&sum);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        sv[k][e] = __half2float(h[e]);
        ssy += sv[k][e] * sv[k][e];
      }
    }
    if constexpr (kNormY) {
      const float scale_y = rsqrtf(block_sum(ssy, scratch) / float(cols) + eps);
      __syncthreads();  // scratch is reused below
#pragma unroll
      for (int k = 0; k < kFusedVecs; ++k)
        if (vec_of(k) < row_vecs)
#pragma unroll
          for (int e = 0; e < 8; ++e) sv[k][e] = __half2float(__float2half_rn(sv[k][e] * scale_y * wyv[k][e]));
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kFusedVecs; ++k) {
      if (vec_of(k) >= row_vecs) continue;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        xv[k][e] += sv[k][e];
        ss += xv[k][e] * xv[k][e];
      }
      store8(x + size_t(r) * cols + vec_of(k) * 8, xv[k]);
    }
    const float scale = rsqrtf(block_sum(ss, scratch) / float(cols) + eps);
#pragma unroll
    for (int k = 0; k < kFusedVecs; ++k) {
      if (vec_of(k) >= row_vecs) continue;
      OutT* o = out + size_t(r) * cols + vec_of(k) * 8;
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = from_float<OutT>(xv[k][e] * scale * wv[k][e]);
    }
    __syncthreads();  // scratch is reused by the next row
  }
  // Only now: the next kernel (a bulk-copying GEMV) floods memory with its
  // weight prefetch as soon as it starts, which would slow the loads above.
  // (A guess at why this variant measured slower with the trigger right
  // after the exchange; not yet measured this way.)
  pdl_trigger();
  end_call(a, c);
}

template <typename OutT>
void launch_fused(const PeerReduceArgs& a, const __half* partial, float* x, const float* wy, const float* w, OutT* out,
                  int rows, int cols, float eps, const LaunchCtx& ctx) {
  if (wy)
    launch(peer_all_reduce_add_rms_norm_kernel<OutT, true>, dim3(kPeerBlocks), dim3(kPeerThreads), 0, ctx, a, partial,
           x, wy, w, out, rows, cols, eps);
  else
    launch(peer_all_reduce_add_rms_norm_kernel<OutT, false>, dim3(kPeerBlocks), dim3(kPeerThreads), 0, ctx, a,
           partial, x, wy, w, out, rows, cols, eps);
}

}  // namespace

bool peer_all_reduce_supported() { return true; }

void peer_all_reduce(const PeerReduceArgs& args, DType type, void* x, size_t bytes, const LaunchCtx& ctx) {
  RF_CHECK(bytes % 16 == 0 && bytes <= args.slot_bytes, "peer all-reduce: ", bytes, " bytes do not fit");
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

void peer_all_reduce_add_rms_norm(const PeerReduceArgs& args, const void* partial, float* x, const float* wy,
                                  const float* w, void* out, DType out_type, int rows, int cols, float eps,
                                  const LaunchCtx& ctx) {
  RF_CHECK(cols % 8 == 0 && cols <= kPeerFusedMaxCols && size_t(rows) * size_t(cols) * 2 <= args.slot_bytes,
           "peer all-reduce + norm: ", rows, " x ", cols, " does not fit");
  const auto* p = static_cast<const __half*>(partial);
  if (out_type == DType::F32) launch_fused(args, p, x, wy, w, static_cast<float*>(out), rows, cols, eps, ctx);
  else launch_fused(args, p, x, wy, w, static_cast<__half*>(out), rows, cols, eps, ctx);
}
#else
bool peer_all_reduce_supported() { return false; }

void peer_all_reduce(const PeerReduceArgs&, DType, void*, size_t, const LaunchCtx&) {
  fail("peer all-reduce: not in portable builds (NCCL/RCCL serve them)");
}
void peer_all_reduce_add_rms_norm(const PeerReduceArgs&, const void*, float*, const float*, const float*, void*, DType, int,
                                  int, float, const LaunchCtx&) {
  fail("peer all-reduce: not in portable builds (NCCL/RCCL serve them)");
}
#endif

}  // namespace rf::gpu
