// Blas on cuBLAS; the FP8 GEMM on cuBLASLt (e4m3 operands, a scale per
// output row and per token applied by the library: outer-vector scaling).
#include <cublasLt.h>
#include <cublas_v2.h>

#include <map>
#include <tuple>

#include "backend/cuda/blas.h"

namespace rf::gpu {
namespace {

void check(cublasStatus_t st, const char* what, int line) {
  if (st != CUBLAS_STATUS_SUCCESS) fail("cuBLAS error ", int(st), " in ", what, " (", __FILE__, ":", line, ")");
}
#define RF_CUBLAS_CHECK(call) check((call), #call, __LINE__)

}  // namespace

size_t Blas::workspace_bytes() { return size_t(32) << 20; }

// One FP8 GEMM shape's descriptors and algorithm (ok: cuBLASLt has one).
struct Fp8Plan {
  bool ok = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

struct Blas::Fp8Plans {
  // (out type, n, m, k, w_ld, ldo)
  std::map<std::tuple<int, int, int, int, size_t, int>, Fp8Plan> plans;
  ~Fp8Plans() {
    for (auto& [key, p] : plans) {
      if (p.desc) cublasLtMatmulDescDestroy(p.desc);
      for (cublasLtMatrixLayout_t l : {p.a, p.b, p.d})
        if (l) cublasLtMatrixLayoutDestroy(l);
    }
  }
};

Blas::Blas(const LaunchCtx& ctx, void* workspace, size_t ws)
    : ctx_(ctx), workspace_(workspace), workspace_bytes_(ws), fp8_(new Fp8Plans) {
  cublasHandle_t h;
  RF_CUBLAS_CHECK(cublasCreate(&h));
  handle_ = h;
  RF_CUBLAS_CHECK(cublasSetStream(h, ctx.stream));
  RF_CUBLAS_CHECK(cublasSetWorkspace(h, workspace, ws));
  cublasLtHandle_t lt;
  RF_CUBLAS_CHECK(cublasLtCreate(&lt));
  lt_handle_ = lt;
}

Blas::~Blas() {
  delete fp8_;
  if (lt_handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(lt_handle_));
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

bool Blas::gemm_fp8_supported(DType out_type, int n, int m, int k, size_t w_ld, int ldo) {
  const auto key = std::make_tuple(int(out_type), n, m, k, w_ld, ldo);
  auto it = fp8_->plans.find(key);
  if (it != fp8_->plans.end()) return it->second.ok;
  // Prefill chunks come in every length: keep the plans bounded.
  if (fp8_->plans.size() >= 4096) {
    delete fp8_;
    fp8_ = new Fp8Plans;
  }
  Fp8Plan& p = fp8_->plans[key];
  // Column-major, as cuBLAS sees the row-major operands: D (m x n, ld ldo)
  // = op(A) op(B), A the weights' codes (k x m, ld w_ld, transposed), B the
  // activations' codes (k x n, ld k); FP8 wants exactly this "TN" form.
  const cudaDataType_t dt = out_type == DType::F32 ? CUDA_R_32F : CUDA_R_16F;
  const cublasOperation_t trans = CUBLAS_OP_T, none = CUBLAS_OP_N;
  const cublasLtMatmulMatrixScale_t outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  if (cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &outer, sizeof outer) !=
          CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &outer, sizeof outer) !=
          CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, uint64_t(k), uint64_t(m), int64_t(w_ld)) !=
          CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, uint64_t(k), uint64_t(n), int64_t(k)) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&p.d, dt, uint64_t(m), uint64_t(n), int64_t(ldo)) != CUBLAS_STATUS_SUCCESS)
    return false;
  cublasLtMatmulPreference_t pref;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return false;
  const uint64_t ws = workspace_bytes_;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const bool asked =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) ==
          CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(lt_handle_), p.desc, p.a, p.b, p.d, p.d, pref, 1,
                                     &result, &found) == CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulPreferenceDestroy(pref);
  p.ok = asked && found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  p.algo = result.algo;
  return p.ok;
}

void Blas::gemm_fp8(const void* xq, const float* x_scale, const void* wq, size_t w_ld, const float* w_scale, void* out,
                    DType out_type, int n, int m, int k, int ldo) {
  RF_CHECK(gemm_fp8_supported(out_type, n, m, k, w_ld, ldo), "FP8 GEMM: cuBLASLt has none for n ", n, " m ", m,
           " k ", k);
  Fp8Plan& p = fp8_->plans[std::make_tuple(int(out_type), n, m, k, w_ld, ldo)];
  RF_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof w_scale));
  RF_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof x_scale));
  const float alpha = 1.0f, beta = 0.0f;
  RF_CUBLAS_CHECK(cublasLtMatmul(static_cast<cublasLtHandle_t>(lt_handle_), p.desc, &alpha, wq, p.a, xq, p.b, &beta,
                                 out, p.d, out, p.d, &p.algo, workspace_, workspace_bytes_, ctx_.stream));
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
