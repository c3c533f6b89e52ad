// CUDA RoPE + KV store, paged attention (mixed prefill/decode batches,
// single pass and split-K, head sizes 8/64/96/128/256/512, groups up to 16,
// sliding windows — also with the blocks before each window released and
// every unseen key NaN — logit soft-capping and attention sinks (gpt-oss);
// prefill on the CUDA-core
// and the tensor-core kernels, with query tiles split over their keys and
// without) and sampling against the CPU backend.
#include <gtest/gtest.h>

#include "gpu/attention_shapes.h"
#include "gpu/gpu_test_util.h"

namespace rf {
namespace {

using test::rel_l2;

using test::AttnShape;

// Which kernel takes the prefill chunks: the CUDA-core kernel or the
// tensor-core tile (prefill_mma_tile.h) where it takes the head size.
// Decode-only steps always run the decode kernel.
enum class AttnKernels { CudaCorePrefill, TensorCorePrefill };

// min_split_keys: decode attention's shortest key slice
// (Tuning::attention_min_split_keys; long ones leave slices empty).
// tile_partials: prefill's split query tiles (Tuning::
// prefill_tile_partials; these small steps split their longer tiles over
// their keys unless 0).
void check_attention(const AttnShape& sh, AttnKernels kernels, int min_split_keys = 32, int tile_partials = 64) {
  SCOPED_TRACE(kernels == AttnKernels::CudaCorePrefill ? "CUDA-core prefill" : "tensor-core prefill");
  SCOPED_TRACE("decode slices of >= " + std::to_string(min_split_keys) + " keys");
  SCOPED_TRACE("split prefill tiles' partial slots " + std::to_string(tile_partials));
  std::mt19937 rng(11 + sh.hd);
  CudaOptions o;
  o.dequant_scratch_bytes = size_t(32) << 20;
  o.tune = [=](gpu::Tuning& t) {
    t.prefill_mma = kernels != AttnKernels::CudaCorePrefill;
    t.attention_min_split_keys = min_split_keys;
    t.prefill_tile_partials = tile_partials;
  };
  auto gpu = std::make_unique<CudaBackend>(o);
  CpuBackend cpu(2);
  const int bs = 16, num_blocks = 200, max_blocks = 160;
  const int kv_dim = sh.n_kv * sh.hd, q_dim = sh.n_heads * sh.hd;
  const size_t slots = size_t(num_blocks) * bs;
  auto kc = test::round_f16(test::randn(slots * kv_dim, rng)), vc = test::round_f16(test::randn(slots * kv_dim, rng));
  KVLayer ccache{kc.data(), vc.data(), DType::F32, num_blocks, bs, sh.n_kv, sh.hd};
  KVLayer gcache{test::upload(*gpu, test::to_f16(kc)), test::upload(*gpu, test::to_f16(vc)), DType::F16, num_blocks, bs,
                 sh.n_kv, sh.hd};
  BackendLimits lim{512, 16, max_blocks, 16, 100, 1, sh.n_heads, sh.hd};
  gpu->reserve(lim);
  // Sinks: the CPU reads them from the host, the GPU from its memory.
  const std::vector<float> sinks = test::attn_sinks(sh);
  const float* gsinks = sinks.empty() ? nullptr : static_cast<const float*>(test::upload(*gpu, sinks));
  const auto gpu_params = [&](AttentionParams p) {
    p.sinks = gsinks;
    return p;
  };
  for (const auto& seqs : test::attention_batch_cases()) {
    const Batch b = test::attention_batch(seqs, bs, max_blocks, num_blocks);
    const int n = b.n_tokens();
    auto q = test::round_f16(test::randn(size_t(n) * q_dim, rng));
    std::vector<float> ref(size_t(n) * q_dim);
    AttentionParams ap{sh.n_heads, sh.n_kv, sh.hd, 1.0f / std::sqrt(float(sh.hd))};
    ap.window = sh.window;
    ap.softcap = sh.softcap;
    ap.sinks = sinks.empty() ? nullptr : sinks.data();
    const AttentionParams gp = gpu_params(ap);
    const bool ext = sh.window > 0 || sh.softcap > 0.0f || sh.sinks;
    StepMeta cm = cpu.upload_step(b);
    Tensor cq = make_tensor(q.data(), DType::F32, q_dim, n), co = make_tensor(ref.data(), DType::F32, q_dim, n);
    if (ext) cpu.attention_ext(cq, ccache, cm, ap, co);
    else cpu.attention(cq, ccache, cm, ap, co);
    StepMeta gm = gpu->upload_step(b);
    void* gq = test::upload(*gpu, test::to_f16(q));
    void* go = gpu->alloc(size_t(n) * q_dim * 2, "attn out");
    Tensor tq = make_tensor(gq, DType::F16, q_dim, n, DeviceKind::CUDA), to = make_tensor(go, DType::F16, q_dim, n, DeviceKind::CUDA);
    if (ext) gpu->attention_ext(tq, gcache, gm, gp, to);
    else gpu->attention(tq, gcache, gm, gp, to);
    EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, go, size_t(n) * q_dim)), ref), 2e-3)
        << "hd " << sh.hd << " window " << sh.window << " softcap " << sh.softcap << ", case with " << seqs.size()
        << " sequences";
    if (sh.window > 0) {
      // As a sliding-window KV group leaves them: entries wholly before the
      // window of each sequence's first new token released (-1), and every
      // slot no query sees (released blocks, keys before a window) NaN, on
      // both backends. Kernels must load neither (0 * NaN is NaN).
      Batch r = b;
      std::vector<uint8_t> seen(slots, 0);
      std::vector<int> first_key(size_t(b.n_seqs()));
      for (int sq = 0; sq < b.n_seqs(); ++sq) {
        const int32_t* table = b.groups[0].block_tables.data() + size_t(sq) * max_blocks;
        first_key[size_t(sq)] = std::max(0, b.positions[size_t(b.seq_starts[size_t(sq)])] - sh.window + 1);
        for (int p = first_key[size_t(sq)]; p < b.context_lens[size_t(sq)]; ++p)
          seen[size_t(table[p / bs]) * bs + p % bs] = 1;
        for (int i = 0; (i + 1) * bs <= first_key[size_t(sq)]; ++i)
          r.groups[0].block_tables[size_t(sq) * max_blocks + i] = -1;
      }
      auto kp = kc, vp = vc;
      for (size_t sl = 0; sl < slots; ++sl)
        if (!seen[sl]) {
          std::fill_n(kp.begin() + long(sl * kv_dim), kv_dim, NAN);
          std::fill_n(vp.begin() + long(sl * kv_dim), kv_dim, NAN);
        }
      const int32_t windows[1] = {sh.window};
      r.validate(num_blocks, windows);
      KVLayer pc{kp.data(), vp.data(), DType::F32, num_blocks, bs, sh.n_kv, sh.hd};
      KVLayer pg{test::upload(*gpu, test::to_f16(kp)), test::upload(*gpu, test::to_f16(vp)), DType::F16, num_blocks,
                 bs, sh.n_kv, sh.hd};
      std::vector<float> pref(size_t(n) * q_dim);
      Tensor po = make_tensor(pref.data(), DType::F32, q_dim, n);
      cpu.attention_ext(cq, pc, cpu.upload_step(r), ap, po);
      EXPECT_LT(rel_l2(pref, ref), 1e-6) << "the CPU read a released or masked key";
      gpu->attention_ext(tq, pg, gpu->upload_step(r), gp, to);
      const auto got = test::from_f16(test::download<uint16_t>(*gpu, go, size_t(n) * q_dim));
      for (float x : got) ASSERT_TRUE(std::isfinite(x)) << "hd " << sh.hd << " window " << sh.window
                                                        << ": a released or masked key was loaded";
      EXPECT_LT(rel_l2(got, ref), 2e-3) << "hd " << sh.hd << " window " << sh.window << " with released blocks";
      gpu->free(pg.k);
      gpu->free(pg.v);
    }
    gpu->free(gq);
    gpu->free(go);
  }
  // A decode step padded as decode graphs pad it (Batch::pad_to): the
  // sequences' rows as the CPU computes them without the padding, the
  // padding rows zero.
  const Batch b = test::attention_batch(test::attention_batch_cases()[1], bs, max_blocks, num_blocks);
  Batch padded = b;
  padded.pad_to(b.n_seqs() + 4);
  const int n = b.n_tokens(), np = padded.n_tokens();
  auto q = test::round_f16(test::randn(size_t(np) * q_dim, rng));
  std::vector<float> ref(size_t(n) * q_dim);
  AttentionParams ap{sh.n_heads, sh.n_kv, sh.hd, 1.0f / std::sqrt(float(sh.hd))};
  ap.window = sh.window;
  ap.softcap = sh.softcap;
  ap.sinks = sinks.empty() ? nullptr : sinks.data();
  Tensor cq = make_tensor(q.data(), DType::F32, q_dim, n), co = make_tensor(ref.data(), DType::F32, q_dim, n);
  cpu.attention_ext(cq, ccache, cpu.upload_step(b), ap, co);
  void* gq = test::upload(*gpu, test::to_f16(q));
  void* go = gpu->alloc(size_t(np) * q_dim * 2, "attn out");
  std::vector<uint16_t> stale(size_t(np) * q_dim, f32_to_f16(7.0f));  // what a padding row must not keep
  gpu->copy_to_device(go, stale.data(), stale.size() * 2);
  Tensor tq = make_tensor(gq, DType::F16, q_dim, np, DeviceKind::CUDA), to = make_tensor(go, DType::F16, q_dim, np, DeviceKind::CUDA);
  gpu->attention_ext(tq, gcache, gpu->upload_step(padded), gpu_params(ap), to);
  const auto got = test::from_f16(test::download<uint16_t>(*gpu, go, size_t(np) * q_dim));
  EXPECT_LT(rel_l2(std::vector<float>(got.begin(), got.begin() + long(ref.size())), ref), 2e-3)
      << "hd " << sh.hd << ": a padded decode step";
  for (size_t i = ref.size(); i < got.size(); ++i) ASSERT_EQ(got[i], 0.0f) << "hd " << sh.hd << ": padding row output";
  gpu->free(gq);
  gpu->free(go);
  if (gsinks) gpu->free(const_cast<float*>(gsinks));
}

