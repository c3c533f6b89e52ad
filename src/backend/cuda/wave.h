// Sub-group collectives written once for any width: butterfly sum, max and
// argmax over the W lanes of a warp / wavefront, and the block-wide sum and
// max built on them. W is a template argument (a power of two, at most the
// hardware's lanes): kernels use the target's RF_WARP_SIZE (gpu.h: 32 on
// NVIDIA and RDNA, 64 on CDNA).
//
// The lane exchange is a parameter `Lanes` with
//   T shfl_xor(T v, int mask)   v of lane (this lane ^ mask)
//   int lane(), warp(), n_warps() of W-wide warps in the block
//   void sync_block()           __syncthreads()
// In kernels it is gpu.h's HwLanes (hardware shuffles); the CPU test
// (tests/unit/wave_emulation_test.cpp) runs these same functions with W = 64
// and W = 32 on lanes emulated in lockstep by threads, so the logic a
// 64-wide CDNA wavefront executes is tested on any machine. No vendor
// headers here: it compiles as plain C++ too.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define RF_WAVE_FN __device__ __forceinline__
#define RF_WAVE_UNROLL _Pragma("unroll")
#else
#include <cmath>
#define RF_WAVE_FN inline
#define RF_WAVE_UNROLL
#endif

namespace rf::gpu::wave {

template <int W, typename Lanes>
RF_WAVE_FN float sum(float v, Lanes& x) {
  static_assert(W >= 2 && (W & (W - 1)) == 0, "sub-group width: a power of two");
RF_WAVE_UNROLL
  for (int m = W / 2; m > 0; m >>= 1) v += x.shfl_xor(v, m);
  return v;
}

template <int W, typename Lanes>
RF_WAVE_FN float max(float v, Lanes& x) {
  static_assert(W >= 2 && (W & (W - 1)) == 0, "sub-group width: a power of two");
RF_WAVE_UNROLL
  for (int m = W / 2; m > 0; m >>= 1) v = fmaxf(v, x.shfl_xor(v, m));
  return v;
}

// The largest v over the lanes, ties to the lowest index i; every lane gets
// (v, i).
template <int W, typename Lanes>
RF_WAVE_FN void argmax(float& v, int& i, Lanes& x) {
  static_assert(W >= 2 && (W & (W - 1)) == 0, "sub-group width: a power of two");
RF_WAVE_UNROLL
  for (int m = W / 2; m > 0; m >>= 1) {
    const float ov = x.shfl_xor(v, m);
    const int oi = x.shfl_xor(i, m);
    if (ov > v || (ov == v && oi < i)) {
      v = ov;
      i = oi;
    }
  }
}

// Block-wide sum; `scratch` holds one float per warp (n_warps <= W). Every
// thread of the block calls it and gets the result.
template <int W, typename Lanes>
RF_WAVE_FN float block_sum(float v, float* scratch, Lanes& x) {
  v = sum<W>(v, x);
  x.sync_block();
  if (x.lane() == 0) scratch[x.warp()] = v;
  x.sync_block();
  v = x.lane() < x.n_warps() ? scratch[x.lane()] : 0.0f;
  return sum<W>(v, x);
}

// Block-wide max, as block_sum; `lowest` fills the lanes past the warps.
template <int W, typename Lanes>
RF_WAVE_FN float block_max(float v, float* scratch, float lowest, Lanes& x) {
  v = max<W>(v, x);
  x.sync_block();
  if (x.lane() == 0) scratch[x.warp()] = v;
  x.sync_block();
  v = x.lane() < x.n_warps() ? scratch[x.lane()] : lowest;
  return max<W>(v, x);
}

}  // namespace rf::gpu::wave
