// CudaBackend::matmul: which kernel multiplies a batch (the weights' format
// and the batch's rows decide): the GEMV for up to 8 rows, FP8 tensor cores
// on FP8 weights from Tuning::fp8_gemm_min_rows rows (in chunks of
// activation rows the dequantization scratch holds), the tensor-core matmul
// on quantized weights (wgmma on Hopper, else mma.sync; 64 rows a launch,
// its k range split over partials in the scratch), BLAS on f16 weights, and
// dequantization of row chunks into scratch + BLAS for the rest.
#include <algorithm>

#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/matmul/matmul.cuh"

namespace rf {

bool CudaBackend::gemv_quantizes_activations(DType w_type, int n, int k) const {
  return act_q8_ && gpu::gemv_quantizes_activations(tuning_, warp_size_, w_type, n, k);
}

Handoff CudaBackend::matmul(const Tensor& x, const Tensor& w, Tensor& out, const Handoff& x_in) {
  const int n = int(x.rows()), k = int(w.cols()), m = int(w.rows());
  RF_CHECK(x.type == DType::F16 && x.cols() == k, "cuda matmul: x must be f16 [n, ", k, "], is ", x.shape_string());
  RF_CHECK(out.cols() == m && out.rows() >= n, "cuda matmul: out is ", out.shape_string());
  RF_CHECK(reserved_, "cuda: reserve() must precede matmul");
  const int fp8_chunk = fp8_matmul_chunk(w, n, out.type);
  const bool wgmma = tuning_.wgmma && gpu::wgmma_matmul_supported(w.type, k);
  const bool mma = fp8_chunk == 0 && n > 8 && n <= tuning_.mma_max_rows_quant &&
                   (wgmma || gpu::mma_matmul_supported(w.type, k));
  OpTimer timer(profiler(),
                profiler() ? str("matmul ",
                                 n <= 8                 ? "gemv"
                                 : fp8_chunk > 0        ? "fp8 tensor cores"
                                 : mma                  ? "mma"
                                 : w.type == DType::F16 ? "blas"
                                                        : "dequant+blas",
                                 " ", dtype_name(w.type), " n", n <= 8 ? str(n) : (n <= 64 ? str("<=64") : str(">64")),
                                 " m", m, " k", k)
                           : std::string());
  check_handoff(x, x_in, "cuda matmul");
  if (n <= 8) {
    // One row: the GEMV may read its 8-bit quants that x_in hands over, or
    // write them, for another GEMV of x.
    const uint64_t before = act_q8_version();
    const gpu::LaunchCtx c = ctx_reading(x, x_in, "cuda matmul");
    gpu::gemv(w.type, w.data, w.row_bytes(), m, k, x.data, n, out.data, out.type, c);
    return act_q8_handoff(x, before, c);
  }
  if (fp8_chunk > 0) {
    matmul_fp8(x, w, out, fp8_chunk);
    return {};
  }
  if (mma) {
    // 64 activation rows per launch; the k-split partials live in the
    // dequantization scratch (unused on this path).
    const size_t out_elem = out.type == DType::F32 ? 4 : 2;
    for (int c0 = 0; c0 < n; c0 += 64) {
      const int rows = std::min(64, n - c0);
      const auto* xc = static_cast<const uint8_t*>(x.data) + size_t(c0) * k * 2;
      auto* oc = static_cast<uint8_t*>(out.data) + size_t(c0) * m * out_elem;
      int splits = wgmma ? gpu::wgmma_matmul_splits(w.type, m, k, rows, n_sms_, tuning_.wgmma_split_cost)
                         : gpu::mma_matmul_splits(m, k, n_sms_);
      while (splits > 1 && size_t(splits) * size_t(rows) * size_t(m) * 4 > impl_->dequant_bytes) --splits;
      auto* partials = static_cast<float*>(impl_->dequant);
      if (wgmma)
        gpu::wgmma_matmul(w.type, w.data, w.row_bytes(), m, k, xc, rows, oc, out.type, splits, partials, ctx());
      else
        gpu::mma_matmul(w.type, w.data, w.row_bytes(), m, k, xc, rows, oc, out.type, splits, partials, ctx());
    }
    return {};
  }
  if (w.type == DType::F16) {
    impl_->blas->gemm_f16(x.data, w.data, out.data, out.type, n, m, k, m);
    return {};
  }
  // Dequantize chunks of weight rows into scratch, then GEMM each chunk into
  // the matching output columns.
  const int chunk = int(std::max<size_t>(1, impl_->dequant_bytes / (size_t(k) * 2)));
  const size_t out_elem = out.type == DType::F32 ? 4 : 2;
  for (int r0 = 0; r0 < m; r0 += chunk) {
    const int rows = std::min(chunk, m - r0);
    gpu::dequant_rows_f16(w.type, w.data, w.row_bytes(), r0, rows, k, impl_->dequant, ctx());
    impl_->blas->gemm_f16(x.data, impl_->dequant, static_cast<uint8_t*>(out.data) + size_t(r0) * out_elem, out.type,
                          n, rows, k, m);
  }
  return {};
}

namespace {
size_t align256(size_t b) { return (b + 255) / 256 * 256; }
}  // namespace

int CudaBackend::fp8_matmul_chunk(const Tensor& w, int n, DType out_type) {
  const int k = int(w.cols()), m = int(w.rows());
  // Batches the GEMV takes stay there; from fp8_gemm_min_rows rows on, FP8
  // tensor cores take precedence over the f16 tensor-core matmul.
  if (!reserved_ || w.type != DType::F8_E4M3_ROW || tuning_.fp8_gemm_min_rows <= 0 ||
      n < tuning_.fp8_gemm_min_rows || n <= 8)
    return 0;
  // The dequantization scratch holds the weights' row scales, then per
  // chunk of activation rows their scales and e4m3 codes.
  const size_t sw_bytes = align256(size_t(m) * 4);
  if (sw_bytes + 512 >= impl_->dequant_bytes) return 0;
  const int chunk = int(std::min<size_t>(size_t(n), (impl_->dequant_bytes - sw_bytes - 512) / (size_t(k) + 4)));
  if (chunk < 1) return 0;
  const int last = n % chunk;
  if (!impl_->blas->gemm_fp8_supported(out_type, chunk, m, k, w.row_bytes(), m) ||
      (last && !impl_->blas->gemm_fp8_supported(out_type, last, m, k, w.row_bytes(), m)))
    return 0;
  return chunk;
}

bool CudaBackend::matmul_runs_fp8(const Tensor& w, int n, DType out_type) {
  bind();
  return fp8_matmul_chunk(w, n, out_type) > 0;
}

void CudaBackend::matmul_fp8(const Tensor& x, const Tensor& w, Tensor& out, int chunk) {
  const int n = int(x.rows()), k = int(w.cols()), m = int(w.rows());
  const size_t sw_bytes = align256(size_t(m) * 4);
  auto* base = static_cast<uint8_t*>(impl_->dequant);
  float* sw = reinterpret_cast<float*>(base);
  float* sx = reinterpret_cast<float*>(base + sw_bytes);
  uint8_t* xq = base + sw_bytes + align256(size_t(chunk) * 4);
  gpu::gather_f8_row_scales(w.data, w.row_bytes(), m, sw, ctx());
  const size_t out_elem = out.type == DType::F32 ? 4 : 2;
  for (int r0 = 0; r0 < n; r0 += chunk) {
    const int rows = std::min(chunk, n - r0);
    gpu::quantize_act_e4m3(static_cast<const uint8_t*>(x.data) + size_t(r0) * k * 2, rows, k, xq, sx, ctx());
    impl_->blas->gemm_fp8(xq, sx, static_cast<const uint8_t*>(w.data) + info(w.type).row_header, w.row_bytes(), sw,
                          static_cast<uint8_t*>(out.data) + size_t(r0) * m * out_elem, out.type, rows, m, k, m);
  }
}

}  // namespace rf
