// The 8-bit (e4m3) KV cache on CUDA against the CPU backend: RoPE + store
// (rows encoded with their scales as core/fp8.h says), paged attention over
// an e4m3 cache in every kernel (generic, prefill tiles, decode single pass
// and split-K; head sizes 8/64/96/128/256, GQA groups up to 16, sliding
// windows, soft-caps), and whole models (the CPU with the same cache type as
// reference).
#include <gtest/gtest.h>

#include "core/fp8.h"
#include "gpu/attention_shapes.h"
#include "gpu/gpu_test_util.h"
#include "model/runner.h"

namespace rf {
namespace {

using test::rel_l2;

// An e4m3 cache of `slots` rows of n_kv heads x hd on the host: codes, then
// one scale per (slot, head) — KVLayer's layout — from f32 rows.
struct HostFp8Cache {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  HostFp8Cache(const std::vector<float>& rows, int n_kv, int hd) : codes(rows.size()), scales(rows.size() / size_t(hd)) {
    (void)n_kv;
    for (size_t r = 0; r < scales.size(); ++r) {
      float amax = 0.0f;
      for (int d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(rows[r * size_t(hd) + size_t(d)]));
      scales[r] = e4m3_row_scale(amax);
      for (int d = 0; d < hd; ++d)
        codes[r * size_t(hd) + size_t(d)] = e4m3_from_float(rows[r * size_t(hd) + size_t(d)] / scales[r]);
    }
  }
  // The values the cache holds.
  std::vector<float> decoded(int hd) const {
    std::vector<float> v(codes.size());
    for (size_t i = 0; i < codes.size(); ++i) v[i] = e4m3_to_float(codes[i]) * scales[i / size_t(hd)];
    return v;
  }
};

// Random rows whose magnitudes vary over four orders (each row its own
// scale, as real K/V rows have), some of them all zero.
std::vector<float> varied_rows(size_t rows, int hd, std::mt19937& rng) {
  std::uniform_real_distribution<float> e(-3.0f, 1.0f);
  std::vector<float> v = test::randn(rows * size_t(hd), rng);
  for (size_t r = 0; r < rows; ++r) {
    const float mag = r % 97 == 5 ? 0.0f : std::pow(10.0f, e(rng));
    for (int d = 0; d < hd; ++d) v[r * size_t(hd) + size_t(d)] *= mag;
  }
  return v;
}

using test::AttnShape;

class CudaKvFp8Attention : public ::testing::TestWithParam<AttnShape> {};

TEST_P(CudaKvFp8Attention, MatchesCpuOverTheSameCache) {
  RF_REQUIRE_GPU();
  const AttnShape sh = GetParam();
  std::mt19937 rng(21 + sh.hd);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  const int bs = 16, num_blocks = 200, max_blocks = 160;
  const int q_dim = sh.n_heads * sh.hd;
  const size_t slots = size_t(num_blocks) * bs;
  const HostFp8Cache kh(varied_rows(slots * sh.n_kv, sh.hd, rng), sh.n_kv, sh.hd);
  const HostFp8Cache vh(varied_rows(slots * sh.n_kv, sh.hd, rng), sh.n_kv, sh.hd);
  auto kcodes = kh.codes, vcodes = vh.codes;
  auto kscales = kh.scales, vscales = vh.scales;
  KVLayer ccache{kcodes.data(), vcodes.data(), DType::F8_E4M3, num_blocks, bs, sh.n_kv, sh.hd, kscales.data(),
                 vscales.data()};
  KVLayer gcache{test::upload(*gpu, kh.codes), test::upload(*gpu, vh.codes), DType::F8_E4M3, num_blocks, bs, sh.n_kv,
                 sh.hd};
  gcache.k_scale = static_cast<float*>(test::upload(*gpu, kh.scales));
  gcache.v_scale = static_cast<float*>(test::upload(*gpu, vh.scales));
  // The f32 cache of the same values: the CPU reads both alike.
  auto kd = kh.decoded(sh.hd), vd = vh.decoded(sh.hd);
  KVLayer dcache{kd.data(), vd.data(), DType::F32, num_blocks, bs, sh.n_kv, sh.hd};
  BackendLimits lim{512, 16, max_blocks, 16, 100, 1, sh.n_heads, sh.hd};
  gpu->reserve(lim);
  const std::vector<float> sinks = test::attn_sinks(sh);  // (host for the CPU, device for the GPU)
  const float* gsinks = sinks.empty() ? nullptr : static_cast<const float*>(test::upload(*gpu, sinks));
  for (const auto& seqs : test::attention_batch_cases()) {
    const Batch b = test::attention_batch(seqs, bs, max_blocks, num_blocks);
    const int n = b.n_tokens();
    auto q = test::round_f16(test::randn(size_t(n) * q_dim, rng));
    AttentionParams ap{sh.n_heads, sh.n_kv, sh.hd, 1.0f / std::sqrt(float(sh.hd))};
    ap.window = sh.window;
    ap.softcap = sh.softcap;
    ap.sinks = sinks.empty() ? nullptr : sinks.data();
    std::vector<float> ref(size_t(n) * q_dim), ref_f32(ref.size());
    StepMeta cm = cpu.upload_step(b);
    Tensor cq = make_tensor(q.data(), DType::F32, q_dim, n);
    Tensor co = make_tensor(ref.data(), DType::F32, q_dim, n), cd = make_tensor(ref_f32.data(), DType::F32, q_dim, n);
    cpu.attention_ext(cq, ccache, cm, ap, co);
    cpu.attention_ext(cq, dcache, cm, ap, cd);
    ASSERT_LT(rel_l2(ref, ref_f32), 1e-6) << "the CPU's e4m3 cache reads other values than it holds";
    StepMeta gm = gpu->upload_step(b);
    void* gq = test::upload(*gpu, test::to_f16(q));
    void* go = gpu->alloc(size_t(n) * q_dim * 2, "attn out");
    Tensor tq = make_tensor(gq, DType::F16, q_dim, n, DeviceKind::CUDA);
    Tensor to = make_tensor(go, DType::F16, q_dim, n, DeviceKind::CUDA);
    ap.sinks = gsinks;
    gpu->attention_ext(tq, gcache, gm, ap, to);
    const auto got = test::from_f16(test::download<uint16_t>(*gpu, go, size_t(n) * q_dim));
    // The f16 cache's tolerance (cuda_attention_test): the values are the
    // same, only the order of the sums and f16 outputs differ.
    EXPECT_LT(rel_l2(got, ref), 2e-3) << "hd " << sh.hd << " window " << sh.window << " softcap " << sh.softcap
                                      << ", case with " << seqs.size() << " sequences";
    gpu->free(gq);
    gpu->free(go);
  }
  for (void* p : {gcache.k, gcache.v, static_cast<void*>(gcache.k_scale), static_cast<void*>(gcache.v_scale)})
    gpu->free(p);
  if (gsinks) gpu->free(const_cast<float*>(gsinks));
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaKvFp8Attention,
                         ::testing::Values(AttnShape{8, 8, 4}, AttnShape{64, 8, 8}, AttnShape{128, 32, 8},
                                           AttnShape{128, 28, 4}, AttnShape{128, 32, 2}, AttnShape{96, 32, 32},
                                           AttnShape{256, 16, 8}, AttnShape{256, 16, 8, 100, 2.0f},
                                           AttnShape{128, 32, 8, 500, 0.0f}, AttnShape{64, 8, 8, 8, 2.0f},
                                           AttnShape{96, 16, 4, 37, 2.0f},
                                           // gpt-oss's sinks, full and window-128 layers; the generic kernel
                                           AttnShape{64, 64, 8, 0, 0.0f, true}, AttnShape{64, 64, 8, 128, 0.0f, true},
                                           AttnShape{16, 4, 2, 8, 0.0f, true}),
                         [](const auto& info) { return test::attn_shape_name(info.param); });

// One e4m3 step at |x| (x a row value over its scale, |x| <= 448): the
// distance between neighbouring codes there.
float e4m3_step(float x) {
  const float a = std::fabs(x);
  if (a < 0.015625f) return 1.0f / 512.0f;
  return std::exp2(std::floor(std::log2(a)) - 3.0f);
}

TEST(CudaKvFp8, RopeStoreMatchesCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(22);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  for (const int hd : {64, 128, 256}) {
    const int n_heads = 8, n_kv = 2, bs = 16, num_blocks = 8, n = 6;
    RopeParams rope;
    rope.n_rot = hd / 2;  // partial rotary: the pass-through dims are stored too
    rope.neox = hd == 128;
    rope.freq_base = 10000.0f;
    rope.n_ctx_orig = 4096;
    Batch b;
    b.reset(bs, num_blocks);
    b.add_sequence(std::vector<int32_t>(n, 0), 100, std::vector<int32_t>{3, 1, 4, 5, 6, 7, 0, 2}, false);
    BackendLimits lim{64, 4, num_blocks, 4, 10, 1, n_heads, hd};
    gpu->reserve(lim);
    auto q = test::round_f16(test::randn(size_t(n) * n_heads * hd, rng));
    auto k = test::round_f16(varied_rows(size_t(n) * n_kv, hd, rng));
    auto v = test::round_f16(varied_rows(size_t(n) * n_kv, hd, rng));
    const size_t cells = size_t(num_blocks) * bs * n_kv * hd, rows = cells / size_t(hd);
    std::vector<uint8_t> kc(cells, 0), vc(cells, 0);
    std::vector<float> ks(rows, 0.0f), vs(rows, 0.0f);
    auto cq = q, ck = k;
    Tensor tq = make_tensor(cq.data(), DType::F32, n_heads * hd, n), tk = make_tensor(ck.data(), DType::F32, n_kv * hd, n),
           tv = make_tensor(v.data(), DType::F32, n_kv * hd, n);
    KVLayer ccache{kc.data(), vc.data(), DType::F8_E4M3, num_blocks, bs, n_kv, hd, ks.data(), vs.data()};
    cpu.rope_store_kv(tq, tk, tv, cpu.upload_step(b), rope, ccache);

    KVLayer gcache{test::upload(*gpu, kc), test::upload(*gpu, vc), DType::F8_E4M3, num_blocks, bs, n_kv, hd};
    gcache.k_scale = static_cast<float*>(test::upload(*gpu, ks));
    gcache.v_scale = static_cast<float*>(test::upload(*gpu, vs));
    void* gq = test::upload(*gpu, test::to_f16(q));
    void* gk = test::upload(*gpu, test::to_f16(k));
    void* gv = test::upload(*gpu, test::to_f16(v));
    Tensor uq = make_tensor(gq, DType::F16, n_heads * hd, n, DeviceKind::CUDA);
    Tensor uk = make_tensor(gk, DType::F16, n_kv * hd, n, DeviceKind::CUDA);
    Tensor uv = make_tensor(gv, DType::F16, n_kv * hd, n, DeviceKind::CUDA);
    gpu->rope_store_kv(uq, uk, uv, gpu->upload_step(b), rope, gcache);
    EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, gq, cq.size())), cq), 2e-3) << "hd " << hd;
    EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, gk, ck.size())), ck), 2e-3) << "hd " << hd;
    const auto gkc = test::download<uint8_t>(*gpu, gcache.k, cells), gvc = test::download<uint8_t>(*gpu, gcache.v, cells);
    const auto gks = test::download<float>(*gpu, gcache.k_scale, rows), gvs = test::download<float>(*gpu, gcache.v_scale, rows);
    // Scales: the same row maxima (f32 RoPE vs the CPU's double angles:
    // 1e-5); codes: the same, or one step apart where the two encodings sat
    // on either side of a rounding boundary — rarely.
    int stored_rows = 0, off_by_one = 0;
    for (size_t r = 0; r < rows; ++r) {
      for (const bool is_k : {true, false}) {
        const float sc = is_k ? ks[r] : vs[r], sg = is_k ? gks[r] : gvs[r];
        ASSERT_NEAR(sg, sc, 1e-5f * sc) << "hd " << hd << (is_k ? " k" : " v") << " scale of row " << r;
        if (sc == 0.0f) continue;  // a slot nothing was stored in
        if (is_k) ++stored_rows;
        for (int d = 0; d < hd; ++d) {
          const size_t i = r * size_t(hd) + size_t(d);
          const uint8_t c = is_k ? kc[i] : vc[i], g = is_k ? gkc[i] : gvc[i];
          if (c == g) continue;
          const float xc = e4m3_to_float(c), xg = e4m3_to_float(g);
          ASSERT_LE(std::fabs(xg - xc), 1.0001f * e4m3_step(std::max(std::fabs(xc), std::fabs(xg))))
              << "hd " << hd << (is_k ? " k" : " v") << " row " << r << " dim " << d << ": codes " << int(c) << " / "
              << int(g);
          ++off_by_one;
        }
      }
    }
    EXPECT_EQ(stored_rows, n * n_kv) << "hd " << hd;
    EXPECT_LE(off_by_one, n * n_kv * hd / 50) << "hd " << hd << ": too many codes one step apart";
    for (void* p : {gq, gk, gv, gcache.k, gcache.v, static_cast<void*>(gcache.k_scale),
                    static_cast<void*>(gcache.v_scale)})
      gpu->free(p);
  }
}

