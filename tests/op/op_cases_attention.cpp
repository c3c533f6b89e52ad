// Op cases of attention: RoPE with the paged KV store (normal and NeoX,
// partial rotary, frequency factors, linear and YaRN scaling; scattered
// slots, a padded slot of -1; into slots a wider layer's stride apart),
// RoPE of q alone, and paged attention over mixed batches (prefill chunks
// and decodes, contexts past block boundaries, GQA, sliding windows, logit
// soft-capping, attention sinks, head size 512, slots a wider stride apart).
#include <algorithm>
#include <cmath>

#include "op/op_cases.h"
#include "op/op_test_util.h"

namespace rf::test {
namespace {

double yarn_ramp_ref(double low, double high, int i0) {
  const double y = (i0 / 2 - low) / std::max(0.001, high - low);
  return 1.0 - std::min(1.0, std::max(0.0, y));
}

}  // namespace

void rope_ref(double* x, int heads, int hd, int pos, const RopeParams& p, const std::vector<float>& ff) {
  auto corr_dim = [&](double beta) {
    return p.n_rot * std::log(p.n_ctx_orig / (beta * 2 * M_PI)) / (2 * std::log(double(p.freq_base)));
  };
  const double low = std::max(0.0, std::floor(corr_dim(p.beta_fast)));
  const double high = std::min(double(p.n_rot - 1), std::ceil(corr_dim(p.beta_slow)));
  for (int h = 0; h < heads; ++h)
    for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
      double extrap = pos * std::pow(double(p.freq_base), -double(i0) / p.n_rot);
      if (!ff.empty()) extrap /= ff[size_t(i0 / 2)];
      const double interp = p.freq_scale * extrap;
      double theta = interp, mscale = p.attn_factor;
      if (p.ext_factor != 0) {
        const double mix = yarn_ramp_ref(low, high, i0) * p.ext_factor;
        theta = interp * (1 - mix) + extrap * mix;
        mscale *= 1 + 0.1 * std::log(1 / double(p.freq_scale));
      }
      const int a = p.neox ? i0 / 2 : i0, b = p.neox ? i0 / 2 + p.n_rot / 2 : i0 + 1;
      const double xa = x[h * hd + a], xb = x[h * hd + b];
      x[h * hd + a] = (xa * std::cos(theta) - xb * std::sin(theta)) * mscale;
      x[h * hd + b] = (xa * std::sin(theta) + xb * std::cos(theta)) * mscale;
    }
}

