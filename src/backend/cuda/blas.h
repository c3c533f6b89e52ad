// The BLAS wrapper: f16 GEMM on the backend's stream. On CUDA it is cuBLAS
// (tensor cores, f32 accumulation) with a fixed workspace, so it allocates
// nothing per call and can be captured in graphs; where no vendor BLAS
// exists (Debian's HIP) it runs the project's tiled GEMM kernel.
#pragma once

#include <cstddef>

#include "backend/cuda/gpu.h"
#include "core/dtype.h"

namespace rf::gpu {

class Blas {
 public:
  Blas(const LaunchCtx& ctx, void* workspace, size_t workspace_bytes);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // out[n, m] (row stride ldo, f16 or f32) = x[n, k] . w[m, k]^T, f16 inputs.
  void gemm_f16(const void* x, const void* w, void* out, DType out_type, int n, int m, int k, int ldo);

  static size_t workspace_bytes();

 private:
  LaunchCtx ctx_;
  void* handle_ = nullptr;
};

}  // namespace rf::gpu