// Whole models with an e4m3 cache on both backends: a prompt (prefill),
// then decode steps (graphs on the GPU), the CPU's greedy tokens fed to
// both. The e4m3 encoding magnifies the backends' differences: a K or V
// value that f16 activations move across a rounding boundary of its code
// changes by a whole e4m3 step (up to 1/8 of it), so the bound is 3e-2
// (measured on an H200: 0.010 to 0.019) rather than the f16 cache's 1e-2.
// And the GPU must be clearly closer to the CPU's e4m3 run than to its f32
// one, or it did not read what it stored (H200: 0.54 of the distance for
// stories260K, whose e4m3 cache moves these logits least, about 0.02 per
// step; under 0.5 for the others).
class CudaKvFp8Model : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaKvFp8Model, LogitsMatchCpu) {
  RF_REQUIRE_GPU();
  const std::string rel = GetParam();
  RF_REQUIRE_TESTDATA(rel);
  CpuBackend cpu(2);
  auto gpu = test::make_gpu();
  test::ModelRunner g(test::testdata_path(rel), *gpu, 256, 8, 256, 16, KVCacheDType::Fp8);
  test::ModelRunner c(test::testdata_path(rel), cpu, 256, 8, 256, 16, KVCacheDType::Fp8);
  test::ModelRunner c32(test::testdata_path(rel), cpu, 256, 8, 256, 16, KVCacheDType::Auto);
  std::mt19937 rng(6);
  test::ModelRunner::Seq sg, sc, s32;
  for (int i = 0; i < 40; ++i) sg.tokens.push_back(int32_t(rng() % uint32_t(c.vocab())));
  sc.tokens = s32.tokens = sg.tokens;
  double to_fp8 = 0, to_f32 = 0;
  for (int step = 0; step < 6; ++step) {
    const auto lg = g.step({&sg})[0];
    const auto lc = c.step({&sc})[0];
    const auto l32 = c32.step({&s32})[0];
    EXPECT_LT(rel_l2(lg, lc), 3e-2) << rel << " step " << step;
    to_fp8 += rel_l2(lg, lc);
    to_f32 += rel_l2(lg, l32);
    const int32_t next = test::ModelRunner::argmax(lc);
    sg.tokens.push_back(next);
    sc.tokens.push_back(next);
    s32.tokens.push_back(next);
  }
  EXPECT_LT(to_fp8, 0.75 * to_f32) << rel << ": the GPU's logits are not those of an e4m3 cache";
}

INSTANTIATE_TEST_SUITE_P(Models, CudaKvFp8Model,
                         ::testing::Values("stories260K.gguf", "arch/tiny-qwen3.gguf", "arch/tiny-gemma2.gguf",
                                           "arch/tiny-glm4.gguf"),
                         [](const auto& info) { return test::testdata_param_name(info.param); });

}  // namespace
}  // namespace rf
