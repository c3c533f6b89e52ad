// The thin vendor layer that lets one kernel source and one backend source
// compile with nvcc (CUDA) and with hipcc / the host compiler against the HIP
// runtime (AMD): runtime calls and graphs, warp shuffles, the warp size, and
// the 16-bit float types. bf16 is our own 16-bit struct (round-to-nearest-even
// conversions), identical on every vendor. Every runtime call goes through
// RF_GPU_CHECK, which throws rf::Error with file and line.
//
// Two switches, both decided here and nowhere else:
//  - RF_HIP: the AMD build (hipcc, or host code built with RF_USE_HIP).
//  - RF_PORTABLE: the kernel variants that use no NVIDIA-only instruction
//    (mma.sync, cp.async, TMA bulk copies, programmatic dependent launch).
//    Always on with HIP; on CUDA with the CMake option
//    ROCMFORGE_PORTABLE_KERNELS (preset cuda-portable), so that the variants
//    AMD runs can be tested on an NVIDIA GPU. Kernel files test RF_PORTABLE,
//    never a vendor, to pick a variant.
//
// The warp size: RF_WARP_SIZE in device code is the target's (32 on NVIDIA
// and RDNA, 64 on CDNA). Host code must not use it (one HIP binary holds
// code for targets of both sizes): launchers take LaunchCtx::warp_size, the
// device's, where their launch shape depends on it.
#pragma once

#include <cstdint>
#include <utility>

#if defined(__HIPCC__) || defined(RF_USE_HIP)
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define RF_HIP 1
#define RF_GPU_VENDOR "rocm"
#define gpuError_t hipError_t
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuStream_t hipStream_t
#define gpuEvent_t hipEvent_t
#define gpuGraph_t hipGraph_t
#define gpuGraphExec_t hipGraphExec_t
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpy hipMemcpy
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuMemGetInfo hipMemGetInfo
#define gpuSetDevice hipSetDevice
#define gpuGetDevice hipGetDevice
#define gpuDeviceProp hipDeviceProp_t
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuEventCreate hipEventCreate
#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventBlockingSync hipEventBlockingSync
#define gpuEventDisableTiming hipEventDisableTiming
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuHostAlloc hipHostMalloc
#define gpuHostAllocDefault hipHostMallocDefault
#define gpuFreeHost hipHostFree
#define gpuLaunchHostFunc hipLaunchHostFunc
#define gpuHostAllocMapped hipHostMallocMapped
#define gpuHostAllocPortable hipHostMallocPortable
#define gpuHostRegister hipHostRegister
#define gpuHostUnregister hipHostUnregister
#define gpuHostRegisterPortable hipHostRegisterPortable
// (HIP 5.2 has no read-only registration: read-only pages may be refused.)
#define gpuHostRegisterReadOnly 0
#define gpuDeviceCanAccessPeer hipDeviceCanAccessPeer
#define gpuDeviceEnablePeerAccess hipDeviceEnablePeerAccess
#define gpuErrorPeerAccessAlreadyEnabled hipErrorPeerAccessAlreadyEnabled
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define gpuGraphInstantiate(exec, graph) hipGraphInstantiate(exec, graph, nullptr, nullptr, 0)
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuFuncSetAttribute(f, attr, v) hipFuncSetAttribute(reinterpret_cast<const void*>(f), attr, v)
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#ifdef __AMDGCN_WAVEFRONT_SIZE
#define RF_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define RF_WARP_SIZE 64  // host pass: only kernel declarations (__launch_bounds__) see it
#endif
#define RF_SHFL_XOR(v, m) __shfl_xor((v), (m))
#define RF_SHFL(v, lane) __shfl((v), (lane))
#define RF_SHFL_UP(v, d) __shfl_up((v), (d))
#define RF_SYNCWARP() __builtin_amdgcn_wave_barrier()
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define RF_GPU_VENDOR "cuda"
#define gpuError_t cudaError_t
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuStream_t cudaStream_t
#define gpuEvent_t cudaEvent_t
#define gpuGraph_t cudaGraph_t
#define gpuGraphExec_t cudaGraphExec_t
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpy cudaMemcpy
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuMemGetInfo cudaMemGetInfo
#define gpuSetDevice cudaSetDevice
#define gpuGetDevice cudaGetDevice
#define gpuDeviceProp cudaDeviceProp
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuEventCreate cudaEventCreate
#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventBlockingSync cudaEventBlockingSync
#define gpuEventDisableTiming cudaEventDisableTiming
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuHostAlloc cudaHostAlloc
#define gpuHostAllocDefault cudaHostAllocDefault
#define gpuFreeHost cudaFreeHost
#define gpuLaunchHostFunc cudaLaunchHostFunc
#define gpuHostAllocMapped cudaHostAllocMapped
#define gpuHostAllocPortable cudaHostAllocPortable
#define gpuHostRegister cudaHostRegister
#define gpuHostUnregister cudaHostUnregister
#define gpuHostRegisterPortable cudaHostRegisterPortable
#define gpuHostRegisterReadOnly cudaHostRegisterReadOnly
#define gpuDeviceCanAccessPeer cudaDeviceCanAccessPeer
#define gpuDeviceEnablePeerAccess cudaDeviceEnablePeerAccess
#define gpuErrorPeerAccessAlreadyEnabled cudaErrorPeerAccessAlreadyEnabled
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define gpuGraphInstantiate(exec, graph) cudaGraphInstantiate(exec, graph, 0)
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuFuncSetAttribute(f, attr, v) cudaFuncSetAttribute(f, attr, v)
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define RF_WARP_SIZE 32
#define RF_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#define RF_SHFL(v, lane) __shfl_sync(0xffffffffu, (v), (lane))
#define RF_SHFL_UP(v, d) __shfl_up_sync(0xffffffffu, (v), (d))
#define RF_SYNCWARP() __syncwarp()
#endif