class CudaAttention : public ::testing::TestWithParam<AttnShape> {};

TEST_P(CudaAttention, MatchesCpuOnMixedBatch) {
  RF_REQUIRE_GPU();
  check_attention(GetParam(), AttnKernels::CudaCorePrefill);
  check_attention(GetParam(), AttnKernels::TensorCorePrefill);
  check_attention(GetParam(), AttnKernels::TensorCorePrefill, 256, 0);
}

// Decode splits summed by a thread-block cluster of their blocks
// (Tuning::attention_cluster) against the combine kernel over the same
// splits (max_attention_splits): the same arithmetic in the same order, so
// the same bits — for clusters of 16 (past the portable size), 8 and 3
// (output chunks that do not spread evenly over the blocks), decode-only
// and mixed steps, three
// launches in a row.
TEST_P(CudaAttention, DecodeClusterSumMatchesCombineKernel) {
  RF_REQUIRE_GPU();
  const AttnShape sh = GetParam();
  std::mt19937 rng(23 + sh.hd);
  const int bs = 16, num_blocks = 400, max_blocks = 160;
  const int kv_dim = sh.n_kv * sh.hd, q_dim = sh.n_heads * sh.hd;
  const size_t slots = size_t(num_blocks) * bs;
  const auto kc = test::to_f16(test::round_f16(test::randn(slots * kv_dim, rng)));
  const auto vc = test::to_f16(test::round_f16(test::randn(slots * kv_dim, rng)));
  AttentionParams ap{sh.n_heads, sh.n_kv, sh.hd, 1.0f / std::sqrt(float(sh.hd))};
  ap.window = sh.window;
  ap.softcap = sh.softcap;
  const std::vector<std::vector<std::pair<int, int>>> steps = {
      {{1500, 1}}, {{2000, 1}, {700, 1}, {33, 1}}, {{300, 20}, {900, 1}, {40, 1}}};
  for (const int splits : {16, 8, 3}) {
    std::vector<uint16_t> out[2];
    for (const bool cluster : {false, true}) {
      CudaOptions o;
      o.dequant_scratch_bytes = size_t(32) << 20;
      o.max_attention_splits = splits;
      o.tune = [=](gpu::Tuning& t) {
        t.attention_blocks_per_sm = 4096;  // every step takes all the splits
        t.attention_cluster = t.attention_cluster_hd256 = cluster ? splits : 0;
      };
      CudaBackend gpu(o);
      gpu.reserve(BackendLimits{512, 16, max_blocks, 16, 100, 1, sh.n_heads, sh.hd});
      KVLayer cache{test::upload(gpu, kc), test::upload(gpu, vc), DType::F16, num_blocks, bs, sh.n_kv, sh.hd};
      const std::vector<float> sinks = test::attn_sinks(sh);
      ap.sinks = sinks.empty() ? nullptr : static_cast<const float*>(test::upload(gpu, sinks));
      std::mt19937 qrng(5);
      for (const auto& seqs : steps) {
        const Batch b = test::attention_batch(seqs, bs, max_blocks, num_blocks);
        const int n = b.n_tokens();
        const auto q = test::to_f16(test::round_f16(test::randn(size_t(n) * q_dim, qrng)));
        void* gq = test::upload(gpu, q);
        void* go = gpu.alloc(size_t(n) * q_dim * 2, "attn out");
        Tensor tq = make_tensor(gq, DType::F16, q_dim, n, DeviceKind::CUDA);
        Tensor to = make_tensor(go, DType::F16, q_dim, n, DeviceKind::CUDA);
        const StepMeta m = gpu.upload_step(b);
        for (int rep = 0; rep < 3; ++rep) {
          gpu.attention_ext(tq, cache, m, ap, to);
          const auto got = test::download<uint16_t>(gpu, go, size_t(n) * q_dim);
          if (rep > 0) {
            ASSERT_EQ(got, std::vector<uint16_t>(out[cluster].end() - long(got.size()), out[cluster].end()))
                << "launch " << rep << " differs from the first, cluster " << cluster;
          } else {
            out[cluster].insert(out[cluster].end(), got.begin(), got.end());
          }
        }
        gpu.free(gq);
        gpu.free(go);
      }
      gpu.free(cache.k);
      gpu.free(cache.v);
      if (ap.sinks) gpu.free(const_cast<float*>(ap.sinks));
    }
    EXPECT_EQ(out[1], out[0]) << test::attn_shape_name(sh) << ", " << splits << " splits";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttention,
                         ::testing::Values(AttnShape{8, 8, 4}, AttnShape{64, 8, 8}, AttnShape{128, 32, 8},
                                           AttnShape{128, 8, 1},
                                           // model families: Qwen2.5 (7 heads per KV head), GLM-4 (16),
                                           // Phi-3 (head size 96), Gemma (256, windows, soft-caps)
                                           AttnShape{128, 28, 4}, AttnShape{128, 32, 2}, AttnShape{96, 32, 32},
                                           AttnShape{256, 16, 8}, AttnShape{256, 16, 8, 8, 0.0f},
                                           AttnShape{256, 16, 8, 100, 2.0f}, AttnShape{256, 8, 4, 0, 2.0f},
                                           AttnShape{128, 32, 8, 500, 0.0f}, AttnShape{64, 8, 8, 8, 2.0f},
                                           AttnShape{128, 32, 2, 37, 2.0f}, AttnShape{96, 16, 4, 37, 2.0f},
                                           // attention sinks: gpt-oss (head size 64, 64 heads, 8 KV;
                                           // window 128 on every other layer), and sinks in the
                                           // generic (8), head-size-128 and 256 kernels
                                           AttnShape{64, 64, 8, 0, 0.0f, true},
                                           AttnShape{64, 64, 8, 128, 0.0f, true}, AttnShape{8, 8, 4, 0, 0.0f, true},
                                           AttnShape{16, 4, 2, 8, 0.0f, true}, AttnShape{128, 32, 8, 0, 0.0f, true},
                                           AttnShape{256, 16, 8, 100, 2.0f, true},
                                           // Gemma 4's full-attention layers: head size 512 (gemma4-31b:
                                           // 32 heads, 4 KV; 26B-A4B: 16, 2) — prefill on the CUDA-core
                                           // tile kernel (16-key tiles, 8 threads a row; the tensor-core
                                           // setting falls back to it), decodes split-K on the generic
                                           // kernel and the combine kernel — with a window and soft-cap
                                           AttnShape{512, 32, 4}, AttnShape{512, 16, 2, 100, 2.0f},
                                           AttnShape{512, 8, 8, 0, 0.0f, true}),
                         [](const auto& info) { return test::attn_shape_name(info.param); });

// A few tokens (a block per token) and a long prompt (past
// rope_kv.cu's kMaxRopeTokenBlocks: each block loops over several tokens),
// in both pair layouts, with all dims rotated or only the first n_rot. The
// long prompt takes four pairs a thread where head_dim and n_rot are
// multiples of 8 (one otherwise: head size 64 rotating 36), the few tokens
// one pair a thread.
struct RopeShape {
  int hd, n_rot;
  bool neox;
};

class CudaRopeStoreKv : public ::testing::TestWithParam<RopeShape> {};

TEST_P(CudaRopeStoreKv, MatchesCpu) {
  RF_REQUIRE_GPU();
  const RopeShape shape = GetParam();
  for (const int n : {6, 2100}) {
    SCOPED_TRACE(n);
    std::mt19937 rng(12);
    auto gpu = test::make_gpu();
    CpuBackend cpu(2);
    const int hd = shape.hd, n_heads = 8, n_kv = 2, bs = 16, first = 100;
    const int num_blocks = (first + n + bs - 1) / bs;
    RopeParams rope;
    rope.n_rot = shape.n_rot;
    rope.neox = shape.neox;
    rope.freq_base = 500000.0f;
    rope.n_ctx_orig = 8192;
    std::vector<float> ff(rope.n_rot / 2);
    for (auto& f : ff) f = 1.0f + std::uniform_real_distribution<float>(0, 7)(rng);
    rope.freq_factors = ff.data();
    Batch b;
    b.reset(bs, num_blocks);
    std::vector<int32_t> toks(n, 0), table(num_blocks);
    for (int i = 0; i < num_blocks; ++i) table[i] = num_blocks - 1 - i;  // blocks out of order
    b.add_sequence(toks, first, table, false);
    BackendLimits lim{n, 4, num_blocks, 4, 10, 1, n_heads, hd};
    gpu->reserve(lim);
    auto q = test::round_f16(test::randn(size_t(n) * n_heads * hd, rng)),
         k = test::round_f16(test::randn(size_t(n) * n_kv * hd, rng)),
         v = test::round_f16(test::randn(size_t(n) * n_kv * hd, rng));
    std::vector<float> kc(size_t(num_blocks) * bs * n_kv * hd, 0), vc(kc.size(), 0);
    auto cq = q, ck = k;
    Tensor tq = make_tensor(cq.data(), DType::F32, n_heads * hd, n),
           tk = make_tensor(ck.data(), DType::F32, n_kv * hd, n), tv = make_tensor(v.data(), DType::F32, n_kv * hd, n);
    KVLayer ccache{kc.data(), vc.data(), DType::F32, num_blocks, bs, n_kv, hd};
    cpu.rope_store_kv(tq, tk, tv, cpu.upload_step(b), rope, ccache);

    void* gkc = gpu->alloc(kc.size() * 2, "k cache");
    void* gvc = gpu->alloc(kc.size() * 2, "v cache");
    KVLayer gcache{gkc, gvc, DType::F16, num_blocks, bs, n_kv, hd};
    Tensor gff = gpu->load_f32(ff.data(), rope.n_rot / 2, 1, "ff");
    rope.freq_factors = gff.ptr<float>();
    void* gq = test::upload(*gpu, test::to_f16(q));
    void* gk = test::upload(*gpu, test::to_f16(k));
    void* gv = test::upload(*gpu, test::to_f16(v));
    Tensor uq = make_tensor(gq, DType::F16, n_heads * hd, n, DeviceKind::CUDA),
           uk = make_tensor(gk, DType::F16, n_kv * hd, n, DeviceKind::CUDA),
           uv = make_tensor(gv, DType::F16, n_kv * hd, n, DeviceKind::CUDA);
    gpu->rope_store_kv(uq, uk, uv, gpu->upload_step(b), rope, gcache);
    EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, gq, cq.size())), cq), 2e-3);
    EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, gk, ck.size())), ck), 2e-3);
    // The cache holds the rotated k and the plain v at the slots of
    // positions first.. first + n - 1.
    auto gkcache = test::from_f16(test::download<uint16_t>(*gpu, gkc, kc.size()));
    auto gvcache = test::from_f16(test::download<uint16_t>(*gpu, gvc, vc.size()));
    EXPECT_LT(rel_l2(gkcache, kc), 2e-3);
    EXPECT_LT(rel_l2(gvcache, vc), 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, CudaRopeStoreKv,
                         ::testing::Values(RopeShape{128, 128, false}, RopeShape{128, 128, true},
                                           RopeShape{128, 64, true}, RopeShape{96, 32, false},
                                           RopeShape{64, 36, false}, RopeShape{64, 36, true}),
                         [](const auto& info) {
                           const RopeShape& r = info.param;
                           return str("hd", r.hd, "_rot", r.n_rot, r.neox ? "_neox" : "_norm");
                         });

