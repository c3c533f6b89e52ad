// The BLAS wrapper: f16 GEMM on the backend's stream. On CUDA it is cuBLAS
// (tensor cores, f32 accumulation) with a fixed workspace, so it allocates
// nothing per call and can be captured in graphs; where no vendor BLAS
// exists (Debian's HIP) it runs the project's tiled GEMM kernel. FP8 GEMMs
// (e4m3 x e4m3 on tensor cores, cuBLASLt) exist only on CUDA.
#pragma once

#include <cstddef>

#include "backend/cuda/gpu.h"
#include "core/dtype.h"

namespace rf::gpu {

struct LtKey;
struct LtPlan;

class Blas {
 public:
  Blas(const LaunchCtx& ctx, void* workspace, size_t workspace_bytes);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // out[n, m] (row stride ldo, f16 or f32) = x[n, k] . w[m, k]^T, f16 inputs.
  // CUDA: cuBLAS's default algorithm (cuBLASLt's first eight heuristic
  // ones are no faster on batched decode).
  void gemm_f16(const void* x, const void* w, void* out, DType out_type, int n, int m, int k, int ldo);

  // FP8: out[n, m] (row stride ldo, f16 or f32) = (x_scale[t] * w_scale[r]
  // * sum_k xq[t, k] wq[r, k]), xq e4m3 [n, k] (row stride k), wq e4m3 rows
  // of stride w_ld bytes, both scales f32 vectors on the device. Whether it
  // runs for this shape is known before anything is queued: false (nothing
  // queued) where this BLAS or the device has no such GEMM (callers then
  // take another path). The plan of each shape is found once and kept.
  bool gemm_fp8_supported(DType out_type, int n, int m, int k, size_t w_ld, int ldo);
  void gemm_fp8(const void* xq, const float* x_scale, const void* wq, size_t w_ld, const float* w_scale, void* out,
                DType out_type, int n, int m, int k, int ldo);

  static size_t workspace_bytes();

 private:
  struct LtPlans;  // cuBLASLt descriptors and algorithms per GEMM shape (CUDA)
  LtPlan& lt_plan(const LtKey& key);  // found on first use, then kept
  LaunchCtx ctx_;
  void* handle_ = nullptr;
  void* lt_handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  LtPlans* lt_ = nullptr;
};

}  // namespace rf::gpu
