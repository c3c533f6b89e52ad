// Op cases of multi-head latent attention (DeepSeek V2/V3; backend.h
// MlaParams): mla_rope_store_kv (each q head's RoPE dims and the kv row's
// turned, NORM pairs with DeepSeek's YaRN; the latent RMS-normed; rows into
// scattered slots, a padded slot of -1) and attention_mla over mixed
// batches (prefill chunks and decodes, contexts past block boundaries) at
// the tiny model's shape and at DeepSeek-V3's per-head sizes (fewer heads).
#include <algorithm>
#include <cmath>

#include "core/quant.h"
#include "op/op_cases.h"
#include "op/op_test_util.h"

namespace rf::test {
namespace {

struct MlaShape {
  const char* name;
  int n_heads, nope, rope, lora, v;
};

MlaParams mla_params(const MlaShape& s) {
  MlaParams p;
  p.n_heads = s.n_heads;
  p.nope = s.nope;
  p.rope = s.rope;
  p.lora = s.lora;
  p.v = s.v;
  p.scale = 1.0f / std::sqrt(float(s.nope + s.rope));
  return p;
}

// DeepSeek-V3's RoPE: NORM pairs, YaRN factor 40 from 4096 positions, the
// rotation not magnitude-scaled.
RopeParams mla_rope(int n_rot) {
  RopeParams r;
  r.n_rot = n_rot;
  r.neox = false;
  r.freq_base = 10000.0f;
  r.freq_scale = 1.0f / 40.0f;
  r.ext_factor = 1.0f;
  r.attn_factor = 1.0f / (1.0f + 0.1f * std::log(40.0f));
  r.n_ctx_orig = 4096;
  return r;
}

// mla_rope_store_kv of 5 tokens at far positions into slots scattered over
// 4 blocks of 4, the last one's slot -1. Outputs: q and kv after the op,
// the cache's K rows.
OpCase rope_store_case(const MlaShape& s) {
  const int n_tok = 5, bs = 4, nb = 4, qd = s.n_heads * (s.nope + s.rope), W = s.lora + s.rope;
  const RopeParams rope = mla_rope(s.rope);
  const float eps = 1e-6f;
  OpCase c;
  c.name = std::string("mla_rope_store_kv_") + s.name;
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {round_f16(randn(size_t(n_tok) * qd, rng)), round_f16(randn(size_t(n_tok) * W, rng)),
            randn(size_t(s.lora), rng, 0.2f)};
    for (float& w : in.f[2]) w += 1.0f;
    in.batch.reset(bs, nb);
    in.batch.add_sequence(std::vector<int32_t>(n_tok, 1), 0, std::vector<int32_t>{3, 1, 0, 2}, false);
    in.batch.positions = {1000, 1001, 1002, 1003, 5000};
    in.batch.groups[0].slot_mapping = {13, 5, 0, 9, -1};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, nb, s.n_heads, W, 1));
    DeviceBuffers b(be);
    const DType a = be.activation_type();
    Tensor q = b.upload(in.f[0], a, qd, n_tok), kv = b.upload(in.f[1], a, W, n_tok);
    const std::vector<float> zero(size_t(nb) * bs * W, 0.0f);
    const KVLayer cache = b.kv(zero, zero, nb, bs, 1, W);
    const StepMeta m = be.upload_step(in.batch);
    be.mla_rope_store_kv(q, kv, b.f32(in.f[2], s.lora), eps, m, rope, mla_params(s), cache);
    return OpOutputs{b.read(q), b.read(kv), b.read(cache.k, cache.type, zero.size())};
  };
  c.reference = [=](const OpInputs& in) {
    RefOutputs out(3);
    out[0].assign(in.f[0].begin(), in.f[0].end());
    out[1].assign(in.f[1].begin(), in.f[1].end());
    out[2].assign(size_t(nb) * bs * W, 0.0);
    for (int t = 0; t < n_tok; ++t) {
      const int pos = in.batch.positions[size_t(t)];
      rope_ref(out[0].data() + size_t(t) * qd + s.nope, s.n_heads, s.nope + s.rope, pos, rope, {});
      double* row = out[1].data() + size_t(t) * W;
      double ss = 0;
      for (int i = 0; i < s.lora; ++i) ss += row[i] * row[i];
      const double inv = 1.0 / std::sqrt(ss / s.lora + double(eps));
      for (int i = 0; i < s.lora; ++i) row[i] *= inv * in.f[2][size_t(i)];
      rope_ref(row + s.lora, 1, s.rope, pos, rope, {});
      const int slot = in.batch.groups[0].slot_mapping[size_t(t)];
      if (slot < 0) continue;
      for (int i = 0; i < W; ++i) out[2][size_t(slot) * W + i] = double(float(row[i]));  // (as the op rounded it)
    }
    return out;
  };
  return c;
}

