// CPU matmul over stored weight formats: out[n, m] = x[n, k] . w[m, k]^T.
// Threads split the weight rows. A single activation row (decode) uses the
// fused dequantize-dot; several rows dequantize each weight row once into a
// per-thread buffer and reuse it for every activation row.
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/quant.h"

namespace rf::cpu {

void matmul(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out) {
  const int64_t k = w.cols(), m = w.rows(), n = x.rows();
  RF_CHECK(x.type == DType::F32 && out.type == DType::F32, "cpu matmul: activations must be f32");
  RF_CHECK(x.cols() == k, "cpu matmul: x has ", x.cols(), " columns, weight has ", k);
  RF_CHECK(out.cols() == m && out.rows() >= n, "cpu matmul: out is ", out.shape_string(), ", expected [", m, ", ", n,
           "]");
  const uint8_t* wp = static_cast<const uint8_t*>(w.data);
  const size_t wrow = w.row_bytes();
  const float* xp = x.ptr<float>();
  float* op = out.ptr<float>();
  const size_t grain = size_t(std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)));
  pool.parallel_for(size_t(m), grain, [&](size_t r0, size_t r1) {
    if (n == 1 || w.type == DType::F32) {
      for (size_t r = r0; r < r1; ++r)
        for (int64_t t = 0; t < n; ++t) op[t * m + int64_t(r)] = dot_row(w.type, wp + r * wrow, xp + t * k, size_t(k));
      return;
    }
    thread_local std::vector<float> row;
    row.resize(size_t(k));
    for (size_t r = r0; r < r1; ++r) {
      dequantize_row(w.type, wp + r * wrow, row.data(), size_t(k));
      for (int64_t t = 0; t < n; ++t) op[t * m + int64_t(r)] = dot_row(DType::F32, row.data(), xp + t * k, size_t(k));
    }
  });
}

}  // namespace rf::cpu
