// GPU test helpers: skip without a GPU (fail instead under
// ROCMFORGE_REQUIRE=gpu), device buffers from host vectors, the
// activations as the GPU's matmuls read them (op_test_util.h holds the
// helpers every backend's tests share).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/fp16.h"
#include "core/fp8.h"
#include "core/quant.h"
#include "op/op_test_util.h"
#include "testdata.h"

#define RF_REQUIRE_GPU()                                                                     \
  do {                                                                                       \
    if (::rf::CudaBackend::device_count() == 0) {                                            \
      if (::rf::env().require_gpu) FAIL() << "no CUDA device found";                         \
      GTEST_SKIP() << "no CUDA device";                                                      \
    }                                                                                        \
  } while (0)

namespace rf::test {

// x after the GPU's 8-bit quantization of activations: per 32, d = max |x|
// / 127 and x = d * round(x / d).
inline std::vector<float> q8_activations(std::vector<float> x) {
  for (size_t b = 0; b + 32 <= x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
    for (size_t i = b; i < b + 32; ++i) x[i] = d * float(std::nearbyint(x[i] * inv));
  }
  return x;
}
// The activations x (n rows of k) as the GPU's matmul of this weight format
// reads them: x itself, or, where the backend quantizes them to 8 bits
// (CudaBackend::gemv_quantizes_activations), q8_activations(x).
inline std::vector<float> gemv_activations(const CudaBackend& gpu, DType w_type, int n, int k, std::vector<float> x) {
  if (!gpu.gemv_quantizes_activations(w_type, n, k)) return x;
  return q8_activations(std::move(x));
}

// Each row of x (rows of k) through e4m3 with its own scale (core/fp8.h),
// as the FP8 tensor-core matmul quantizes activations.
inline std::vector<float> e4m3_rows(std::vector<float> x, int k) {
  for (size_t t = 0; t < x.size() / size_t(k); ++t) {
    float* row = x.data() + size_t(t) * k;
    float amax = 0.0f;
    for (int i = 0; i < k; ++i) amax = std::max(amax, std::fabs(row[i]));
    const float s = e4m3_row_scale(amax);
    for (int i = 0; i < k; ++i) row[i] = e4m3_to_float(e4m3_from_float(row[i] / s)) * s;
  }
  return x;
}

// The activations x (n rows) as the GPU's matmul of the weight w (host
// tensor) reads them into `out_type`: on FP8 tensor cores
// (CudaBackend::matmul_runs_fp8) through e4m3 row by row, else as
// gemv_activations.
inline std::vector<float> matmul_activations(CudaBackend& gpu, const Tensor& w, int n, DType out_type,
                                             std::vector<float> x) {
  const int k = int(w.cols());
  if (!gpu.matmul_runs_fp8(w, n, out_type)) return gemv_activations(gpu, w.type, n, k, std::move(x));
  return e4m3_rows(std::move(x), k);
}

// Small explicit budgets so GPU tests can run in parallel. FP8 weights
// multiply e4m3 activations in batches past 8 rows unless
// `fp8_activations` is false (then every batch keeps f16 activations, as
// the CPU reference and batch-invariance checks need).
inline std::unique_ptr<CudaBackend> make_gpu(bool fp8_activations = true) {
  CudaOptions o;
  o.dequant_scratch_bytes = size_t(32) << 20;
  if (!fp8_activations) o.tune = [](gpu::Tuning& t) { t.fp8_gemm_min_rows = 0; };
  return std::make_unique<CudaBackend>(o);
}

// A device copy of host data.
template <typename T>
void* upload(Backend& gpu, const std::vector<T>& host) {
  void* p = gpu.alloc(host.size() * sizeof(T), "test buffer");
  gpu.copy_to_device(p, host.data(), host.size() * sizeof(T));
  return p;
}

template <typename T>
std::vector<T> download(Backend& gpu, const void* p, size_t n) {
  std::vector<T> h(n);
  gpu.copy_to_host(h.data(), p, n * sizeof(T));
  return h;
}

// Limits for one token's mixture-of-experts ops (reserve()'s expert
// workspace; the attention fields minimal).
inline BackendLimits moe_limits(int max_tokens, int n_expert, int n_used, int expert_ff, int n_embd) {
  BackendLimits lim;
  lim.max_tokens = max_tokens;
  lim.max_seqs = 4;
  lim.max_blocks_per_seq = 4;
  lim.max_logits = 4;
  lim.vocab = 16;
  lim.max_weight_elems = int64_t(n_expert) * expert_ff * n_embd;
  lim.n_heads = lim.head_dim = lim.n_kv_heads = 1;
  lim.n_expert = n_expert;
  lim.n_expert_used = n_used;
  lim.expert_ff = expert_ff;
  lim.n_embd = n_embd;
  return lim;
}

}  // namespace rf::test