namespace {

struct RopeVariant {
  const char* name;
  bool neox;
  int n_rot;
  float freq_scale, ext_factor;
  bool factors;
};

// rope_store_kv of 5 tokens at far positions (angles must stay exact) into
// slots scattered over 4 blocks of 4, the last token's slot -1 (not
// stored). Outputs: q and k roped, the K and V caches. slot_stride > kvd:
// the cache's slots that many elements apart (a narrower layer's: the rest
// of each slot stays as it was). q_only: rope_q (q alone, nothing stored;
// output q). pos0: the first token's position (past 100K: a 128K context's
// angles, with llama3's frequency factors or YaRN).
OpCase rope_case(const RopeVariant& rv, int slot_stride = 0, bool q_only = false, int pos0 = 1000) {
  const int hd = 64, n_heads = 4, n_kv = 2, n_tok = 5, bs = 4, nb = 4, kvd = n_kv * hd, qd = n_heads * hd;
  const int stride = slot_stride > 0 ? slot_stride : kvd;
  RopeParams p;
  p.n_rot = rv.n_rot;
  p.neox = rv.neox;
  p.freq_base = 500000.0f;
  p.freq_scale = rv.freq_scale;
  p.ext_factor = rv.ext_factor;
  p.n_ctx_orig = 8192;
  OpCase c;
  c.name = std::string(q_only ? "rope_q_" : "rope_store_kv_") + rv.name +
           (slot_stride > 0 ? "_stride" + std::to_string(slot_stride) : "") +
           (pos0 != 1000 ? "_at" + std::to_string(pos0) : "");
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.f = {round_f16(randn(size_t(n_tok) * qd, rng)), round_f16(randn(size_t(n_tok) * kvd, rng)),
            round_f16(randn(size_t(n_tok) * kvd, rng)), {}};
    if (rv.factors) {
      in.f[3] = randn(size_t(rv.n_rot / 2), rng);
      for (auto& f : in.f[3]) f = 1.0f + std::abs(f) * 4.0f;
    }
    in.batch.reset(bs, nb);
    in.batch.add_sequence(std::vector<int32_t>(n_tok, 1), 0, std::vector<int32_t>{3, 1, 0, 2}, false);
    in.batch.positions = {pos0, pos0 + 1, pos0 + 2, pos0 + 3, pos0 + 4};
    in.batch.groups[0].slot_mapping = {13, 5, 0, 9, -1};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    be.reserve(step_limits(16, 4, nb, n_heads, hd, n_kv));
    DeviceBuffers b(be);
    const DType a = be.activation_type();
    Tensor q = b.upload(in.f[0], a, qd, n_tok), k = b.upload(in.f[1], a, kvd, n_tok), v = b.upload(in.f[2], a, kvd, n_tok);
    // (ones outside the layer's rows: a store past them would show)
    const std::vector<float> init(size_t(nb) * bs * stride, 1.0f);
    const KVLayer cache = b.kv(init, init, nb, bs, n_kv, hd, stride);
    RopeParams pr = p;
    if (rv.factors) pr.freq_factors = static_cast<const float*>(b.f32(in.f[3], rv.n_rot / 2).data);
    const StepMeta m = be.upload_step(in.batch);
    if (q_only) {
      be.rope_q(q, hd, m, pr);
      return OpOutputs{b.read(q)};
    }
    be.rope_store_kv(q, k, v, m, pr, cache);
    return OpOutputs{b.read(q), b.read(k), b.read(cache.k, cache.type, init.size()),
                     b.read(cache.v, cache.type, init.size())};
  };
  c.reference = [=](const OpInputs& in) {
    RefOutputs out(4);
    out[0].assign(in.f[0].begin(), in.f[0].end());
    out[1].assign(in.f[1].begin(), in.f[1].end());
    out[2].assign(size_t(nb) * bs * stride, 1.0);
    out[3].assign(out[2].size(), 1.0);
    for (int t = 0; t < n_tok; ++t) {
      rope_ref(out[0].data() + size_t(t) * qd, n_heads, hd, in.batch.positions[size_t(t)], p, in.f[3]);
      rope_ref(out[1].data() + size_t(t) * kvd, n_kv, hd, in.batch.positions[size_t(t)], p, in.f[3]);
      const int slot = in.batch.groups[0].slot_mapping[size_t(t)];
      if (slot < 0) continue;
      for (int i = 0; i < kvd; ++i) {
        // the cache holds k as the op rounded it (f32 on the CPU)
        out[2][size_t(slot) * stride + i] = double(float(out[1][size_t(t) * kvd + i]));
        out[3][size_t(slot) * stride + i] = in.f[2][size_t(t) * kvd + i];
      }
    }
    if (q_only) out.resize(1);
    return out;
  };
  return c;
}

struct AttnVariant {
  std::string name;
  int hd, n_heads, n_kv;
  int window = 0;
  float softcap = 0.0f;
  bool sinks = false;
  std::vector<std::pair<int, int>> seqs;  // (context, new tokens)
  // > n_kv * hd: the layer's slots this many elements apart, the rest of
  // each slot another layer's (KVLayer::slot_stride: Gemma 4's narrower
  // layers), random values the op must not read.
  int slot_stride = 0;
};

