// What the two tensor-core GEMMs on quantized weights share (gemm_mma.cu's
// mma.sync kernel, gemm_wgmma.cu's Hopper kernel): their launch arguments
// (QuantGemmArgs) and the dense-mode set-up that checks a call and spreads
// its k range over the splits.
#pragma once

#include <algorithm>

#include "backend/cuda/gpu.h"
#include "core/dtype.h"
#include "core/error.h"

namespace rf::gpu {

constexpr int kQuantGemmChunk = 256;  // k a stage: one k-quant super-block (Q5_0 / Q8_0 on wgmma: 128)

struct QuantGemmArgs {
  const uint8_t* w;
  size_t row_bytes;
  int m, k, n;
  const __half* x;      // [n, k]
  void* out;            // [n, m], f16 or f32 (when not split)
  float* partials;      // [splits, n, m] when split
  int chunks_per_split;
  // Expert mode (gemm_mma.cu only; tiles != nullptr, no splits): block row
  // blockIdx.y takes tile {expert, first row, rows} of the previous
  // kernel's tiles[] (blocks past *n_tiles exit): weights advanced by
  // expert * expert_bytes, x and out by the tile's first row.
  const int4* tiles;
  const int* n_tiles;
  size_t expert_bytes;
};

// Dense mode: out[n, m] = x[n, k] . w^T over `splits` parts of k (clamped to
// 1..k / chunk and cut so that none is empty: the count is updated), partials
// holding splits * n * m floats when split. `what` names the kernel in errors.
inline QuantGemmArgs quant_gemm_args(const char* what, const void* w, size_t row_bytes, int m, int k, const void* x,
                                     int n, int max_n, void* out, DType out_type, int& splits, float* partials,
                                     int chunk = kQuantGemmChunk) {
  RF_CHECK(k % chunk == 0 && n >= 1 && n <= max_n, what, ": unsupported shape");
  RF_CHECK(out_type == DType::F32 || out_type == DType::F16, what, ": output must be f32 or f16");
  const int n_chunks = k / chunk;
  splits = std::clamp(splits, 1, n_chunks);
  QuantGemmArgs a{};
  a.w = static_cast<const uint8_t*>(w);
  a.row_bytes = row_bytes;
  a.m = m;
  a.k = k;
  a.n = n;
  a.x = static_cast<const __half*>(x);
  a.out = out;
  a.chunks_per_split = (n_chunks + splits - 1) / splits;
  splits = (n_chunks + a.chunks_per_split - 1) / a.chunks_per_split;  // no empty split
  a.partials = partials;
  RF_CHECK(splits == 1 || partials, what, ": split without a partials buffer");
  return a;
}

}  // namespace rf::gpu
