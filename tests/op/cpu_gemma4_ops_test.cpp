// The CPU ops Gemma 4 adds: rope_q turns q exactly as rope_store_kv does
// (proportional RoPE: frequency factors of 1e30 hold a pair still) and
// stores nothing; moe_scale_weights multiplies each chosen expert's weight
// by its scale; the KV store and attention of a layer whose slots lie a
// wider layer's stride apart (KVLayer::slot_stride) equal a packed cache's.
#include <gtest/gtest.h>

#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "op/op_test_util.h"

namespace rf {
namespace {

using test::randn;

TEST(CpuGemma4Ops, RopeQEqualsRopeStoreKvAndStoresNothing) {
  std::mt19937 rng(41);
  CpuBackend be(2);
  const int hd = 32, heads = 4, n = 3, bs = 16;
  std::vector<float> factors(hd / 2, 1e30f);
  for (int i = 0; i < 4; ++i) factors[size_t(i)] = 1.0f;
  RopeParams p;
  p.n_rot = hd;
  p.neox = true;
  p.freq_base = 1e6f;
  p.n_ctx_orig = 512;
  p.freq_factors = factors.data();
  auto q = randn(size_t(n) * heads * hd, rng), k = randn(size_t(n) * hd, rng), v = randn(size_t(n) * hd, rng);
  auto q2 = q;
  std::vector<float> kc(size_t(bs) * hd, 0.0f), vc(kc.size(), 0.0f);
  KVLayer cache{kc.data(), vc.data(), DType::F32, 1, bs, 1, hd};
  Batch b;
  b.reset(bs, 1);
  const std::vector<int32_t> toks = {1, 2, 3}, blocks = {0};
  b.add_sequence(toks, 5, blocks, false);
  StepMeta m = be.upload_step(b);
  Tensor tq = make_tensor(q.data(), DType::F32, heads * hd, n), tk = make_tensor(k.data(), DType::F32, hd, n),
         tv = make_tensor(v.data(), DType::F32, hd, n), tq2 = make_tensor(q2.data(), DType::F32, heads * hd, n);
  be.rope_store_kv(tq, tk, tv, m, p, cache);
  const auto stored = kc;
  std::fill(kc.begin(), kc.end(), 0.0f);
  be.rope_q(tq2, hd, m, p);
  EXPECT_EQ(q2, q);
  EXPECT_EQ(kc, std::vector<float>(kc.size(), 0.0f));  // nothing stored
  EXPECT_NE(stored, kc);
  // Pairs 4.. (factor 1e30) do not turn.
  auto q0 = randn(size_t(heads) * hd, rng);
  auto q3 = q0;
  Tensor tq3 = make_tensor(q3.data(), DType::F32, heads * hd, 1);
  Batch b1;
  b1.reset(bs, 1);
  const std::vector<int32_t> one = {1};
  b1.add_sequence(one, 9, blocks, false);
  StepMeta m1 = be.upload_step(b1);
  be.rope_q(tq3, hd, m1, p);
  for (int h = 0; h < heads; ++h)
    for (int i = 4; i < hd / 2; ++i) {
      EXPECT_NEAR(q3[size_t(h * hd + i)], q0[size_t(h * hd + i)], 1e-6);
      EXPECT_NEAR(q3[size_t(h * hd + i + hd / 2)], q0[size_t(h * hd + i + hd / 2)], 1e-6);
    }
}

TEST(CpuGemma4Ops, MoeScaleWeightsByExpert) {
  CpuBackend be(1);
  std::vector<int32_t> ids = {3, 0, 1, 3};
  std::vector<float> w = {0.75f, 0.25f, 0.5f, 0.5f}, scales = {2.0f, -1.0f, 3.0f, 0.5f};
  Tensor ti = make_tensor(ids.data(), DType::I32, 2, 2), tw = make_tensor(w.data(), DType::F32, 2, 2),
         ts = make_tensor(scales.data(), DType::F32, 4);
  be.moe_scale_weights(ti, ts, tw);
  EXPECT_EQ(w, (std::vector<float>{0.375f, 0.5f, -0.5f, 0.25f}));
  std::vector<int32_t> bad = {4, 0};
  Tensor tb = make_tensor(bad.data(), DType::I32, 2, 1);
  EXPECT_THROW(be.moe_scale_weights(tb, ts, tw), Error);
}

TEST(CpuGemma4Ops, StridedSlotsEqualPackedOnes) {
  std::mt19937 rng(43);
  CpuBackend be(2);
  const int hd = 16, heads = 4, n = 6, bs = 4, stride = 40;  // 1 KV head of 16 in slots 40 apart
  auto q = randn(size_t(n) * heads * hd, rng), k = randn(size_t(n) * hd, rng), v = randn(size_t(n) * hd, rng);
  std::vector<float> kp(size_t(2 * bs) * hd), vp(kp.size()), ks(size_t(2 * bs) * stride), vs(ks.size());
  KVLayer packed{kp.data(), vp.data(), DType::F32, 2, bs, 1, hd};
  KVLayer strided = packed;
  strided.k = ks.data(), strided.v = vs.data(), strided.slot_stride = stride, strided.scale_stride = 2;
  Batch b;
  b.reset(bs, 2);
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6}, blocks = {1, 0};
  b.add_sequence(toks, 0, blocks, true);
  StepMeta m = be.upload_step(b);
  RopeParams p;
  p.n_rot = hd;
  p.neox = true;
  AttentionParams ap;
  ap.n_heads = heads, ap.n_kv_heads = 1, ap.head_dim = hd, ap.scale = 1.0f, ap.window = 4;
  std::vector<float> out_p(q.size()), out_s(q.size());
  for (auto [cache, out] : {std::pair{&packed, &out_p}, std::pair{&strided, &out_s}}) {
    auto qc = q, kc = k, vc = v;
    Tensor tq = make_tensor(qc.data(), DType::F32, heads * hd, n), tk = make_tensor(kc.data(), DType::F32, hd, n),
           tv = make_tensor(vc.data(), DType::F32, hd, n), to = make_tensor(out->data(), DType::F32, heads * hd, n);
    be.rope_store_kv(tq, tk, tv, m, p, *cache);
    be.attention_ext(tq, *cache, m, ap, to);
  }
  EXPECT_EQ(out_s, out_p);
  // Slot 5 (block 0, offset 1: the sequence's 6th token) at 5 * 40 in the strided arrays.
  EXPECT_EQ(std::vector<float>(ks.begin() + 5 * stride, ks.begin() + 5 * stride + hd),
            std::vector<float>(kp.begin() + 5 * hd, kp.begin() + 6 * hd));
}

}  // namespace
}  // namespace rf