// Attention over a cache of random keys and values; each sequence's blocks
// scattered (block b of sequence s at (7 s + 5 b) mod num_blocks).
OpCase attention_case(const AttnVariant& av) {
  const int bs = 16, nb = 64, max_blocks = 16, hd = av.hd, kvd = av.n_kv * av.hd, qd = av.n_heads * av.hd;
  const int stride = av.slot_stride > 0 ? av.slot_stride : kvd;  // elements from one slot to the next
  OpCase c;
  c.name = "attention_" + av.name;
  c.inputs = [=](uint32_t seed) {
    std::mt19937 rng(seed);
    OpInputs in;
    in.batch.reset(bs, max_blocks);
    int s = 0;
    for (auto [ctx, n_new] : av.seqs) {
      std::vector<int32_t> blocks;
      for (int i = 0; i < (ctx + bs - 1) / bs; ++i) blocks.push_back((7 * s + 5 * i) % nb);
      in.batch.add_sequence(std::vector<int32_t>(size_t(n_new), 1), ctx - n_new, blocks, true);
      ++s;
    }
    const size_t slots = size_t(nb) * bs;
    in.f = {round_f16(randn(size_t(in.batch.n_tokens()) * qd, rng)), round_f16(randn(slots * stride, rng)),
            round_f16(randn(slots * stride, rng)), randn(size_t(av.n_heads), rng)};
    return in;
  };
  c.run = [=](Backend& be, const OpInputs& in) {
    const int n = in.batch.n_tokens();
    be.reserve(step_limits(std::max(n, 16), 8, max_blocks, av.n_heads, hd, av.n_kv));
    DeviceBuffers b(be);
    const DType a = be.activation_type();
    Tensor q = b.upload(in.f[0], a, qd, n), out = b.zeros(a, qd, n);
    const KVLayer cache = b.kv(in.f[1], in.f[2], nb, bs, av.n_kv, hd, stride);
    AttentionParams ap{av.n_heads, av.n_kv, hd, 1.0f / std::sqrt(float(hd))};
    ap.window = av.window;
    ap.softcap = av.softcap;
    if (av.sinks) ap.sinks = static_cast<const float*>(b.f32(in.f[3], av.n_heads).data);
    const StepMeta m = be.upload_step(in.batch);
    if (av.window > 0 || av.softcap > 0 || av.sinks) be.attention_ext(q, cache, m, ap, out);
    else be.attention(q, cache, m, ap, out);
    return OpOutputs{b.read(out)};
  };
  c.reference = [=](const OpInputs& in) {
    const Batch& bt = in.batch;
    const int n = bt.n_tokens(), group = av.n_heads / av.n_kv;
    const double scale = 1.0 / std::sqrt(double(float(hd)));
    std::vector<double> out(size_t(n) * qd);
    for (int t = 0; t < n; ++t) {
      const int sq = bt.token_seq[size_t(t)], pos = bt.positions[size_t(t)];
      const int32_t* table = bt.groups[0].block_tables.data() + size_t(sq) * max_blocks;
      const int first = av.window > 0 ? std::max(0, pos - av.window + 1) : 0;
      for (int h = 0; h < av.n_heads; ++h) {
        const int kvh = h / group;
        std::vector<double> sc;
        for (int j = first; j <= pos; ++j) {
          const size_t slot = size_t(table[j / bs]) * bs + size_t(j % bs);
          double d = 0;
          for (int i = 0; i < hd; ++i)
            d += double(in.f[0][size_t(t) * qd + size_t(h * hd + i)]) * in.f[1][slot * stride + size_t(kvh * hd + i)];
          d *= double(float(scale));
          if (av.softcap > 0) d = av.softcap * std::tanh(d / av.softcap);
          sc.push_back(d);
        }
        double mx = *std::max_element(sc.begin(), sc.end());
        if (av.sinks) mx = std::max(mx, double(in.f[3][size_t(h)]));
        double z = av.sinks ? std::exp(double(in.f[3][size_t(h)]) - mx) : 0.0;
        for (double& x : sc) z += (x = std::exp(x - mx));
        for (int i = 0; i < hd; ++i) {
          double acc = 0;
          for (int j = first; j <= pos; ++j) {
            const size_t slot = size_t(table[j / bs]) * bs + size_t(j % bs);
            acc += sc[size_t(j - first)] / z * in.f[2][slot * stride + size_t(kvh * hd + i)];
          }
          out[size_t(t) * qd + size_t(h * hd + i)] = acc;
        }
      }
    }
    return RefOutputs{out};
  };
  return c;
}

}  // namespace

