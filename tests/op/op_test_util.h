// Helpers shared by the op tests of every backend: random inputs and
// weights, f16 rounding, normalized error, paged batches, test names.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/batch.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "random_values.h"

namespace rf::test {

// One sequence of a test batch: context length (its new tokens included),
// new tokens (the last n_new of the context) and its block table.
struct BatchSeq {
  int ctx, n_new;
  std::vector<int32_t> blocks;
};

// A batch of those sequences (token ids 1), logits for every token.
inline Batch make_batch(int32_t block_size, int32_t max_blocks_per_seq, const std::vector<BatchSeq>& seqs) {
  Batch b;
  b.reset(block_size, max_blocks_per_seq);
  for (const auto& s : seqs) {
    std::vector<int32_t> toks(size_t(s.n_new), 1);
    b.add_sequence(toks, s.ctx - s.n_new, s.blocks, true);
  }
  return b;
}

// rows x cols values `f` stored as `type` at `out`, row after row, on every
// host thread (the MoE cases' experts hold ~10^8 values: seconds on one);
// with `values`, each row dequantized back there too.
inline void quantize_rows(DType type, const float* f, int rows, int cols, uint8_t* out, float* values = nullptr) {
  const size_t rb = row_bytes(type, uint64_t(cols));
  ThreadPool pool;
  pool.parallel_for(size_t(rows), 16, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      quantize_row(type, f + r * size_t(cols), out + r * rb, size_t(cols));
      if (values) dequantize_row(type, out + r * rb, values + r * size_t(cols), size_t(cols));
    }
  });
}

// rows x cols values from N(0, scale^2) stored as `type`, row after row.
inline std::vector<uint8_t> random_weight(DType type, int rows, int cols, std::mt19937& rng, float scale) {
  const auto f = randn(size_t(rows) * size_t(cols), rng, scale);
  std::vector<uint8_t> w(row_bytes(type, uint64_t(cols)) * size_t(rows));
  quantize_rows(type, f.data(), rows, cols, w.data());
  return w;
}

// Rounds to f16 and back (what the GPU's activations hold).
inline std::vector<float> round_f16(std::vector<float> v) {
  for (auto& x : v) x = f16_to_f32(f32_to_f16(x));
  return v;
}

inline std::vector<uint16_t> to_f16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_f16(v[i]);
  return h;
}

inline std::vector<float> from_f16(const std::vector<uint16_t>& h) {
  std::vector<float> v(h.size());
  for (size_t i = 0; i < h.size(); ++i) v[i] = f16_to_f32(h[i]);
  return v;
}

// ||a - b|| / ||b||
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// A gtest parameter name from a string parameter: every character but
// letters and digits as '_'.
inline std::string param_name(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

}  // namespace rf::test
