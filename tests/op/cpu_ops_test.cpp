// Each CPU op against a naive double-precision reference on fresh random
// inputs: matmul over every weight format, RMSNorm, RoPE (normal, NeoX,
// frequency factors, linear and YaRN scaling), paged attention with GQA over
// several sequences, SwiGLU, add, embedding and row gathering.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/quant.h"

#include "op/op_test_util.h"

namespace rf {
namespace {

using test::randn;

double rel_err(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

class CpuMatmul : public ::testing::TestWithParam<DType> {};

TEST_P(CpuMatmul, MatchesDoubleOverDequantizedWeights) {
  const DType type = GetParam();
  std::mt19937 rng(1234 + int(type));
  CpuBackend be(2);
  for (auto [n, k, m] : {std::tuple{1, 256, 67}, std::tuple{5, 512, 33}, std::tuple{17, 256, 130}}) {
    auto wf = randn(size_t(m) * k, rng, 0.5f);
    std::vector<uint8_t> wq(row_bytes(type, uint64_t(k)) * size_t(m));
    for (int r = 0; r < m; ++r)
      quantize_row(type, wf.data() + size_t(r) * k, wq.data() + size_t(r) * row_bytes(type, uint64_t(k)), size_t(k));
    std::vector<float> wd(wf.size());
    for (int r = 0; r < m; ++r)
      dequantize_row(type, wq.data() + size_t(r) * row_bytes(type, uint64_t(k)), wd.data() + size_t(r) * k, size_t(k));
    auto x = randn(size_t(n) * k, rng);
    std::vector<float> out(size_t(n) * m, NAN);
    Tensor tx = make_tensor(x.data(), DType::F32, k, n), tw = make_tensor(wq.data(), type, k, m),
           to = make_tensor(out.data(), DType::F32, m, n);
    be.matmul(tx, tw, to);
    std::vector<double> want(size_t(n) * m);
    for (int t = 0; t < n; ++t)
      for (int r = 0; r < m; ++r) {
        double s = 0;
        for (int c = 0; c < k; ++c) s += double(x[size_t(t) * k + c]) * wd[size_t(r) * k + c];
        want[size_t(t) * m + r] = s;
      }
    EXPECT_LT(rel_err(out, want), 2e-6) << dtype_name(type) << " n=" << n << " k=" << k << " m=" << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CpuMatmul,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                           DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                                           DType::Q2_K, DType::Q3_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CpuOps, RmsNorm) {
  std::mt19937 rng(1);
  CpuBackend be(2);
  const int n = 7, d = 300;
  auto x = randn(size_t(n) * d, rng, 3.0f), w = randn(d, rng);
  std::vector<float> out(x.size());
  Tensor tx = make_tensor(x.data(), DType::F32, d, n), tw = make_tensor(w.data(), DType::F32, d),
         to = make_tensor(out.data(), DType::F32, d, n);
  be.rms_norm(tx, tw, 1e-5f, to);
  std::vector<double> want(x.size());
  for (int r = 0; r < n; ++r) {
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += double(x[size_t(r) * d + i]) * x[size_t(r) * d + i];
    const double s = 1.0 / std::sqrt(ss / d + 1e-5);
    for (int i = 0; i < d; ++i) want[size_t(r) * d + i] = x[size_t(r) * d + i] * s * w[size_t(i)];
  }
  EXPECT_LT(rel_err(out, want), 1e-6);
}

TEST(CpuOps, SwigluAddEmbedGather) {
  std::mt19937 rng(2);
  CpuBackend be(2);
  auto g = randn(1000, rng, 4.0f), u = randn(1000, rng);
  std::vector<float> o(1000);
  Tensor tg = make_tensor(g.data(), DType::F32, 100, 10), tu = make_tensor(u.data(), DType::F32, 100, 10),
         to = make_tensor(o.data(), DType::F32, 100, 10);
  be.swiglu(tg, tu, to);
  std::vector<double> want(1000);
  for (size_t i = 0; i < 1000; ++i) want[i] = double(g[i]) / (1 + std::exp(-double(g[i]))) * u[i];
  EXPECT_LT(rel_err(o, want), 1e-6);
  be.add(tg, tu, to);
  for (size_t i = 0; i < 1000; ++i) want[i] = double(g[i]) + u[i];
  EXPECT_LT(rel_err(o, want), 1e-7);

  // Embedding of q8_0 rows, then gathering rows 2 and 0.
  const int vocab = 10, d = 64;
  auto table = randn(size_t(vocab) * d, rng);
  std::vector<uint8_t> q(row_bytes(DType::Q8_0, d) * vocab);
  for (int r = 0; r < vocab; ++r) quantize_row(DType::Q8_0, table.data() + r * d, q.data() + r * row_bytes(DType::Q8_0, d), d);
  Batch b;
  b.reset(16, 1);
  const std::vector<int32_t> toks = {7, 3, 9}, blocks = {0};
  b.add_sequence(toks, 0, blocks, true);
  b.logits_rows = {2, 0};
  StepMeta m = be.upload_step(b);
  std::vector<float> emb(size_t(3) * d), rows(size_t(2) * d);
  Tensor te = make_tensor(emb.data(), DType::F32, d, 3), tr = make_tensor(rows.data(), DType::F32, d, 2);
  be.embed(make_tensor(q.data(), DType::Q8_0, d, vocab), m, te);
  std::vector<float> deq(d);
  for (int t = 0; t < 3; ++t) {
    dequantize_row(DType::Q8_0, q.data() + toks[size_t(t)] * row_bytes(DType::Q8_0, d), deq.data(), d);
    for (int i = 0; i < d; ++i) ASSERT_EQ(emb[size_t(t) * d + i], deq[size_t(i)]);
  }
  be.gather_rows(te, m, tr);
  for (int i = 0; i < d; ++i) {
    EXPECT_EQ(rows[size_t(i)], emb[size_t(2) * d + i]);
    EXPECT_EQ(rows[size_t(d + i)], emb[size_t(i)]);
  }
  // Out-of-range token ids are an error, not a crash.
  b.token_ids[1] = vocab;
  m = be.upload_step(b);
  EXPECT_THROW(be.embed(make_tensor(q.data(), DType::Q8_0, d, vocab), m, te), Error);
}

// Reference RoPE, written from the definitions: rotate pair (a, b) of each
// head by theta = pos * base^(-i/n_rot) [/ factor] with linear or YaRN scaling.
double yarn_ramp_ref(double low, double high, int i0) {
  double y = (i0 / 2 - low) / std::max(0.001, high - low);
  return 1.0 - std::min(1.0, std::max(0.0, y));
}

void rope_ref(std::vector<double>& x, int heads, int hd, int pos, const RopeParams& p, const std::vector<float>& ff) {
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
      const double xa = x[size_t(h * hd + a)], xb = x[size_t(h * hd + b)];
      x[size_t(h * hd + a)] = (xa * std::cos(theta) - xb * std::sin(theta)) * mscale;
      x[size_t(h * hd + b)] = (xa * std::sin(theta) + xb * std::cos(theta)) * mscale;
    }
}

struct RopeCase {
  const char* name;
  bool neox;
  int n_rot;
  float freq_scale, ext_factor;
  bool factors;
};

class CpuRope : public ::testing::TestWithParam<RopeCase> {};

TEST_P(CpuRope, MatchesReferenceAndStoresKv) {
  const RopeCase rc = GetParam();
  std::mt19937 rng(3);
  CpuBackend be(2);
  const int hd = 64, n_heads = 4, n_kv = 2, n_tok = 5, bs = 4;
  RopeParams p;
  p.n_rot = rc.n_rot;
  p.neox = rc.neox;
  p.freq_base = 500000.0f;
  p.freq_scale = rc.freq_scale;
  p.ext_factor = rc.ext_factor;
  p.n_ctx_orig = 8192;
  std::vector<float> ff;
  if (rc.factors) {
    ff = randn(size_t(rc.n_rot / 2), rng);
    for (auto& f : ff) f = 1.0f + std::abs(f) * 4.0f;
    p.freq_factors = ff.data();
  }
  auto q = randn(size_t(n_tok) * n_heads * hd, rng), k = randn(size_t(n_tok) * n_kv * hd, rng),
       v = randn(size_t(n_tok) * n_kv * hd, rng);
  const auto q0 = q, k0 = k;
  std::vector<float> kc(size_t(4 * bs) * n_kv * hd, 0), vc(kc.size(), 0);
  KVLayer cache{kc.data(), vc.data(), DType::F32, 4, bs, n_kv, hd};
  Batch b;
  b.reset(bs, 4);
  const std::vector<int32_t> toks(n_tok, 1), blocks = {3, 1, 0, 2};
  b.add_sequence(toks, 0, blocks, false);
  b.positions = {1000, 1001, 1002, 1003, 1004};  // far positions: angles must stay exact
  b.groups[0].slot_mapping = {13, 5, 0, 9, -1};  // scattered slots; -1 is not stored
  StepMeta m = be.upload_step(b);
  Tensor tq = make_tensor(q.data(), DType::F32, n_heads * hd, n_tok), tk = make_tensor(k.data(), DType::F32, n_kv * hd, n_tok),
         tv = make_tensor(v.data(), DType::F32, n_kv * hd, n_tok);
  be.rope_store_kv(tq, tk, tv, m, p, cache);
  for (int t = 0; t < n_tok; ++t) {
    std::vector<double> rq(q0.begin() + t * n_heads * hd, q0.begin() + (t + 1) * n_heads * hd);
    std::vector<double> rk(k0.begin() + t * n_kv * hd, k0.begin() + (t + 1) * n_kv * hd);
    rope_ref(rq, n_heads, hd, 1000 + t, p, ff);
    rope_ref(rk, n_kv, hd, 1000 + t, p, ff);
    std::vector<float> gq(q.begin() + t * n_heads * hd, q.begin() + (t + 1) * n_heads * hd);
    std::vector<float> gk(k.begin() + t * n_kv * hd, k.begin() + (t + 1) * n_kv * hd);
    EXPECT_LT(rel_err(gq, rq), 1e-6) << rc.name << " token " << t;
    EXPECT_LT(rel_err(gk, rk), 1e-6) << rc.name << " token " << t;
    const int slot = b.groups[0].slot_mapping[size_t(t)];
    if (slot < 0) continue;
    for (int i = 0; i < n_kv * hd; ++i) {
      ASSERT_EQ(kc[size_t(slot) * n_kv * hd + i], k[size_t(t) * n_kv * hd + i]);
      ASSERT_EQ(vc[size_t(slot) * n_kv * hd + i], v[size_t(t) * n_kv * hd + i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, CpuRope,
                         ::testing::Values(RopeCase{"normal", false, 64, 1.0f, 0.0f, false},
                                           RopeCase{"neox", true, 64, 1.0f, 0.0f, false},
                                           RopeCase{"partial", false, 32, 1.0f, 0.0f, false},
                                           RopeCase{"freq_factors", false, 64, 1.0f, 0.0f, true},
                                           RopeCase{"linear", false, 64, 0.25f, 0.0f, false},
                                           RopeCase{"yarn", true, 64, 0.25f, 1.0f, false}),
                         [](const auto& info) { return std::string(info.param.name); });

// Paged attention for several sequences (prefill chunks and decodes mixed,
// blocks scattered) against dense double attention.
TEST(CpuOps, PagedAttentionGqaMixedBatch) {
  std::mt19937 rng(4);
  CpuBackend be(2);
  const int hd = 8, n_heads = 8, n_kv = 4, bs = 4, num_blocks = 32;
  const int kv_dim = n_kv * hd;
  std::vector<float> kc(size_t(num_blocks * bs) * kv_dim), vc(kc.size());
  for (auto& x : kc) x = std::normal_distribution<float>()(rng);
  for (auto& x : vc) x = std::normal_distribution<float>()(rng);
  KVLayer cache{kc.data(), vc.data(), DType::F32, num_blocks, bs, n_kv, hd};
  // Sequence A: context 11, last 3 tokens new; B: context 1 (decode of first token); C: context 17, 1 new.
  const std::vector<test::BatchSeq> seqs = {{11, 3, {5, 2, 9}}, {1, 1, {7}}, {17, 1, {0, 30, 12, 3, 20}}};
  const Batch b = test::make_batch(bs, 8, seqs);
  StepMeta m = be.upload_step(b);
  const int n_tok = b.n_tokens();
  auto q = randn(size_t(n_tok) * n_heads * hd, rng);
  std::vector<float> out(q.size(), NAN);
  AttentionParams ap{n_heads, n_kv, hd, 1.0f / std::sqrt(float(hd))};
  Tensor tq = make_tensor(q.data(), DType::F32, n_heads * hd, n_tok), to = make_tensor(out.data(), DType::F32, n_heads * hd, n_tok);
  be.attention(tq, cache, m, ap, to);
  std::vector<double> want(q.size());
  for (int t = 0; t < n_tok; ++t) {
    const test::BatchSeq& s = seqs[size_t(b.token_seq[size_t(t)])];
    const int pos = b.positions[size_t(t)];
    for (int h = 0; h < n_heads; ++h) {
      const int kvh = h / (n_heads / n_kv);
      std::vector<double> sc;
      for (int j = 0; j <= pos; ++j) {
        const int slot = s.blocks[size_t(j / bs)] * bs + j % bs;
        double d = 0;
        for (int i = 0; i < hd; ++i) d += double(q[size_t(t * n_heads * hd + h * hd + i)]) * kc[size_t(slot * kv_dim + kvh * hd + i)];
        sc.push_back(d * ap.scale);
      }
      const double mx = *std::max_element(sc.begin(), sc.end());
      double z = 0;
      for (double& x : sc) z += (x = std::exp(x - mx));
      for (int i = 0; i < hd; ++i) {
        double acc = 0;
        for (int j = 0; j <= pos; ++j) {
          const int slot = s.blocks[size_t(j / bs)] * bs + j % bs;
          acc += sc[size_t(j)] / z * vc[size_t(slot * kv_dim + kvh * hd + i)];
        }
        want[size_t(t * n_heads * hd + h * hd + i)] = acc;
      }
    }
  }
  EXPECT_LT(rel_err(out, want), 1e-6);
}

}  // namespace
}  // namespace rf
