// One-shot all-reduces over peer memory (NVLink) for the small all-reduces
// of tensor-parallel decode steps, alone and fused with the residual add and
// the next RMSNorm. Every rank writes its tensor straight into each peer's
// inbox (remote stores, which need no round trip) and sums its own tensor
// and its inbox in rank order as the peers' data arrives (so every rank gets
// the same bits). One kernel, no host involvement: captured into the decode
// graphs like any op. peer_all_reduce.h owns the memory.
//
// Arrival is seen in the data itself (a "Lamport" exchange: no flag, no
// fence, so one one-way trip over NVLink per call). An empty inbox holds a
// sentinel: -0.0 in every f16 half, so 0x80008000 words, which is also the
// f32 sentinel. Senders send -0.0 as +0.0 (and the f32 denormal 0x80008000
// as -0.0), and add the value they send, so a 16-byte vector has arrived
// once none of its elements is the sentinel; the reader puts the sentinel
// back after reading it. Volatile loads and stores: L1 does not see stores
// from other GPUs.
// Three inbox buffers in turn: a sender writes buffer b again three calls
// later; by then it has seen the peer's data of the call before, which the
// peer sent after finishing the call that read and reset b. That needs
// every call of either kernel to launch the same grid (kPeerBlocks), so
// that the per-block buffer counters move together on every rank.
// With Tuning::peer_early_trigger the next kernel launches as these
// begin (its pdl_wait still waits for them), so a GEMV after them bulk-
// copies its weights while the ranks exchange.
// NVIDIA only (the PTX); portable builds use NCCL/RCCL instead.
#include "backend/cuda/collective/collective.cuh"

