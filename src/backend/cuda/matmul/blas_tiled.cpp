// Blas on the project's tiled GEMM kernel (HIP builds: Debian's HIP has no
// hipBLAS); no FP8 GEMM.
#include "backend/cuda/matmul/blas.h"
#include "backend/cuda/matmul/matmul.cuh"

namespace rf::gpu {

size_t Blas::workspace_bytes() { return 0; }
Blas::Blas(const LaunchCtx& ctx, void*, size_t) : ctx_(ctx) {}
Blas::~Blas() = default;

void Blas::gemm_f16(const void* x, const void* w, void* out, DType out_type, int n, int m, int k, int ldo) {
  gemm_f16_tiled(x, w, out, out_type, n, m, k, ldo, ctx_);
}

bool Blas::gemm_fp8_supported(DType, int, int, int, size_t, int) { return false; }

void Blas::gemm_fp8(const void*, const float*, const void*, size_t, const float*, void*, DType, int, int, int, int) {
  fail("FP8 GEMM: not in this build's BLAS");
}

}  // namespace rf::gpu
