// Blas on cuBLAS; on cuBLASLt the FP8 GEMM (e4m3 operands, a scale per
// output row and per token applied by the library: outer-vector scaling).
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "backend/cuda/matmul/blas.h"

namespace rf::gpu {
namespace {

void check(cublasStatus_t st, const char* what, int line) {
  if (st != CUBLAS_STATUS_SUCCESS) fail("cuBLAS error ", int(st), " in ", what, " (", __FILE__, ":", line, ")");
}
#define RF_CUBLAS_CHECK(call) check((call), #call, __LINE__)

}  // namespace

size_t Blas::workspace_bytes() { return size_t(32) << 20; }

// One GEMM shape's cuBLASLt descriptors and algorithm (ok: cuBLASLt has one).
struct LtPlan {
  bool ok = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// What a plan is for: the operands' type, the output's, the shape, the
// weights' row stride and the output's.
struct LtKey {
  cudaDataType_t in, out;
  int n, m, k;
  size_t w_ld;
  int ldo;
  auto tie() const { return std::tie(in, out, n, m, k, w_ld, ldo); }
  bool operator<(const LtKey& o) const { return tie() < o.tie(); }
};

struct Blas::LtPlans {
  std::map<LtKey, LtPlan> plans;
  ~LtPlans() {
    for (auto& [key, p] : plans) {
      if (p.desc) cublasLtMatmulDescDestroy(p.desc);
      for (cublasLtMatrixLayout_t l : {p.a, p.b, p.d})
        if (l) cublasLtMatrixLayoutDestroy(l);
    }
  }
};

namespace {

// Builds the plan of `key` (column-major, as cuBLAS sees the row-major
// operands: D (m x n, ld ldo) = op(A) op(B), A the weights (k x m, ld w_ld,
// transposed), B the activations (k x n, ld k): the "TN" form FP8 needs).
// FP8 operands get a scale vector each (outer-vector scaling); cuBLASLt
// offers no algorithm for it unless the scale pointers are set when asked
// (cuBLASLt 13.1 on an H200), so `placeholder` (any device address) stands
// in for them until each call sets its own.
void build_plan(cublasLtHandle_t lt, const LtKey& key, void* placeholder, size_t workspace_bytes, LtPlan& p) {
  const cublasOperation_t trans = CUBLAS_OP_T, none = CUBLAS_OP_N;
  const bool fp8 = key.in == CUDA_R_8F_E4M3;
  const cublasLtMatmulMatrixScale_t outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  const auto ok = [](cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS; };
  if (!ok(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
      !ok(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans)) ||
      !ok(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none)) ||
      (fp8 && !ok(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &outer, sizeof outer))) ||
      (fp8 && !ok(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &outer, sizeof outer))) ||
      (fp8 && !ok(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &placeholder,
                                                 sizeof placeholder))) ||
      (fp8 && !ok(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &placeholder,
                                                 sizeof placeholder))) ||
      !ok(cublasLtMatrixLayoutCreate(&p.a, key.in, uint64_t(key.k), uint64_t(key.m), int64_t(key.w_ld))) ||
      !ok(cublasLtMatrixLayoutCreate(&p.b, key.in, uint64_t(key.k), uint64_t(key.n), int64_t(key.k))) ||
      !ok(cublasLtMatrixLayoutCreate(&p.d, key.out, uint64_t(key.m), uint64_t(key.n), int64_t(key.ldo))))
    return;
  cublasLtMatmulPreference_t pref;
  if (!ok(cublasLtMatmulPreferenceCreate(&pref))) return;
  const uint64_t ws = workspace_bytes;
  cublasLtMatmulHeuristicResult_t best = {};
  int found = 0;
  const bool asked = ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                             sizeof ws)) &&
                     ok(cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.d, p.d, pref, 1, &best,
                                                       &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (!asked || found <= 0) return;
  p.ok = best.state == CUBLAS_STATUS_SUCCESS;
  p.algo = best.algo;
}

}  // namespace

Blas::Blas(const LaunchCtx& ctx, void* workspace, size_t ws)
    : ctx_(ctx), workspace_(workspace), workspace_bytes_(ws), lt_(new LtPlans) {
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
  delete lt_;
  if (lt_handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(lt_handle_));
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

// Prefill chunks come in every length: the cache is emptied when it reaches
// 4096 plans.
LtPlan& Blas::lt_plan(const LtKey& key) {
  auto it = lt_->plans.find(key);
  if (it != lt_->plans.end()) return it->second;
  if (lt_->plans.size() >= 4096) {
    delete lt_;
    lt_ = new LtPlans;
  }
  LtPlan& p = lt_->plans[key];
  build_plan(static_cast<cublasLtHandle_t>(lt_handle_), key, workspace_, workspace_bytes_, p);
  return p;
}

bool Blas::gemm_fp8_supported(DType out_type, int n, int m, int k, size_t w_ld, int ldo) {
  const LtKey key{CUDA_R_8F_E4M3, out_type == DType::F32 ? CUDA_R_32F : CUDA_R_16F, n, m, k, w_ld, ldo};
  return lt_plan(key).ok;
}

void Blas::gemm_fp8(const void* xq, const float* x_scale, const void* wq, size_t w_ld, const float* w_scale, void* out,
                    DType out_type, int n, int m, int k, int ldo) {
  const LtKey key{CUDA_R_8F_E4M3, out_type == DType::F32 ? CUDA_R_32F : CUDA_R_16F, n, m, k, w_ld, ldo};
  LtPlan& p = lt_plan(key);
  RF_CHECK(p.ok, "FP8 GEMM: cuBLASLt has none for n ", n, " m ", m, " k ", k);
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
