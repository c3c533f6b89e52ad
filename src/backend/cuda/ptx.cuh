// Inline-PTX building blocks of the NVIDIA fast paths: the m16n8k16 and
// m16n8k8 tensor-core products, transposed 8 x 8 loads from shared memory
// (ldmatrix), 16- and 4-byte asynchronous copies to shared memory
// (cp.async, sm_80+; plain copies elsewhere and with RF_PORTABLE: HIP, cuda-portable) and bulk copies
// of whole weight rows into shared memory (TMA, sm_90; NVIDIA only).
#pragma once

#include "backend/cuda/gpu.h"

namespace rf::gpu {

#if !defined(RF_PORTABLE)
// c += A (16 x 16, f16, row-major fragments a0..a3) . B (16 x 8, f16,
// column fragments b0, b1), f32 accumulation (PTX mma.m16n8k16 layouts).
__device__ __forceinline__ void mma_16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// c += A (16 x 8, f16: a0 row lane / 4, a1 row lane / 4 + 8, columns
// 2 * (lane % 4) + {0, 1}) . B (8 x 8, f16: b0 rows 2 * (lane % 4) + {0, 1},
// column lane / 4), f32 accumulation (PTX mma.m16n8k8).
__device__ __forceinline__ void mma_1688(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(b0));
}
// Four 8 x 8 f16 matrices from shared memory: lanes 8 j .. 8 j + 7 give the
// row addresses (16 bytes each, 16-byte aligned) of matrix j; r[j] of lane
// i then holds its row i / 4 at columns 2 * (i % 4) + {0, 1}.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
// Four 8 x 8 f16 matrices from shared memory, transposed: lanes 8 j .. 8 j +
// 7 give the row addresses (16 bytes each, 16-byte aligned) of matrix j;
// r[j] of lane i then holds its rows 2 * (i % 4) + {0, 1} at column i / 4.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
#endif

// 16-byte global -> shared copy.
__device__ __forceinline__ void copy16_async(void* dst, const void* src) {
#if !defined(RF_PORTABLE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
#else
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
#endif
}
// The same, zero-filling dst instead when !valid (src is then not read but
// must still be a valid address).
__device__ __forceinline__ void copy16_async_or_zero(void* dst, const void* src, bool valid) {
#if !defined(RF_PORTABLE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
#else
  *reinterpret_cast<uint4*>(dst) = valid ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
}
// 4-byte global -> shared copy (through L1: cp.async.ca).
__device__ __forceinline__ void copy4_async(void* dst, const void* src) {
#if !defined(RF_PORTABLE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
#else
  *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src);
#endif
}
__device__ __forceinline__ void copy_commit() {
#if !defined(RF_PORTABLE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most N committed groups of this thread are in flight.
template <int N>
__device__ __forceinline__ void copy_wait() {
#if !defined(RF_PORTABLE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

#if !defined(RF_PORTABLE)
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// Bulk copies (TMA, sm_90) completing on mbarriers, reusable for copies that
// refill the same shared memory (decode attention's K/V stages): mbar_init
// once (then a barrier of the threads that use it), per use one
// mbar_arrive_expect_tx with the bytes of the use's copies (before
// or after they start: the phase ends when both the arrival and the bytes
// are in), bulk_copy_async for each, and mbar_wait with the use's parity
// (0, 1, 0, ... for its successive uses).
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
// bytes: a multiple of 16; dst and src 16-byte aligned.
__device__ __forceinline__ void bulk_copy_async(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t b = smem_addr(bar);
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(b), "r"(parity)
        : "memory");
}
// Weight rows into shared memory on one mbarrier: thread 0 calls
// tma_rows_start (before pdl_wait: weights are constant), then
// __syncthreads (barrier initialized), every thread calls tma_rows_wait
// before reading. One use per kernel (phase 0).
__device__ __forceinline__ void tma_rows_start(uint64_t* bar, uint8_t* dst, const uint8_t* const* rows, int count,
                                               uint32_t rb) {
  mbar_init(bar, 1);
  mbar_init_fence();
  mbar_arrive_expect_tx(bar, rb * uint32_t(count));
  for (int i = 0; i < count; ++i) bulk_copy_async(dst + size_t(i) * rb, rows[i], rb, bar);
}
__device__ __forceinline__ void tma_rows_wait(uint64_t* bar) { mbar_wait(bar, 0); }

#endif

}  // namespace rf::gpu
