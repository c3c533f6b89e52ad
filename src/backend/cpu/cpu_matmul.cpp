// CPU matmul over stored weight formats: out[n, m] = x[n, k] . w[m, k]^T.
//
// The activation rows are brought once into the format the weight's kernel
// reads (8-bit blocks for quantized weights, f32 as is for float weights;
// cpu_qdot.h), then threads split the weight rows. Within a thread's range,
// weight rows are taken in groups that stay in cache while every group of
// up to kMaxRows activation rows passes over them; each kernel call decodes
// a weight block once for all of those activation rows. Formats without a
// kernel (F8_E4M3_ROW) use dot_row per row pair.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_qdot.h"
#include "core/error.h"
#include "core/quant.h"

namespace rf::cpu {
namespace {

// Bytes of weight rows a thread keeps hot while the activation rows pass.
constexpr size_t kWeightTileBytes = 48 * 1024;

void matmul_dot_row(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out) {
  const int64_t k = w.cols(), m = w.rows(), n = x.rows();
  const uint8_t* wp = static_cast<const uint8_t*>(w.data);
  const size_t wrow = w.row_bytes();
  const float* xp = x.ptr<float>();
  float* op = out.ptr<float>();
  const size_t grain = size_t(std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)));
  pool.parallel_for(size_t(m), grain, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r)
      for (int64_t t = 0; t < n; ++t) op[t * m + int64_t(r)] = dot_row(w.type, wp + r * wrow, xp + t * k, size_t(k));
  });
}

}  // namespace

void MatmulScratch::reserve(size_t bytes) {
  if (xq.size() < bytes) xq.resize(bytes);
}

void matmul(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out, MatmulScratch& scratch,
            const KernelSet& ks) {
  const int64_t k = w.cols(), m = w.rows(), n = x.rows();
  RF_CHECK(x.type == DType::F32 && out.type == DType::F32, "cpu matmul: activations must be f32");
  RF_CHECK(x.cols() == k, "cpu matmul: x has ", x.cols(), " columns, weight has ", k);
  RF_CHECK(out.cols() == m && out.rows() >= n, "cpu matmul: out is ", out.shape_string(), ", expected [", m, ", ", n,
           "]");
  if (n == 0 || m == 0) return;
  const WeightKernel wk = ks.lookup(w.type);
  if (wk.act == ActFormat::None) return matmul_dot_row(pool, x, w, out);
  row_bytes(w.type, uint64_t(k));  // throws on a partial block

  const size_t xrb = act_row_bytes(wk.act, size_t(k));
  const uint8_t* xa;
  if (wk.act == ActFormat::F32) {
    xa = static_cast<const uint8_t*>(x.data);
  } else {
    scratch.reserve(size_t(n) * xrb);
    uint8_t* xq = scratch.xq.data();
    const float* xp = x.ptr<float>();
    auto quant = [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) quantize_act_row(ks, wk.act, xp + t * size_t(k), xq + t * xrb, size_t(k));
    };
    if (n * k >= 32768) pool.parallel_for(size_t(n), 1, quant);
    else quant(0, size_t(n));
    xa = xq;
  }

  const uint8_t* wp = static_cast<const uint8_t*>(w.data);
  const size_t wrow = w.row_bytes();
  float* op = out.ptr<float>();
  const size_t tile = std::max<size_t>(1, kWeightTileBytes / wrow);
  // Decode: enough rows per chunk to amortize the hand-off; prefill: whole tiles.
  const size_t grain = n == 1 ? std::max<size_t>(1, 16384 / size_t(k)) : tile;
  const DotKernel dot = wk.dot;
  pool.parallel_for(size_t(m), grain, [&](size_t r0, size_t r1) {
    for (size_t rb = r0; rb < r1; rb += tile) {
      const size_t re = std::min(r1, rb + tile);
      for (int64_t t = 0; t < n; t += kMaxRows) {
        const int nr = int(std::min<int64_t>(kMaxRows, n - t));
        const uint8_t* xt = xa + size_t(t) * xrb;
        float* ot = op + t * m;
        for (size_t r = rb; r < re; ++r) dot(wp + r * wrow, xt, xrb, nr, size_t(k), ot + r, size_t(m));
      }
    }
  });
}

void matmul(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out) {
  MatmulScratch scratch;
  matmul(pool, x, w, out, scratch, best_kernels());
}

}  // namespace rf::cpu
