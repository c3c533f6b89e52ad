// Blas on the project's tiled GEMM kernel (HIP builds: Debian's HIP has no
// hipBLAS).
#include "backend/cuda/blas.h"
#include "backend/cuda/kernels.h"

namespace rf::gpu {

size_t Blas::workspace_bytes() { return 0; }
Blas::Blas(const LaunchCtx& ctx, void*, size_t) : ctx_(ctx) {}
Blas::~Blas() = default;

void Blas::gemm_f16(const void* x, const void* w, void* out, DType out_type, int n, int m, int k, int ldo) {
  gemm_f16_tiled(x, w, out, out_type, n, m, k, ldo, ctx_);
}

}  // namespace rf::gpu
