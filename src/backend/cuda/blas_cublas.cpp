// Blas on cuBLAS.
#include <cublas_v2.h>

#include "backend/cuda/blas.h"

namespace rf::gpu {
namespace {

void check(cublasStatus_t st, const char* what, int line) {
  if (st != CUBLAS_STATUS_SUCCESS) fail("cuBLAS error ", int(st), " in ", what, " (", __FILE__, ":", line, ")");
}
#define RF_CUBLAS_CHECK(call) check((call), #call, __LINE__)

}  // namespace

size_t Blas::workspace_bytes() { return size_t(32) << 20; }

Blas::Blas(const LaunchCtx& ctx, void* workspace, size_t ws) : ctx_(ctx) {
  cublasHandle_t h;
  RF_CUBLAS_CHECK(cublasCreate(&h));
  handle_ = h;
  RF_CUBLAS_CHECK(cublasSetStream(h, ctx.stream));
  RF_CUBLAS_CHECK(cublasSetWorkspace(h, workspace, ws));
}

Blas::~Blas() {
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

void Blas::gemm_f16(const void* x, const void* w, void* out, DType out_type, int n, int m, int k, int ldo) {
  // Row-major out[n, m] is column-major out^T (m x n) = W (m x k, stored as
  // column-major k x m, transposed) times X^T (k x n, column-major).
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t ct = out_type == DType::F32 ? CUDA_R_32F : CUDA_R_16F;
  RF_CUBLAS_CHECK(cublasGemmEx(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w,
                               CUDA_R_16F, k, x, CUDA_R_16F, k, &beta, out, ct, ldo, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
}

}  // namespace rf::gpu
