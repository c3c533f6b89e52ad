// CPU matmul over stored weight formats: out[n, m] = x[n, k] . w[m, k]^T.
//
// The activation rows are brought once into the format the weight's kernel
// reads (8-bit blocks for quantized weights, f32 as is for float weights;
// cpu_qdot.h), then threads split the weight rows. Within a thread's range,
// weight rows are taken in groups that stay in cache while every group of
// up to kMaxRows activation rows passes over them; each kernel call decodes
// a weight block once for all of those activation rows. One pass may cover
// several weights, each with its own activation rows (matmul_jobs: q/k/v
// on one x, a MoE layer's experts on their gathered rows), so a step's
// hand-offs between threads do not grow with the number of weights.
// Formats without a kernel (F8_E4M3_ROW) use dot_row per row pair.
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

// Bytes of weight rows a thread keeps hot while the activation rows pass:
// float weights stream twice the bytes per product, and tiles of 128 KB
// (in L2) serve their f32 activation rows best (llama-1b f16 prompts on a
// Zen 5 core: 48 KB 105 tok/s, 128 KB 123); the quantized kernels are the
// same at either, and keep 48 KB.
constexpr size_t kWeightTileBytes = 48 * 1024, kFloatWeightTileBytes = 128 * 1024;

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

void matmul_jobs(ThreadPool& pool, std::span<const MatmulJob> jobs, MatmulScratch& scratch, const KernelSet& ks) {
  RF_CHECK(!jobs.empty(), "cpu matmul: no products");
  const int64_t k = jobs[0].w.cols();
  bool same_format = true;
  int64_t rows = 0;  // activation rows to bring into the kernels' format
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MatmulJob& j = jobs[i];
    const int64_t m = j.w.rows();
    RF_CHECK(j.x.type == DType::F32, "cpu matmul: activations must be f32");
    RF_CHECK(j.out.type == DType::F32, "cpu matmul: outputs must be f32");
    RF_CHECK(j.x.cols() == k && j.w.cols() == k, "cpu matmul: x has ", j.x.cols(), " columns, weight has ",
             j.w.cols());
    RF_CHECK(j.out.cols() == m && j.out.rows() >= j.x.rows(), "cpu matmul: out is ", j.out.shape_string(),
             ", expected [", m, ", ", j.x.rows(), "]");
    same_format = same_format && ks.lookup(j.w.type).act == ks.lookup(jobs[0].w.type).act;
    if (i == 0 || j.x.data != jobs[i - 1].x.data) rows += j.x.rows();
  }
  const WeightKernel wk0 = ks.lookup(jobs[0].w.type);
  if (wk0.act == ActFormat::None || !same_format) {
    for (const MatmulJob& j : jobs) {
      if (j.x.rows() == 0) continue;
      Tensor out = j.out;
      if (ks.lookup(j.w.type).act == ActFormat::None) matmul_dot_row(pool, j.x, j.w, out);
      else matmul_jobs(pool, std::span<const MatmulJob>(&j, 1), scratch, ks);
    }
    return;
  }

  // The activation rows in the kernels' format, once per x.
  const size_t xrb = act_row_bytes(wk0.act, size_t(k));
  scratch.parts.resize(jobs.size());
  scratch.first.resize(jobs.size() + 1);
  if (wk0.act != ActFormat::F32) {
    for (const MatmulJob& j : jobs) row_bytes(j.w.type, uint64_t(k));  // throws on a partial block
    scratch.reserve(size_t(rows) * xrb);
  }
  uint8_t* xq = scratch.xq.data();
  size_t at = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MatmulJob& j = jobs[i];
    MatmulPart& p = scratch.parts[i];
    if (i > 0 && j.x.data == jobs[i - 1].x.data) {
      p.xa = scratch.parts[i - 1].xa;
    } else if (wk0.act == ActFormat::F32) {
      p.xa = static_cast<const uint8_t*>(j.x.data);
    } else {
      uint8_t* dst = xq + at * xrb;
      const float* xp = j.x.ptr<float>();
      auto quant = [&](size_t t0, size_t t1) {
        for (size_t t = t0; t < t1; ++t) quantize_act_row(ks, wk0.act, xp + t * size_t(k), dst + t * xrb, size_t(k));
      };
      if (j.x.rows() * k >= 32768) pool.parallel_for(size_t(j.x.rows()), 1, quant);
      else quant(0, size_t(j.x.rows()));
      p.xa = dst;
      at += size_t(j.x.rows());
    }
  }

  // The weights' rows laid end to end: [first[i], first[i + 1]) is part i.
  size_t min_tile = SIZE_MAX;
  bool one_row = true;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MatmulJob& j = jobs[i];
    MatmulPart& p = scratch.parts[i];
    p.w = static_cast<const uint8_t*>(j.w.data);
    p.wrow = j.w.row_bytes();
    p.tile = std::max<size_t>(1, (wk0.act == ActFormat::F32 ? kFloatWeightTileBytes : kWeightTileBytes) / p.wrow);
    p.m = size_t(j.w.rows());
    p.n = j.x.rows();
    p.out = j.out.ptr<float>();
    p.dot = ks.lookup(j.w.type).dot;
    p.dot2 = ks.lookup(j.w.type).dot2;
    scratch.first[i + 1] = scratch.first[i] + (p.n > 0 ? p.m : 0);
    min_tile = std::min(min_tile, p.tile);
    one_row = one_row && p.n <= 1;
  }
  const size_t total = scratch.first[jobs.size()];
  if (total == 0) return;
  // Decode: enough rows per chunk to amortize the hand-off; prefill: whole tiles.
  const size_t grain = one_row ? std::max<size_t>(1, 16384 / size_t(k)) : min_tile;
  const MatmulPart* parts = scratch.parts.data();
  const size_t* first = scratch.first.data();
  const size_t np = jobs.size();
  pool.parallel_for(total, grain, [&](size_t g0, size_t g1) {
    // The first part with rows at or after g0.
    size_t i = size_t(std::upper_bound(first + 1, first + np + 1, g0) - (first + 1));
    for (; i < np && first[i] < g1; ++i) {
      const size_t lo = std::max(g0, first[i]), hi = std::min(g1, first[i + 1]);
      if (lo >= hi) continue;
      const MatmulPart& p = parts[i];
      const size_t r0 = lo - first[i], r1 = hi - first[i];
      for (size_t rb = r0; rb < r1; rb += p.tile) {
        const size_t re = std::min(r1, rb + p.tile);
        for (int64_t t = 0; t < p.n; t += kMaxRows) {
          const int nr = int(std::min<int64_t>(kMaxRows, p.n - t));
          const uint8_t* xt = p.xa + size_t(t) * xrb;
          float* ot = p.out + size_t(t) * p.m;
          size_t r = rb;
          if (p.dot2 && nr > 1)  // (one activation row: streaming one weight row at a time reads faster)
            for (; r + 2 <= re; r += 2) p.dot2(p.w + r * p.wrow, p.wrow, xt, xrb, nr, size_t(k), ot + r, p.m);
          for (; r < re; ++r) p.dot(p.w + r * p.wrow, xt, xrb, nr, size_t(k), ot + r, p.m);
        }
      }
    }
  });
}

void matmul_multi(ThreadPool& pool, const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                  MatmulScratch& scratch, const KernelSet& ks) {
  RF_CHECK(!ws.empty() && ws.size() == outs.size() && ws.size() <= kMaxMultiWeights, "cpu matmul: ", ws.size(),
           " weights for ", outs.size(), " outputs");
  MatmulJob jobs[kMaxMultiWeights];
  for (size_t i = 0; i < ws.size(); ++i) jobs[i] = {x, ws[i], outs[i]};
  if (x.rows() == 0) return;
  matmul_jobs(pool, std::span<const MatmulJob>(jobs, ws.size()), scratch, ks);
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