void add_attention_cases(std::vector<OpCase>& cases) {
  for (const RopeVariant& rv : {RopeVariant{"normal", false, 64, 1.0f, 0.0f, false},
                                RopeVariant{"neox", true, 64, 1.0f, 0.0f, false},
                                RopeVariant{"partial_normal", false, 32, 1.0f, 0.0f, false},
                                RopeVariant{"partial_neox", true, 32, 1.0f, 0.0f, false},
                                RopeVariant{"freq_factors", false, 64, 1.0f, 0.0f, true},
                                RopeVariant{"linear", false, 64, 0.25f, 0.0f, false},
                                RopeVariant{"yarn", true, 64, 0.25f, 1.0f, false}})
    cases.push_back(rope_case(rv));
  // Gemma 4: a narrower layer's store into the widest layer's slots; RoPE
  // of q alone (shared-KV layers), plain and proportional (frequency
  // factors on a partial rotation).
  cases.push_back(rope_case(RopeVariant{"neox", true, 64, 1.0f, 0.0f, false}, 384));
  cases.push_back(rope_case(RopeVariant{"neox", true, 64, 1.0f, 0.0f, false}, 0, true));
  cases.push_back(rope_case(RopeVariant{"partial_neox_freq_factors", true, 32, 1.0f, 0.0f, true}, 0, true));
  // The last positions of a 128K context: llama3's frequency factors,
  // plain, YaRN at factors 4 and 32 (gpt-oss, DeepSeek).
  for (const RopeVariant& rv : {RopeVariant{"freq_factors", false, 64, 1.0f, 0.0f, true},
                                RopeVariant{"neox", true, 64, 1.0f, 0.0f, false},
                                RopeVariant{"yarn", true, 64, 0.25f, 1.0f, false},
                                RopeVariant{"yarn32", true, 64, 1.0f / 32, 1.0f, false}})
    cases.push_back(rope_case(rv, 0, false, 131067));
  // A prefill chunk (from position 0, and a chunk later in its sequence
  // crossing a block boundary), decodes of a first token and past a block
  // boundary (contexts 17, 33).
  const std::vector<std::pair<int, int>> mixed = {{40, 40}, {1, 1}, {17, 1}, {70, 21}, {33, 1}};
  const std::vector<std::pair<int, int>> decode = {{200, 1}, {1, 1}, {17, 1}, {129, 1}};
  const std::vector<std::pair<int, int>> prefill = {{64, 64}, {48, 16}};
  for (const AttnVariant& av : {
           AttnVariant{"mha_hd64_mixed", 64, 4, 4, 0, 0.0f, false, mixed},
           AttnVariant{"gqa_hd128_h8_kv2_mixed", 128, 8, 2, 0, 0.0f, false, mixed},
           AttnVariant{"gqa_hd128_h8_kv2_decode", 128, 8, 2, 0, 0.0f, false, decode},
           AttnVariant{"gqa_hd64_h8_kv1_prefill", 64, 8, 1, 0, 0.0f, false, prefill},
           AttnVariant{"window_hd64_h4_kv2_win20_mixed", 64, 4, 2, 20, 0.0f, false, mixed},
           AttnVariant{"window_hd128_h8_kv4_win32_decode", 128, 8, 4, 32, 0.0f, false, decode},
           AttnVariant{"softcap_hd128_h4_kv2_mixed", 128, 4, 2, 0, 30.0f, false, mixed},
           AttnVariant{"sinks_hd64_h8_kv2_mixed", 64, 8, 2, 0, 0.0f, true, mixed},
           // Gemma 4: head size 512 (its full-attention layers) in prefill
           // chunks and split-K decodes, with a window and soft-cap too;
           // layers narrower than the cache's widest (slots a wider
           // stride apart) through the prefill and decode kernels.
           AttnVariant{"hd512_h8_kv2_mixed", 512, 8, 2, 0, 0.0f, false, mixed},
           AttnVariant{"hd512_h8_kv2_decode", 512, 8, 2, 0, 0.0f, false, decode},
           AttnVariant{"hd512_h4_kv1_prefill", 512, 4, 1, 0, 0.0f, false, prefill},
           AttnVariant{"window_softcap_sinks_hd512_h4_kv2_win20_mixed", 512, 4, 2, 20, 30.0f, true, mixed},
           AttnVariant{"strided_window_hd256_h8_kv2_win20_stride1024_mixed", 256, 8, 2, 20, 0.0f, false, mixed, 1024},
           AttnVariant{"strided_hd256_h8_kv2_stride1024_decode", 256, 8, 2, 0, 0.0f, false, decode, 1024},
           AttnVariant{"strided_hd128_h4_kv1_stride512_mixed", 128, 4, 1, 0, 0.0f, false, mixed, 512},
           AttnVariant{"strided_hd512_h8_kv1_stride1024_decode", 512, 8, 1, 0, 0.0f, false, decode, 1024},
       })
    cases.push_back(attention_case(av));
}

}  // namespace rf::test