namespace rf::gpu {

#if !defined(RF_PORTABLE)
namespace {

// This block's inbox buffer for this call (0, 1, 2 in turn) and its offset.
struct Call {
  uint32_t buffer;
  size_t offset;
};
__device__ __forceinline__ Call begin_call(const PeerReduceArgs& a) {
  const uint32_t prev = a.buffers[blockIdx.x];
  const uint32_t buffer = prev >= 2 ? 0 : prev + 1;
  return {buffer, buffer * size_t(a.n_ranks) * a.slot_bytes};
}
__device__ __forceinline__ void end_call(const PeerReduceArgs& a, const Call& c) {
  if (threadIdx.x == 0) a.buffers[blockIdx.x] = c.buffer;
}
// Rank `to`'s inbox slot for this rank's data, and this rank's slot for `from`'s.
__device__ __forceinline__ uint4* slot_at_peer(const PeerReduceArgs& a, const Call& c, int to) {
  return reinterpret_cast<uint4*>(static_cast<char*>(a.inbox[to]) + c.offset + size_t(a.rank) * a.slot_bytes);
}
__device__ __forceinline__ uint4* slot_from_peer(const PeerReduceArgs& a, const Call& c, int from) {
  return reinterpret_cast<uint4*>(static_cast<char*>(a.inbox[a.rank]) + c.offset + size_t(from) * a.slot_bytes);
}

__device__ __forceinline__ void store_volatile(uint4* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 load_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// Whether a word holds (part of) the sentinel.
template <typename T>
__device__ __forceinline__ bool is_sentinel(uint32_t w) {
  if constexpr (sizeof(T) == 2) return (w & 0xFFFFu) == 0x8000u || (w >> 16) == 0x8000u;
  return w == kPeerInboxSentinel;
}
template <typename T>
__device__ __forceinline__ uint32_t canonical_word(uint32_t w) {
  if constexpr (sizeof(T) == 2) {
    if ((w & 0xFFFFu) == 0x8000u) w &= 0xFFFF0000u;
    if ((w >> 16) == 0x8000u) w &= 0x0000FFFFu;
    return w;
  }
  return w == kPeerInboxSentinel ? 0x80000000u : w;
}
// This rank's vector as it sends and adds it: no element is the sentinel.
template <typename T>
__device__ __forceinline__ uint4 canonical(uint4 v) {
  return make_uint4(canonical_word<T>(v.x), canonical_word<T>(v.y), canonical_word<T>(v.z), canonical_word<T>(v.w));
}
template <typename T>
__device__ __forceinline__ bool arrived(uint4 v) {
  return !(is_sentinel<T>(v.x) || is_sentinel<T>(v.y) || is_sentinel<T>(v.z) || is_sentinel<T>(v.w));
}
// Waits for a peer's vector at p, returns it and puts the sentinel back. A
// set abort flag (another rank failed; host memory, read rarely) ends the
// wait, leaving garbage in the result.
template <typename T>
__device__ __forceinline__ uint4 take_vector(const PeerReduceArgs& a, uint4* p) {
  uint4 v = load_volatile(p);
  for (uint32_t spins = 1; !arrived<T>(v); ++spins) {
    if (spins % 4096 == 0 && *a.abort) break;
    v = load_volatile(p);
  }
  *p = make_uint4(kPeerInboxSentinel, kPeerInboxSentinel, kPeerInboxSentinel, kPeerInboxSentinel);
  return v;
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
  for (int r = 0; r < a.n_ranks; ++r) accumulate<T>(acc, r == a.rank ? own : take_vector<T>(a, slot_from_peer(a, c, r) + i));
  uint4 out;
  T* o = reinterpret_cast<T*>(&out);
#pragma unroll
  for (int k = 0; k < kPerVec<T>; ++k) o[k] = from_float<T>(acc[k]);
  return out;
}

// v (canonical) into every peer's inbox.
__device__ __forceinline__ void push_vector(const PeerReduceArgs& a, const Call& c, uint4 v, int i) {
  for (int s = 0; s < a.n_ranks; ++s)
    if (s != a.rank) store_volatile(slot_at_peer(a, c, s) + i, v);
}

// x = the sum over ranks, in place; blocks take vectors in turn.
template <typename T>
__global__ void __launch_bounds__(kPeerThreads) peer_all_reduce_kernel(PeerReduceArgs a, uint4* x, int n_vec,
                                                                       bool early_trigger) {
  if (early_trigger) pdl_trigger();
  pdl_wait();
  const Call c = begin_call(a);
  const int stride = int(gridDim.x * blockDim.x);
  const int first = int(blockIdx.x * blockDim.x + threadIdx.x);
  for (int i = first; i < n_vec; i += stride) push_vector(a, c, canonical<T>(x[i]), i);
  if (!early_trigger) pdl_trigger();
  for (int i = first; i < n_vec; i += stride) x[i] = sum_vector<T>(a, c, canonical<T>(x[i]), i);
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
                                        const float* w, OutT* out, int rows, int cols, float eps,
                                        bool early_trigger) {
  __shared__ float scratch[32];
  if (early_trigger) pdl_trigger();
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
    for (int j = int(threadIdx.x); j < row_vecs; j += int(blockDim.x))
      push_vector(a, c, canonical<__half>(p[r * row_vecs + j]), r * row_vecs + j);
  float xv[kFusedVecs][8];
  auto load_x = [&](int r) {
#pragma unroll
    for (int k = 0; k < kFusedVecs; ++k)
      if (vec_of(k) < row_vecs) load8(xv[k], x + size_t(r) * cols + vec_of(k) * 8);
  };
  if (int(blockIdx.x) < rows) load_x(int(blockIdx.x));
  for (int r = int(blockIdx.x); r < rows; r += int(gridDim.x)) {
    if (r != int(blockIdx.x)) load_x(r);
    float sv[kFusedVecs][8];
    float ssy = 0.0f;
#pragma unroll
    for (int k = 0; k < kFusedVecs; ++k) {
      if (vec_of(k) >= row_vecs) continue;
      const int i = r * row_vecs + vec_of(k);
      const uint4 sum = sum_vector<__half>(a, c, canonical<__half>(p[i]), i);
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
  // Late trigger: the next kernel (a bulk-copying GEMV) floods memory with
  // its weight prefetch as soon as it starts, which could slow the loads
  // above; early: that prefetch overlaps the whole exchange instead.
  if (!early_trigger) pdl_trigger();
  end_call(a, c);
}

template <typename OutT>
void launch_fused(const PeerReduceArgs& a, const __half* partial, float* x, const float* wy, const float* w, OutT* out,
                  int rows, int cols, float eps, const LaunchCtx& ctx) {
  if (wy)
    launch(peer_all_reduce_add_rms_norm_kernel<OutT, true>, dim3(kPeerBlocks), dim3(kPeerThreads), 0, ctx, a, partial,
           x, wy, w, out, rows, cols, eps, ctx.tuning.peer_early_trigger);
  else
    launch(peer_all_reduce_add_rms_norm_kernel<OutT, false>, dim3(kPeerBlocks), dim3(kPeerThreads), 0, ctx, a,
           partial, x, wy, w, out, rows, cols, eps, ctx.tuning.peer_early_trigger);
}

}  // namespace

bool peer_all_reduce_supported() { return true; }

void peer_all_reduce(const PeerReduceArgs& args, DType type, void* x, size_t bytes, const LaunchCtx& ctx) {
  RF_CHECK(bytes % 16 == 0 && bytes <= args.slot_bytes, "peer all-reduce: ", bytes, " bytes do not fit");
  const int n_vec = int(bytes / 16);
  switch (type) {
    case DType::F16:
      launch(peer_all_reduce_kernel<__half>, dim3(kPeerBlocks), dim3(kPeerThreads), 0, ctx, args,
             static_cast<uint4*>(x), n_vec, ctx.tuning.peer_early_trigger);
      break;
    case DType::F32:
      launch(peer_all_reduce_kernel<float>, dim3(kPeerBlocks), dim3(kPeerThreads), 0, ctx, args,
             static_cast<uint4*>(x), n_vec, ctx.tuning.peer_early_trigger);
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
