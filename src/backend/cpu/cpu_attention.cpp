// CPU RoPE + paged KV store, and causal attention over paged KV with GQA.
// Angles are computed in double; softmax in double accumulation. Each query
// token attends to its sequence's positions [0, position], or the last
// `window` of them on sliding-window layers; logits optionally soft-capped;
// a head's sink logit, where given, joins the softmax's denominator.
// The cache holds f32, or e4m3 with a scale per (slot, KV head) row
// (core/fp8.h): rows are encoded as they are stored and decoded as read.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/rope_math.h"
#include "core/error.h"
#include "core/fp8.h"

namespace rf::cpu {
namespace {

void rope_row(float* x, int n_heads, int head_dim, int pos, const RopeParams& p, YarnCorrDims corr) {
  const int half = p.n_rot / 2;
  for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
    double theta = double(pos) * std::pow(double(p.freq_base), -double(i0) / double(p.n_rot));
    if (p.freq_factors) theta /= double(p.freq_factors[i0 / 2]);
    double c, s;
    rope_cos_sin<double>(theta, i0, p, corr, &c, &s);
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      const int a = p.neox ? i0 / 2 : i0;
      const int b = p.neox ? i0 / 2 + half : i0 + 1;
      const double x0 = v[a], x1 = v[b];
      v[a] = float(x0 * c - x1 * s);
      v[b] = float(x0 * s + x1 * c);
    }
  }
}

// Row `head` of `slot` in an e4m3 cache: x encoded with its row scale.
void store_fp8_row(const float* x, int hd, uint8_t* q, float* scale) {
  float amax = 0.0f;
  bool nan = false;
  for (int d = 0; d < hd; ++d) {
    amax = std::max(amax, std::fabs(x[d]));
    nan |= std::isnan(x[d]);
  }
  const float s = e4m3_row_scale(nan ? NAN : amax);
  *scale = s;
  for (int d = 0; d < hd; ++d) q[d] = e4m3_from_float(x[d] / s);
}

// One slot's K or V row of every KV head, into the cache.
void store_row(const KVLayer& cache, bool is_k, size_t slot, const float* x) {
  const size_t row = size_t(cache.n_kv_heads) * cache.head_dim, stride = size_t(cache.slot_elems());
  if (cache.type == DType::F32) {
    std::copy_n(x, row, static_cast<float*>(is_k ? cache.k : cache.v) + slot * stride);
    return;
  }
  auto* q = static_cast<uint8_t*>(is_k ? cache.k : cache.v) + slot * stride;
  float* scales = (is_k ? cache.k_scale : cache.v_scale) + slot * size_t(cache.slot_scales());
  for (int h = 0; h < cache.n_kv_heads; ++h)
    store_fp8_row(x + size_t(h) * cache.head_dim, cache.head_dim, q + size_t(h) * cache.head_dim, scales + h);
}

// Head kvh's K or V row of `slot`, decoded to f32 into buf (or pointed at in an f32 cache).
const float* load_row(const KVLayer& cache, bool is_k, size_t slot, int kvh, std::vector<float>& buf) {
  const int hd = cache.head_dim;
  const size_t at = slot * size_t(cache.slot_elems()) + size_t(kvh) * hd;
  if (cache.type == DType::F32) return static_cast<const float*>(is_k ? cache.k : cache.v) + at;
  const uint8_t* q = static_cast<const uint8_t*>(is_k ? cache.k : cache.v) + at;
  const float s = (is_k ? cache.k_scale : cache.v_scale)[slot * size_t(cache.slot_scales()) + size_t(kvh)];
  buf.resize(size_t(hd));
  for (int d = 0; d < hd; ++d) buf[size_t(d)] = e4m3_to_float(q[d]) * s;
  return buf.data();
}

// sum a[i] * b[i] in double, as four interleaved partial sums (one vector
// of doubles; a single chain would wait on each add's latency).
inline double dot_f64(const float* a, const float* b, int n) {
  double s[4] = {0, 0, 0, 0};
  int i = 0;
  for (; i + 4 <= n; i += 4)
    for (int l = 0; l < 4; ++l) s[l] += double(a[i + l]) * double(b[i + l]);
  for (; i < n; ++i) s[0] += double(a[i]) * double(b[i]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

void check_cache_type(const KVLayer& cache) {
  RF_CHECK(cache.type == DType::F32 || (cache.type == DType::F8_E4M3 && cache.k_scale && cache.v_scale),
           "cpu KV cache must be f32 or f8_e4m3 with row scales, not ", dtype_name(cache.type));
}

}  // namespace

void rope_heads(float* x, int n_heads, int head_stride, int pos, const RopeParams& p) {
  rope_row(x, n_heads, head_stride, pos, p,
           yarn_corr_dims(p.n_rot, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow));
}

void rope_store_kv(ThreadPool& pool, Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m, const RopeParams& rope,
                   const KVLayer& cache) {
  const int hd = cache.head_dim, n_kv = cache.n_kv_heads;
  const int n_heads = int(q.cols() / hd);
  RF_CHECK(q.type == DType::F32 && k.type == DType::F32 && v.type == DType::F32, "cpu rope: f32 only");
  RF_CHECK(k.cols() == int64_t(n_kv) * hd && v.cols() == k.cols() && q.cols() == int64_t(n_heads) * hd,
           "cpu rope_store_kv: bad shapes");
  RF_CHECK(rope.n_rot > 0 && rope.n_rot <= hd && rope.n_rot % 2 == 0, "cpu rope: bad n_rot ", rope.n_rot);
  check_cache_type(cache);
  const YarnCorrDims corr = yarn_corr_dims(rope.n_rot, rope.n_ctx_orig, rope.freq_base, rope.beta_fast, rope.beta_slow);
  const int64_t n_slots = int64_t(cache.num_blocks) * cache.block_size;
  pool.parallel_for(size_t(m.n_tokens), 1, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const int pos = m.positions[t];
      rope_row(q.ptr<float>() + t * q.cols(), n_heads, hd, pos, rope, corr);
      rope_row(k.ptr<float>() + t * k.cols(), n_kv, hd, pos, rope, corr);
      const int32_t slot = m.slot_mapping[t];
      if (slot < 0) continue;
      RF_CHECK(slot < n_slots, "KV slot ", slot, " out of range");
      const size_t row = size_t(n_kv) * hd;
      store_row(cache, true, size_t(slot), k.ptr<float>() + t * row);
      store_row(cache, false, size_t(slot), v.ptr<float>() + t * row);
    }
  });
}