#if defined(RF_HIP) || defined(ROCMFORGE_PORTABLE_KERNELS)
#define RF_PORTABLE 1
#endif

// RF_MFMA: device code for an AMD target with matrix cores (CDNA: MFMA
// instructions on 64-wide wavefronts). Defined per target in hipcc's device
// passes only, so one binary holds the MFMA kernels for gfx90a beside the
// plain ones for RDNA; kernels test it to pick their variant.
#if defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define RF_MFMA 1
#endif

#include "backend/cuda/tuning.h"
#include "backend/cuda/wave.h"
#include "core/error.h"

namespace rf::gpu {

// Throws rf::Error naming the call site.
[[noreturn]] void throw_gpu_error(gpuError_t err, const char* what, const char* file, int line);

}  // namespace rf::gpu

#define RF_GPU_CHECK(call)                                                              \
  do {                                                                                  \
    const gpuError_t rf_err_ = (call);                                                  \
    if (rf_err_ != gpuSuccess) ::rf::gpu::throw_gpu_error(rf_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch.
#define RF_GPU_CHECK_LAUNCH() RF_GPU_CHECK(gpuGetLastError())

namespace rf::gpu {

// Programmatic dependent launch (CUDA, sm_90+): a kernel started through
// launch() may begin while the previous kernel of the stream is finishing.
// Such a kernel must call pdl_wait() before it reads or writes anything an
// earlier kernel touches (activations, the KV cache, outputs); before that it
// may only read constant data (weights), e.g. to prefetch them. Kernels call
// pdl_trigger() once past their own pdl_wait(), so the next kernel starts at
// most one launch ahead. Tuning::pdl (ROCMFORGE_KERNELS_OFF=pdl) turns it
// off.
//
// What every launcher gets: the backend's stream and its tuning (decided
// once, at construction: tuning.h), and the backend's buffer for 8-bit
// activations (the
// streaming k-quant GEMV quantizes its input row there; ops on one stream
// run in order, so one buffer serves them all). Launchers pass it down;
// nothing on a launch path reads the environment or a global.
//
// What act_q8 holds: the quants of row `src` (k wide), or nothing (src
// null), since the backend's write number `version`. Every launcher that
// writes the buffer updates this record (act_q8_record after writing a
// row's quants, act_q8_clobber after using it otherwise); the backend turns
// it into the Handoff of the op's tensor (backend/backend.h). A launcher
// reads the quants instead of quantizing a row only when its op was handed
// them with that row (act_q8_handed, from the Handoff the op took; the
// backend checked that nothing overwrote them since), and a producer (the
// residual add + RMSNorm, the attention combine) writes its row's quants
// only where its op asks it to (act_q8_produce: the backend's weights
// include some whose GEMV reads them).
struct ActQ8Record {
  const void* src = nullptr;
  int k = 0;
  uint64_t version = 0;
};
struct LaunchCtx {
  gpuStream_t stream;
  const Tuning& tuning;
  int warp_size;                          // the device's (gpuDeviceProp::warpSize): host launch math
  void* act_q8 = nullptr;                 // kActQ8MaxK activations' worth (act_q8_bytes)
  ActQ8Record* act_q8_record = nullptr;   // the backend's record of act_q8 (null: nothing is recorded)
  const void* act_q8_handed = nullptr;    // the row whose quants this op was handed in act_q8 (null: none)
  bool act_q8_produce = false;            // a producer of one row also writes its quants
  int n_sms = 1;                          // the device's multiprocessors
};
// The 8-bit activation buffer: per 32 activations a float2 (scale d, d *
// sum of the quants), then the quants; rows of up to kActQ8MaxK.
constexpr int kActQ8MaxK = 65536;
constexpr size_t act_q8_bytes() { return size_t(kActQ8MaxK) / 32 * 8 + size_t(kActQ8MaxK); }
inline float2* act_q8_scales(void* buf) { return static_cast<float2*>(buf); }
inline int8_t* act_q8_quants(void* buf) {
  return reinterpret_cast<int8_t*>(static_cast<uint8_t*>(buf) + size_t(kActQ8MaxK) / 32 * 8);
}
// Whether the producer of one row of k activations (an RMSNorm, the
// attention combine) should also write its quants to act_q8
// (Fusions::act_q8, LaunchCtx::act_q8_produce), and the record
// that it did.
bool act_q8_fusable(const LaunchCtx& ctx, int rows, int k);
void act_q8_record(const LaunchCtx& ctx, const void* src, int k);
// act_q8 used for anything but one row's quants.
void act_q8_clobber(const LaunchCtx& ctx);
// Whether act_q8 holds src's quants, handed to this op.
bool act_q8_ready(const LaunchCtx& ctx, const void* src, int k);

#if defined(__CUDACC__) || defined(__HIPCC__)
__device__ __forceinline__ void pdl_wait() {
#if !defined(RF_PORTABLE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if !defined(RF_PORTABLE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// pdl_wait then pdl_trigger; with trigger_first (a short kernel's,
// Tuning::pdl_early_rope) the trigger first, so that the next
// kernel's blocks launch, and load what they may before their own wait,
// while this one waits. Safe where the next kernel reads before its wait
// only what the kernels before this one's predecessor wrote.
__device__ __forceinline__ void pdl_wait_trigger(bool trigger_first) {
  if (trigger_first) pdl_trigger();
  pdl_wait();
  if (!trigger_first) pdl_trigger();
}
// A word another kernel wrote, read past this SM's L1 (which may still hold
// an older copy): for reads before pdl_wait of what earlier kernels wrote.
template <typename T>
__device__ __forceinline__ T load_past_l1(const T* p) {
#if !defined(RF_PORTABLE) && defined(__CUDA_ARCH__)
  return __ldcg(p);
#else
  return *static_cast<const volatile T*>(p);
#endif
}
// Pulls [p, p + bytes) into L2 without waiting (sm_90 bulk prefetch; p and
// bytes multiples of 16). A hint: no effect on results.
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
#if !defined(RF_PORTABLE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
  (void)p;
  (void)bytes;
#endif
}

// Launches kernel<<<grid, block, smem, s>>>(args...) as a programmatic
// dependent launch where supported (see pdl_wait; never with RF_PORTABLE),
// in thread-block clusters of `cluster` blocks where it is not (1, 1, 1)
// (CUDA only, not RF_PORTABLE; grid a multiple of it), and checks the
// launch.
template <typename... KArgs, typename... Args>
void launch_in_clusters(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, const LaunchCtx& ctx,
                        dim3 cluster, Args&&... args) {
  const bool clustered = cluster.x * cluster.y * cluster.z > 1;
#ifdef RF_HIP
  RF_CHECK(!clustered, "launch: thread-block clusters are CUDA's");
  hipLaunchKernelGGL(kernel, grid, block, smem, ctx.stream, static_cast<KArgs>(args)...);
  RF_GPU_CHECK_LAUNCH();
#else
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = ctx.stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
#ifdef RF_PORTABLE
  RF_CHECK(!clustered, "launch: no thread-block clusters in the portable kernels");
#else
  if (ctx.tuning.pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (clustered) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n++].val.clusterDim.z = cluster.z;
  }
#endif
  cfg.attrs = attr;
  cfg.numAttrs = n;
  RF_GPU_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...));
#endif
}
template <typename... KArgs, typename... Args>
void launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, const LaunchCtx& ctx, Args&&... args) {
  launch_in_clusters(kernel, grid, block, smem, ctx, dim3(1, 1, 1), std::forward<Args>(args)...);
}
#endif

}  // namespace rf::gpu

