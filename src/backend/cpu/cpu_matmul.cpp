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
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_qdot.h"
#include "core/error.h"
#include "core/quant.h"

namespace rf::cpu {
namespace {

// Bytes of weight rows a thread keeps hot while the activation rows pass.
constexpr size_t kWeightTileBytes = 48 * 1024;

// Formats without a kernel in the set (quantized weights in the reference
// set, F8_E4M3_ROW in every set): f32 activations; one row uses the fused
// dequantize-dot, several rows dequantize each weight row once into a
// per-thread buffer and reuse it for every activation row.
void matmul_dot_row(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out) {
  const int64_t k = w.cols(), m = w.rows(), n = x.rows();
  const uint8_t* wp = static_cast<const uint8_t*>(w.data);
  const size_t wrow = w.row_bytes();
  const float* xp = x.ptr<float>();
  float* op = out.ptr<float>();
  const size_t grain = size_t(std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)));
  pool.parallel_for(size_t(m), grain, [&](size_t r0, size_t r1) {
    if (n == 1) {
      for (size_t r = r0; r < r1; ++r) op[r] = dot_row(w.type, wp + r * wrow, xp, size_t(k));
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

}  // namespace

void MatmulScratch::reserve(size_t bytes) {
  if (xq.size() < bytes) xq.resize(bytes);
}

void matmul_multi(ThreadPool& pool, const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                  MatmulScratch& scratch, const KernelSet& ks) {
  RF_CHECK(!ws.empty() && ws.size() == outs.size() && ws.size() <= kMaxMultiWeights, "cpu matmul: ", ws.size(),
           " weights for ", outs.size(), " outputs");
  const int64_t k = ws[0].cols(), n = x.rows();
  RF_CHECK(x.type == DType::F32, "cpu matmul: activations must be f32");
  bool same_format = true;
  for (size_t i = 0; i < ws.size(); ++i) {
    const int64_t m = ws[i].rows();
    RF_CHECK(outs[i].type == DType::F32, "cpu matmul: outputs must be f32");
    RF_CHECK(x.cols() == ws[i].cols(), "cpu matmul: x has ", x.cols(), " columns, weight has ", ws[i].cols());
    RF_CHECK(outs[i].cols() == m && outs[i].rows() >= n, "cpu matmul: out is ", outs[i].shape_string(),
             ", expected [", m, ", ", n, "]");
    same_format = same_format && ks.lookup(ws[i].type).act == ks.lookup(ws[0].type).act;
  }
  if (n == 0) return;
  const WeightKernel wk0 = ks.lookup(ws[0].type);
  if (wk0.act == ActFormat::None || !same_format) {
    for (size_t i = 0; i < ws.size(); ++i) {
      if (ks.lookup(ws[i].type).act == ActFormat::None) matmul_dot_row(pool, x, ws[i], outs[i]);
      else matmul_multi(pool, x, ws.subspan(i, 1), outs.subspan(i, 1), scratch, ks);
    }
    return;
  }

  // The activation rows in the kernels' format, once for every weight.
  const size_t xrb = act_row_bytes(wk0.act, size_t(k));
  const uint8_t* xa;
  if (wk0.act == ActFormat::F32) {
    xa = static_cast<const uint8_t*>(x.data);
  } else {
    for (const Tensor& w : ws) row_bytes(w.type, uint64_t(k));  // throws on a partial block
    scratch.reserve(size_t(n) * xrb);
    uint8_t* xq = scratch.xq.data();
    const float* xp = x.ptr<float>();
    auto quant = [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) quantize_act_row(ks, wk0.act, xp + t * size_t(k), xq + t * xrb, size_t(k));
    };
    if (n * k >= 32768) pool.parallel_for(size_t(n), 1, quant);
    else quant(0, size_t(n));
    xa = xq;
  }

  // The weights' rows laid end to end: [first[i], first[i + 1]) is weight i.
  struct Part {
    const uint8_t* w;
    size_t wrow, tile, m;
    float* out;
    DotKernel dot;
  };
  Part parts[kMaxMultiWeights];
  size_t first[kMaxMultiWeights + 1] = {0};
  size_t min_tile = SIZE_MAX;
  for (size_t i = 0; i < ws.size(); ++i) {
    const size_t wrow = ws[i].row_bytes();
    parts[i] = {static_cast<const uint8_t*>(ws[i].data), wrow, std::max<size_t>(1, kWeightTileBytes / wrow),
                size_t(ws[i].rows()), outs[i].ptr<float>(), ks.lookup(ws[i].type).dot};
    first[i + 1] = first[i] + parts[i].m;
    min_tile = std::min(min_tile, parts[i].tile);
  }
  // Decode: enough rows per chunk to amortize the hand-off; prefill: whole tiles.
  const size_t grain = n == 1 ? std::max<size_t>(1, 16384 / size_t(k)) : min_tile;
  const size_t nw = ws.size();
  pool.parallel_for(first[nw], grain, [&](size_t g0, size_t g1) {
    for (size_t i = 0; i < nw; ++i) {
      const size_t lo = std::max(g0, first[i]), hi = std::min(g1, first[i + 1]);
      if (lo >= hi) continue;
      const Part& p = parts[i];
      const size_t r0 = lo - first[i], r1 = hi - first[i];
      for (size_t rb = r0; rb < r1; rb += p.tile) {
        const size_t re = std::min(r1, rb + p.tile);
        for (int64_t t = 0; t < n; t += kMaxRows) {
          const int nr = int(std::min<int64_t>(kMaxRows, n - t));
          const uint8_t* xt = xa + size_t(t) * xrb;
          float* ot = p.out + size_t(t) * p.m;
          for (size_t r = rb; r < re; ++r) p.dot(p.w + r * p.wrow, xt, xrb, nr, size_t(k), ot + r, p.m);
        }
      }
    }
  });
}

void matmul(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out, MatmulScratch& scratch,
            const KernelSet& ks) {
  Tensor o = out;
  matmul_multi(pool, x, std::span<const Tensor>(&w, 1), std::span<Tensor>(&o, 1), scratch, ks);
}

void matmul(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out) {
  MatmulScratch scratch;
  matmul(pool, x, w, out, scratch, reference_kernels());
}

const KernelSet& kernels_for(CpuMatmul mode) {
  return mode == CpuMatmul::Fast ? best_kernels() : reference_kernels();
}

}  // namespace rf::cpu