// attention_mla over a cache of random compressed rows; each sequence's
// blocks scattered (block b of sequence s at (7 s + 5 b) mod num_blocks);
// attn_k_b and attn_v_b f16, scaled so that the absorbed queries and the
// outputs stay near 1. Output: out.
OpCase attention_case(const MlaShape& s, const char* what, const std::vector<std::pair<int, int>>& seqs) {
  const int bs = 16, nb = 32, max_blocks = 16, qd = s.n_heads * (s.nope + s.rope), W = s.lora + s.rope;
  const DType wt = DType::F16;
  OpCase c;
  c.name = std::string("attention_mla_") + s.name + "_" + what;
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.batch.reset(bs, max_blocks);
    int sq = 0;
    for (auto [ctx, n_new] : seqs) {
      std::vector<int32_t> blocks;
      for (int i = 0; i < (ctx + bs - 1) / bs; ++i) blocks.push_back((7 * sq + 5 * i) % nb);
      in.batch.add_sequence(std::vector<int32_t>(size_t(n_new), 1), ctx - n_new, blocks, true);
      ++sq;
    }
    in.f = {round_f16(randn(size_t(in.batch.n_tokens()) * qd, rng)), round_f16(randn(size_t(nb) * bs * W, rng))};
    in.w = {random_weight(wt, s.n_heads * s.lora, s.nope, rng, 1.0f / std::sqrt(float(s.nope))),
            random_weight(wt, s.n_heads * s.v, s.lora, rng, 1.0f / std::sqrt(float(s.lora)))};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    const int n = in.batch.n_tokens();
    be.reserve(step_limits(std::max(n, 16), 8, max_blocks, s.n_heads, W, 1));
    DeviceBuffers b(be);
    const DType a = be.activation_type();
    Tensor q = b.upload(in.f[0], a, qd, n), out = b.zeros(a, s.n_heads * s.v, n);
    Tensor q_lat = b.zeros(a, s.n_heads * W, n), o_lat = b.zeros(a, s.n_heads * s.lora, n);
    const KVLayer cache = b.kv(in.f[1], in.f[1], nb, bs, 1, W);
    MlaParams p = mla_params(s);
    p.w_kb = b.weight(in.w[0], wt, s.nope, s.n_heads * s.lora);
    p.w_vb = b.weight(in.w[1], wt, s.lora, s.n_heads * s.v);
    const StepMeta m = be.upload_step(in.batch);
    be.attention_mla(q, cache, m, p, q_lat, o_lat, out);
    return OpOutputs{b.read(out)};
  };
  c.reference = [=](const OpInputs& in) {
    std::vector<float> kb(size_t(s.n_heads) * s.lora * s.nope), vb(size_t(s.n_heads) * s.v * s.lora);
    for (int r = 0; r < s.n_heads * s.lora; ++r)
      dequantize_row(wt, in.w[0].data() + r * row_bytes(wt, s.nope), kb.data() + size_t(r) * s.nope, s.nope);
    for (int r = 0; r < s.n_heads * s.v; ++r)
      dequantize_row(wt, in.w[1].data() + r * row_bytes(wt, s.lora), vb.data() + size_t(r) * s.lora, s.lora);
    const Batch& bt = in.batch;
    const int n = bt.n_tokens();
    const double scale = double(mla_params(s).scale);
    std::vector<double> out(size_t(n) * s.n_heads * s.v);
    for (int t = 0; t < n; ++t) {
      const int sq = bt.token_seq[size_t(t)], pos = bt.positions[size_t(t)];
      const int32_t* table = bt.groups[0].block_tables.data() + size_t(sq) * max_blocks;
      for (int h = 0; h < s.n_heads; ++h) {
        // The per-head keys and values expanded from the latents: k_j =
        // [kb[h] c_j | k_rope_j], v_j = vb[h] c_j (what the op must not build).
        const float* qh = in.f[0].data() + size_t(t) * qd + size_t(h) * (s.nope + s.rope);
        std::vector<double> sc, acc(size_t(s.v), 0.0);
        std::vector<std::vector<double>> vals;
        for (int j = 0; j <= pos; ++j) {
          const float* kr = in.f[1].data() + (size_t(table[j / bs]) * bs + size_t(j % bs)) * W;
          double d = 0;
          for (int i = 0; i < s.nope; ++i) {
            double k_nope = 0;
            for (int r = 0; r < s.lora; ++r) k_nope += double(kb[(size_t(h) * s.lora + r) * s.nope + i]) * kr[r];
            d += double(qh[i]) * k_nope;
          }
          for (int i = 0; i < s.rope; ++i) d += double(qh[s.nope + i]) * kr[s.lora + i];
          sc.push_back(d * scale);
          std::vector<double> v(size_t(s.v), 0.0);
          for (int o = 0; o < s.v; ++o)
            for (int r = 0; r < s.lora; ++r) v[size_t(o)] += double(vb[(size_t(h) * s.v + o) * s.lora + r]) * kr[r];
          vals.push_back(std::move(v));
        }
        const double mx = *std::max_element(sc.begin(), sc.end());
        double z = 0;
        for (double& x : sc) z += (x = std::exp(x - mx));
        for (size_t j = 0; j < sc.size(); ++j)
          for (int o = 0; o < s.v; ++o) acc[size_t(o)] += sc[j] / z * vals[j][size_t(o)];
        for (int o = 0; o < s.v; ++o) out[(size_t(t) * s.n_heads + h) * s.v + o] = acc[size_t(o)];
      }
    }
    return RefOutputs{out};
  };
  // The CPU sums in double over f32 rows (~1e-7); a GPU rounds the
  // absorbed queries and the weighted latents to f16 (2 roundings beside
  // attention's own): tol_f16.
  return c;
}

}  // namespace

void add_mla_cases(std::vector<OpCase>& cases) {
  // The tiny model's shape, and DeepSeek-V3's per head (4 of its 128 heads).
  const MlaShape tiny{"tiny_h4", 4, 16, 8, 32, 16}, v3{"v3_h4", 4, 128, 64, 512, 128};
  cases.push_back(rope_store_case(tiny));
  cases.push_back(rope_store_case(v3));
  // A prefill chunk from position 0, one later in its sequence crossing a
  // block boundary, decodes of a first token and past a block boundary.
  const std::vector<std::pair<int, int>> mixed = {{40, 40}, {1, 1}, {17, 1}, {70, 21}, {33, 1}};
  const std::vector<std::pair<int, int>> decode = {{200, 1}, {1, 1}, {129, 1}};
  cases.push_back(attention_case(tiny, "mixed", mixed));
  cases.push_back(attention_case(v3, "decode", decode));
  cases.push_back(attention_case(v3, "mixed", {{24, 24}, {17, 1}, {40, 9}}));
}

}  // namespace rf::test