TEST(CudaOps, SamplingMatchesCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(13);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  const int vocab = 5000, rows = 8;
  BackendLimits lim{64, 8, 4, 8, vocab, 1, 1, 1};
  gpu->reserve(lim);
  auto logits = test::randn(size_t(rows) * vocab, rng, 3.0f);
  std::vector<SampleRow> r(rows);
  r[0].params.temperature = 0;
  r[1].params.temperature = 0;
  r[1].params.top_logprobs = 5;
  r[2].params.temperature = 0.8f;
  r[2].params.top_k = 40;
  r[3].params.top_p = 0.9f;
  r[4].params.min_p = 0.05f;
  r[5].params.top_k = 100;
  r[5].params.top_p = 0.5f;
  r[5].params.min_p = 0.01f;
  r[6].params.temperature = 1.5f;
  r[7].params.temperature = 0;
  r[7].params.repetition_penalty = 1.3f;
  r[7].params.presence_penalty = 0.5f;
  std::vector<PenaltyToken> pen;
  for (int i = 0; i < 300; ++i) pen.push_back({i * 7 % vocab, i % 3, 1, 0});
  pen.push_back({int32_t(std::max_element(logits.begin() + 7 * vocab, logits.end()) - (logits.begin() + 7 * vocab)), 0, 0, 1});
  pen.push_back({7, 0, 0, 0, 2.0f});   // a bias on a penalized token: biased first, then penalized
  pen.push_back({11, 0, 0, 0, -3.0f});
  r[7].penalty_count = int32_t(pen.size());
  for (int i = 0; i < rows; ++i) {
    r[size_t(i)].params.seed = 1000 + uint64_t(i);
    r[size_t(i)].rng_counter = uint64_t(i) * 3;
  }
  std::vector<SampleResult> want, got;
  Tensor cl = make_tensor(logits.data(), DType::F32, vocab, rows);
  cpu.sample(cl, r, pen, want);
  void* gl = test::upload(*gpu, logits);
  Tensor tl = make_tensor(gl, DType::F32, vocab, rows, DeviceKind::CUDA);
  gpu->sample(tl, r, pen, got);
  ASSERT_EQ(got.size(), want.size());
  for (int i = 0; i < rows; ++i) {
    EXPECT_EQ(got[size_t(i)].token, want[size_t(i)].token) << "row " << i;
    EXPECT_NEAR(got[size_t(i)].logprob, want[size_t(i)].logprob, 1e-3) << "row " << i;
  }
  ASSERT_EQ(got[1].top.size(), 5u);
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(got[1].top[size_t(j)].first, want[1].top[size_t(j)].first);
    EXPECT_NEAR(got[1].top[size_t(j)].second, want[1].top[size_t(j)].second, 1e-3);
  }
  // Many draws of one row follow the CPU's draws (same kept set, same CDF).
  int same = 0;
  std::vector<SampleRow> one(1, r[3]);
  for (int c = 0; c < 200; ++c) {
    one[0].rng_counter = uint64_t(c);
    cpu.sample(cl.slice_rows(3, 1), one, {}, want);
    gpu->sample(tl.slice_rows(3, 1), one, {}, got);
    same += got[0].token == want[0].token;
  }
  EXPECT_GE(same, 198);
}