void rope_q(ThreadPool& pool, Tensor& q, int32_t head_dim, const StepMeta& m, const RopeParams& rope) {
  RF_CHECK(q.type == DType::F32 && head_dim > 0 && q.cols() % head_dim == 0, "cpu rope_q: bad shapes");
  RF_CHECK(rope.n_rot > 0 && rope.n_rot <= head_dim && rope.n_rot % 2 == 0, "cpu rope: bad n_rot ", rope.n_rot);
  const int n_heads = int(q.cols() / head_dim);
  const YarnCorrDims corr = yarn_corr_dims(rope.n_rot, rope.n_ctx_orig, rope.freq_base, rope.beta_fast, rope.beta_slow);
  pool.parallel_for(size_t(m.n_tokens), 1, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) rope_row(q.ptr<float>() + t * q.cols(), n_heads, head_dim, m.positions[t], rope, corr);
  });
}

void attention(ThreadPool& pool, const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
               Tensor& out) {
  const int hd = p.head_dim, n_heads = p.n_heads, n_kv = p.n_kv_heads;
  RF_CHECK(n_heads % n_kv == 0, "attention: ", n_heads, " heads not divisible by ", n_kv, " KV heads");
  RF_CHECK(q.cols() == int64_t(n_heads) * hd && out.cols() == q.cols(), "cpu attention: bad shapes");
  check_cache_type(cache);
  RF_CHECK(cache.head_dim == hd && cache.n_kv_heads == n_kv, "cpu attention: cache rows of ", cache.n_kv_heads, " x ",
           cache.head_dim, " for ", n_kv, " x ", hd);
  const int group = n_heads / n_kv;
  pool.parallel_for(size_t(m.n_tokens) * n_heads, 1, [&](size_t w0, size_t w1) {
    thread_local std::vector<double> scores;
    thread_local std::vector<double> acc;
    thread_local std::vector<float> row_buf;
    acc.resize(size_t(hd));
    for (size_t w = w0; w < w1; ++w) {
      const size_t t = w / size_t(n_heads);
      const int h = int(w % size_t(n_heads));
      const int kvh = h / group;
      const int seq = m.token_seq[t];
      const int pos = m.positions[t];
      const int32_t* table = m.block_tables + size_t(seq) * m.max_blocks_per_seq;
      const float* qv = q.ptr<float>() + t * q.cols() + size_t(h) * hd;
      const int n_ctx = pos + 1;
      const int first = p.window > 0 ? std::max(0, n_ctx - p.window) : 0;  // keys [first, pos]
      scores.resize(size_t(n_ctx));
      double mx = -INFINITY;
      for (int j = first; j < n_ctx; ++j) {
        const size_t slot = size_t(table[j / m.block_size]) * m.block_size + size_t(j % m.block_size);
        const float* kv = load_row(cache, true, slot, kvh, row_buf);
        double s = dot_f64(qv, kv, hd) * p.scale;
        if (p.softcap > 0.0f) s = double(p.softcap) * std::tanh(s / double(p.softcap));
        scores[j] = s;
        mx = std::max(mx, scores[j]);
      }
      const double sink = p.sinks ? double(p.sinks[h]) : -INFINITY;
      mx = std::max(mx, sink);
      double sum = p.sinks ? std::exp(sink - mx) : 0.0;
      for (int j = first; j < n_ctx; ++j) sum += (scores[j] = std::exp(scores[j] - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int j = first; j < n_ctx; ++j) {
        const size_t slot = size_t(table[j / m.block_size]) * m.block_size + size_t(j % m.block_size);
        const float* vv = load_row(cache, false, slot, kvh, row_buf);
        const double pj = scores[j] / sum;
        for (int d = 0; d < hd; ++d) acc[d] += pj * vv[d];
      }
      float* o = out.ptr<float>() + t * out.cols() + size_t(h) * hd;
      for (int d = 0; d < hd; ++d) o[d] = float(acc[d]);
    }
  });
}

}  // namespace rf::cpu
