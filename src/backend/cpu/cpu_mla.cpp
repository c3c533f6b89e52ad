// CPU multi-head latent attention (DeepSeek V2/V3; backend.h MlaParams):
// the RoPE of q's and kv's RoPE dims, the RMSNorm of the latent c and the
// store of [c | k_rope] as the one K row of the compressed cache; then
// attention in the latent space: each head's no-RoPE query absorbed into
// the latent through attn_k_b, scores against the cached rows, the
// softmax-weighted sum of the latents, and attn_v_b of it. Sums in double;
// attn_k_b / attn_v_b rows dequantized as read (any stored format). The
// scratch tensors of attention_mla are not needed here.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/quant.h"

namespace rf::cpu {
namespace {

void check_mla(const MlaParams& p, const KVLayer& cache, const char* op) {
  RF_CHECK(p.n_heads > 0 && p.nope > 0 && p.rope > 0 && p.rope % 2 == 0 && p.lora > 0 && p.v > 0, "cpu ", op,
           ": bad shape (", p.n_heads, " heads of ", p.nope, "+", p.rope, ", latent ", p.lora, ", value ", p.v, ")");
  RF_CHECK(cache.type == DType::F32 && cache.k && cache.n_kv_heads == 1 && cache.head_dim == p.kv_row(), "cpu ", op,
           ": the compressed cache must hold one f32 row of ", p.kv_row(), " per slot, not ", cache.n_kv_heads, " x ",
           cache.head_dim, " ", dtype_name(cache.type));
}

// Row r of a [rows, cols] weight of any stored format, as f32 into dst.
void weight_row(const Tensor& w, int64_t r, float* dst) {
  dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + size_t(r) * w.row_bytes(), dst, size_t(w.cols()));
}

}  // namespace

void mla_rope_store_kv(ThreadPool& pool, Tensor& q, Tensor& kv, const Tensor& kv_norm, float eps, const StepMeta& m,
                       const RopeParams& rope, const MlaParams& p, const KVLayer& cache) {
  check_mla(p, cache, "mla_rope_store_kv");
  RF_CHECK(q.type == DType::F32 && kv.type == DType::F32 && q.cols() == int64_t(p.n_heads) * p.q_head() &&
               kv.cols() == p.kv_row() && kv_norm.type == DType::F32 && kv_norm.numel() == p.lora &&
               rope.n_rot == p.rope,
           "cpu mla_rope_store_kv: bad shapes (q ", q.shape_string(), ", kv ", kv.shape_string(), ", norm ",
           kv_norm.shape_string(), ", n_rot ", rope.n_rot, ")");
  const int64_t n_slots = int64_t(cache.num_blocks) * cache.block_size;
  const float* nw = kv_norm.ptr<float>();
  pool.parallel_for(size_t(m.n_tokens), 1, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const int pos = m.positions[t];
      rope_heads(q.ptr<float>() + t * q.cols() + p.nope, p.n_heads, p.q_head(), pos, rope);
      float* row = kv.ptr<float>() + t * kv.cols();
      double ss = 0;
      for (int i = 0; i < p.lora; ++i) ss += double(row[i]) * row[i];
      const float scale = float(1.0 / std::sqrt(ss / double(p.lora) + double(eps)));
      for (int i = 0; i < p.lora; ++i) row[i] = row[i] * scale * nw[i];
      rope_heads(row + p.lora, 1, p.rope, pos, rope);
      const int32_t slot = m.slot_mapping[t];
      if (slot < 0) continue;
      RF_CHECK(slot < n_slots, "KV slot ", slot, " out of range");
      std::copy_n(row, p.kv_row(), static_cast<float*>(cache.k) + size_t(slot) * size_t(cache.slot_elems()));
    }
  });
}

void attention_mla(ThreadPool& pool, const Tensor& q, const KVLayer& cache, const StepMeta& m, const MlaParams& p,
                   Tensor& out) {
  check_mla(p, cache, "attention_mla");
  RF_CHECK(q.type == DType::F32 && out.type == DType::F32 && q.cols() == int64_t(p.n_heads) * p.q_head() &&
               out.cols() == int64_t(p.n_heads) * p.v && q.rows() >= m.n_tokens && out.rows() >= m.n_tokens,
           "cpu attention_mla: q ", q.shape_string(), ", out ", out.shape_string(), " for ", p.n_heads, " heads of ",
           p.q_head(), " -> ", p.v);
  RF_CHECK(p.w_kb.cols() == p.nope && p.w_kb.rows() == int64_t(p.n_heads) * p.lora && p.w_vb.cols() == p.lora &&
               p.w_vb.rows() == int64_t(p.n_heads) * p.v,
           "cpu attention_mla: attn_k_b ", p.w_kb.shape_string(), ", attn_v_b ", p.w_vb.shape_string(),
           " for the shape");
  const int L = p.lora, R = p.rope, W = p.kv_row();
  const float* k_cache = static_cast<const float*>(cache.k);
  pool.parallel_for(size_t(m.n_tokens) * p.n_heads, 1, [&](size_t w0, size_t w1) {
    thread_local std::vector<double> q_lat, scores, o;
    thread_local std::vector<float> wrow;
    q_lat.resize(size_t(W));
    o.resize(size_t(L));
    wrow.resize(size_t(std::max(p.nope, L)));
    for (size_t w = w0; w < w1; ++w) {
      const size_t t = w / size_t(p.n_heads);
      const int h = int(w % size_t(p.n_heads));
      const float* qh = q.ptr<float>() + t * q.cols() + size_t(h) * p.q_head();
      for (int i = 0; i < L; ++i) {  // the no-RoPE query absorbed into the latent
        weight_row(p.w_kb, int64_t(h) * L + i, wrow.data());
        double s = 0;
        for (int d = 0; d < p.nope; ++d) s += double(wrow[size_t(d)]) * qh[d];
        q_lat[size_t(i)] = s;
      }
      for (int d = 0; d < R; ++d) q_lat[size_t(L + d)] = qh[p.nope + d];
      const int seq = m.token_seq[t], n_ctx = m.positions[t] + 1;
      const int32_t* table = m.block_tables + size_t(seq) * m.max_blocks_per_seq;
      auto row_of = [&](int j) {
        const size_t slot = size_t(table[j / m.block_size]) * m.block_size + size_t(j % m.block_size);
        return k_cache + slot * size_t(cache.slot_elems());
      };
      scores.resize(size_t(n_ctx));
      double mx = -INFINITY;
      for (int j = 0; j < n_ctx; ++j) {
        const float* kr = row_of(j);
        double s = 0;
        for (int d = 0; d < W; ++d) s += q_lat[size_t(d)] * kr[d];
        scores[size_t(j)] = s * p.scale;
        mx = std::max(mx, scores[size_t(j)]);
      }
      double sum = 0;
      for (int j = 0; j < n_ctx; ++j) sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - mx));
      std::fill(o.begin(), o.end(), 0.0);
      for (int j = 0; j < n_ctx; ++j) {
        const float* kr = row_of(j);
        const double pj = scores[size_t(j)] / sum;
        for (int i = 0; i < L; ++i) o[size_t(i)] += pj * kr[i];
      }
      float* oh = out.ptr<float>() + t * out.cols() + size_t(h) * p.v;
      for (int j = 0; j < p.v; ++j) {  // the value projection of the latent
        weight_row(p.w_vb, int64_t(h) * p.v + j, wrow.data());
        double s = 0;
        for (int i = 0; i < L; ++i) s += double(wrow[size_t(i)]) * o[size_t(i)];
        oh[j] = float(s);
      }
    }
  });
}

}  // namespace rf::cpu