#if defined(__CUDACC__) || defined(__HIPCC__)
namespace rf::gpu {

// bfloat16 stored as bits; conversions round to nearest even.
struct bf16 {
  uint16_t bits;
};

// An f16 pair as its 32 bits and back (fragment registers of tensor-core
// products are f16 pairs held in 32-bit registers).
__device__ __forceinline__ uint32_t h2_bits(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }
__device__ __forceinline__ __half2 bits_h2(uint32_t u) { return *reinterpret_cast<__half2*>(&u); }

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(bf16 x) { return __uint_as_float(uint32_t(x.bits) << 16); }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ bf16 from_float<bf16>(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 64)};
  return bf16{uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

// The hardware lane exchange of wave.h's collectives: this thread's lane and
// warp (of the target's RF_WARP_SIZE lanes), the block's warps, shuffles.
struct HwLanes {
  __device__ int lane() const { return threadIdx.x % RF_WARP_SIZE; }
  __device__ int warp() const { return threadIdx.x / RF_WARP_SIZE; }
  __device__ int n_warps() const { return (blockDim.x + RF_WARP_SIZE - 1) / RF_WARP_SIZE; }
  __device__ void sync_block() const { __syncthreads(); }
  template <typename T>
  __device__ T shfl_xor(T v, int mask) const {
    return RF_SHFL_XOR(v, mask);
  }
#if defined(RF_MFMA)
  // d += A . B over the wavefront, V_MFMA_F32_16X16X16F16 (mfma_tile.h
  // gives the operands' layout).
  __device__ void mma16(float (&d)[4], const float (&a)[4], const float (&b)[4]) const {
    typedef _Float16 half4 __attribute__((ext_vector_type(4)));
    typedef float float4v __attribute__((ext_vector_type(4)));
    const half4 av = {_Float16(a[0]), _Float16(a[1]), _Float16(a[2]), _Float16(a[3])};
    const half4 bv = {_Float16(b[0]), _Float16(b[1]), _Float16(b[2]), _Float16(b[3])};
    float4v c = {d[0], d[1], d[2], d[3]};
    c = __builtin_amdgcn_mfma_f32_16x16x16f16(av, bv, c, 0, 0, 0);
    d[0] = c[0], d[1] = c[1], d[2] = c[2], d[3] = c[3];
  }
#endif
};

__device__ __forceinline__ float warp_sum(float v) {
  HwLanes x;
  return wave::sum<RF_WARP_SIZE>(v, x);
}

__device__ __forceinline__ float warp_max(float v) {
  HwLanes x;
  return wave::max<RF_WARP_SIZE>(v, x);
}

// Block-wide sum; `scratch` holds one float per warp. All threads get the result.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  HwLanes x;
  return wave::block_sum<RF_WARP_SIZE>(v, scratch, x);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  HwLanes x;
  return wave::block_max<RF_WARP_SIZE>(v, scratch, -INFINITY, x);
}

// One activation row's 8-bit quants (act_q8's layout): this lane's value x
// (as stored: f16-rounded) is element i; the 32 lanes holding elements
// [32 (i / 32), +32) call it together (lanes 32 j .. 32 j + 31: a warp, or
// half a 64-wide wavefront). Per 32, d = max |x| / 127, quant = round(x /
// d), and (d, d * sum of quants): the arithmetic of gemv_stream.cu's
// quantize kernel, so the quants are the same bits.
__device__ __forceinline__ void quantize32_q8(float x, int i, int8_t* xq, float2* xds) {
  float amax = fabsf(x);
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) amax = fmaxf(amax, RF_SHFL_XOR(amax, m));
  const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
  const int q = __float2int_rn(x * inv);
  int sum = q;
#pragma unroll
  for (int m = 16; m >= 1; m /= 2) sum += RF_SHFL_XOR(sum, m);
  xq[i] = int8_t(q);
  if (i % 32 == 0) xds[i / 32] = make_float2(d, d * float(sum));
}

}  // namespace rf::gpu
#endif