// Structured output: rows with an allowed-token mask draw only allowed
// tokens, as the CPU does (greedy and sampled), beside unmasked rows.
TEST(CudaOps, SamplingMasksMatchCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(21);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  const int vocab = 5000, rows = 4, words = (vocab + 31) / 32;
  BackendLimits lim{64, 8, 4, 8, vocab, 1, 1, 1};
  gpu->reserve(lim);
  auto logits = test::randn(size_t(rows) * vocab, rng, 3.0f);
  Tensor cl = make_tensor(logits.data(), DType::F32, vocab, rows);
  void* gl = test::upload(*gpu, logits);
  Tensor tl = make_tensor(gl, DType::F32, vocab, rows, DeviceKind::CUDA);
  // Row 0: only every 97th token; row 2: 3 tokens; rows 1 and 3 unmasked.
  std::vector<uint32_t> m0(size_t(words), 0), m2(size_t(words), 0);
  for (int t = 0; t < vocab; t += 97) m0[size_t(t) >> 5] |= 1u << (t & 31);
  for (int t : {5, 4000, 4999}) m2[size_t(t) >> 5] |= 1u << (t & 31);
  auto allowed = [](const std::vector<uint32_t>& m, int t) { return (m[size_t(t) >> 5] >> (t & 31)) & 1u; };
  for (const float temperature : {0.0f, 1.0f}) {
    std::vector<SampleRow> r(rows);
    for (int i = 0; i < rows; ++i) {
      r[size_t(i)].params.temperature = temperature;
      r[size_t(i)].params.seed = 77 + uint64_t(i);
    }
    r[0].allowed = m0.data();
    r[2].allowed = m2.data();
    for (int c = 0; c < 50; ++c) {
      for (auto& row : r) row.rng_counter = uint64_t(c);
      std::vector<SampleResult> want, got;
      cpu.sample(cl, r, {}, want);
      gpu->sample(tl, r, {}, got);
      EXPECT_TRUE(allowed(m0, got[0].token)) << got[0].token;
      EXPECT_TRUE(allowed(m2, got[2].token)) << got[2].token;
      for (int i = 0; i < rows; ++i) {
        EXPECT_EQ(got[size_t(i)].token, want[size_t(i)].token) << "row " << i << " temperature " << temperature;
        EXPECT_NEAR(got[size_t(i)].logprob, want[size_t(i)].logprob, 1e-3);  // of the raw distribution
      }
      if (temperature == 0.0f) break;
    }
  }
}

}  // namespace
}  // namespace rf
