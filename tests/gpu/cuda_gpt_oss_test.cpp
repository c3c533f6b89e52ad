// gpt-oss's building blocks on the CUDA backend against the CPU backend:
// the router's bias before top-k, the experts with gate/up/down biases and
// the clamped SwiGLU (one token through single-row GEMV tiles and the
// fused down + weighted sum, a few tokens through GEMV tiles of up to 8
// rows, many through the tensor-core expert matmuls), the clamped SwiGLU
// alone and after the gate*up matmuls, YaRN RoPE past the original
// context, and whole synthetic gpt-oss models (head size 64: the tuned
// prefill and decode kernels with sinks and window-16 layers) in f16,
// q8_0 and q4_k. (Attention with sinks: cuda_attention_test.cpp and
// cuda_kv_fp8_test.cpp's sink shapes; the tiny-gpt-oss.gguf test file:
// cuda_model_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cuda/moe/moe.cuh"
#include "gpu/gpu_test_util.h"
#include "gpu/routing_margin.h"
#include "model/runner.h"
#include "model/temp_model.h"

namespace rf {
namespace {

using test::rel_l2;

Tensor gpu_tensor(void* p, DType t, int64_t cols, int64_t rows) { return make_tensor(p, t, cols, rows, DeviceKind::CUDA); }

// The router's logits plus its f32 bias (add_bias on f32 rows), then the
// routing: the same experts as the CPU's (the biased logits are the same
// f32 sums), their weights within f32 rounding.
TEST(CudaGptOss, RouterBiasThenRouteMatchesCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(3);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  const int n = 37, E = 32, k = 4;
  auto logits = test::randn(size_t(n) * E, rng, 2.0f);
  const auto bias = test::randn(size_t(E), rng, 1.0f);
  MoeParams p;
  p.n_expert = E;
  p.n_used = k;
  p.norm_weights = true;
  void* gl = test::upload(*gpu, logits);
  void* gi = gpu->alloc(size_t(n) * k * 4, "ids");
  void* gw = gpu->alloc(size_t(n) * k * 4, "weights");
  Tensor tl = gpu_tensor(gl, DType::F32, E, n), ti = gpu_tensor(gi, DType::I32, k, n), tw = gpu_tensor(gw, DType::F32, k, n);
  const Tensor gb = gpu->load_f32(bias.data(), E, 1, "router bias");
  gpu->add_bias(tl, gb);
  gpu->moe_route(tl, p, ti, tw);
  std::vector<int32_t> ids(size_t(n) * k);
  std::vector<float> weights(ids.size());
  Tensor cl = make_tensor(logits.data(), DType::F32, E, n), ci = make_tensor(ids.data(), DType::I32, k, n),
         cw = make_tensor(weights.data(), DType::F32, k, n);
  const Tensor cb = make_tensor(const_cast<float*>(bias.data()), DType::F32, E, 1);
  cpu.add_bias(cl, cb);
  cpu.moe_route(cl, p, ci, cw);
  EXPECT_EQ(test::download<float>(*gpu, gl, logits.size()), logits) << "biased logits";
  EXPECT_EQ(test::download<int32_t>(*gpu, gi, ids.size()), ids);
  EXPECT_LT(rel_l2(test::download<float>(*gpu, gw, weights.size()), weights), 1e-6);
  for (void* b : {gl, gi, gw}) gpu->free(b);
}

// The clamped SwiGLU alone (Backend::swiglu_oai) on values past both
// clamps (|x| up to ~20): the CPU's formula on the same f16 inputs, one
// f16 rounding of the output apart (2^-11 relative: rel. L2 < 1e-3).
TEST(CudaGptOss, SwigluOaiMatchesCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(4);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  const int n = 3, ff = 1000;
  const auto g = test::round_f16(test::randn(size_t(n) * ff, rng, 6.0f));
  const auto u = test::round_f16(test::randn(size_t(n) * ff, rng, 6.0f));
  std::vector<float> ref(g.size());
  Tensor cg = make_tensor(const_cast<float*>(g.data()), DType::F32, ff, n),
         cu = make_tensor(const_cast<float*>(u.data()), DType::F32, ff, n), co = make_tensor(ref.data(), DType::F32, ff, n);
  cpu.swiglu_oai(cg, cu, co);
  void* gg = test::upload(*gpu, test::to_f16(g));
  void* gu = test::upload(*gpu, test::to_f16(u));
  void* go = gpu->alloc(g.size() * 2, "out");
  Tensor tg = gpu_tensor(gg, DType::F16, ff, n), tu = gpu_tensor(gu, DType::F16, ff, n), to = gpu_tensor(go, DType::F16, ff, n);
  gpu->swiglu_oai(tg, tu, to);
  EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, go, g.size())), ref), 1e-3);
  for (void* b : {gg, gu, go}) gpu->free(b);
}

// matmul_gate_up_glu with the clamped SwiGLU (the GPU runs gate and up as
// one matmul_multi, then swiglu_oai) for one token and a batch, f16 and
// q8_0 weights. Against the CPU's on the activations as the GPU's matmul
// reads them; the f16 gate and up (rounded before the GLU, as every GPU
// GLU reads them) and the f16 output: 3e-3.
TEST(CudaGptOss, GateUpClampedGluMatchesCpu) {
  RF_REQUIRE_GPU();
  for (const DType type : {DType::F16, DType::Q8_0}) {
    for (const int n : {1, 20}) {
      std::mt19937 rng(6 + n);
      auto gpu = test::make_gpu(false);
      CpuBackend cpu(2);
      const int d = 256, ff = 512;
      gpu->reserve(BackendLimits{64, 4, 4, 4, 16, int64_t(ff) * d, 1, 1, 1});
      std::vector<uint8_t> wg = test::random_weight(type, ff, d, rng, 0.3f), wu = test::random_weight(type, ff, d, rng, 0.3f);
      const Tensor hg = make_tensor(wg.data(), type, d, ff), hu = make_tensor(wu.data(), type, d, ff);
      const auto x = test::round_f16(test::randn(size_t(n) * d, rng));
      const Tensor gw_gate = gpu->load_weight(hg, "gate"), gw_up = gpu->load_weight(hu, "up");
      auto xr = test::gemv_activations(*gpu, type, n, d, x);
      std::vector<float> cgate(size_t(n) * ff), cup(cgate.size()), ref(cgate.size());
      Tensor cx = make_tensor(xr.data(), DType::F32, d, n), tg = make_tensor(cgate.data(), DType::F32, ff, n),
             tu = make_tensor(cup.data(), DType::F32, ff, n), to = make_tensor(ref.data(), DType::F32, ff, n);
      cpu.matmul_gate_up_glu(cx, hg, hu, tg, tu, to, Activation::SiLUClampedOai);
      void* gx = test::upload(*gpu, test::to_f16(x));
      void* gg = gpu->alloc(cgate.size() * 2, "gate");
      void* gu = gpu->alloc(cgate.size() * 2, "up");
      void* go = gpu->alloc(cgate.size() * 2, "out");
      Tensor ux = gpu_tensor(gx, DType::F16, d, n), ug = gpu_tensor(gg, DType::F16, ff, n),
             uu = gpu_tensor(gu, DType::F16, ff, n), uo = gpu_tensor(go, DType::F16, ff, n);
      gpu->matmul_gate_up_glu(ux, gw_gate, gw_up, ug, uu, uo, Activation::SiLUClampedOai);
      EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, go, ref.size())), ref), 3e-3)
          << dtype_name(type) << " n " << n;
      for (void* b : {gx, gg, gu, go}) gpu->free(b);
    }
  }
}

// ---- the experts -------------------------------------------------------------

struct OaiMoeCase {
  DType gate_type, down_type;
  int n_expert, k, d, ff;
  bool combined;  // one token's down rows and weighted sum in one launch (Fusions::moe_down; Q4_K/Q6_K down)
};

class CudaGptOssMoe : public ::testing::TestWithParam<OaiMoeCase> {};

// How far rounding the experts' GLU outputs to 8 bits (per 32 values, a
// scale of max|h| / 127, as the one-token down GEMV reads them) moves one
// token's output, on the CPU: ||out(q8(h)) - out(h)|| / ||out(h)||, each
// chosen expert's h = swiglu_oai(gate x + gb, up x + ub), its down rows
// and bias.
// The clamped SwiGLU's outputs are heavy-tailed (a few near 7 * 8, most
// small), so a block's step is large beside most of its values.
double q8_glu_rounding_error(CpuBackend& cpu, const std::vector<float>& x, const std::vector<int32_t>& ids,
                             const std::vector<float>& weights, const ExpertWeights& w, int d, int ff) {
  std::vector<float> out(size_t(d), 0.0f), out_q(size_t(d), 0.0f);
  auto xc = x;
  Tensor tx = make_tensor(xc.data(), DType::F32, d, 1);
  for (size_t j = 0; j < ids.size(); ++j) {
    const int32_t e = ids[j];
    const size_t nff = static_cast<size_t>(ff), nd = static_cast<size_t>(d);
    std::vector<float> g(nff), u(nff), h(nff), y(nd), yq(nd);
    Tensor tg = make_tensor(g.data(), DType::F32, ff, 1), tu = make_tensor(u.data(), DType::F32, ff, 1),
           th = make_tensor(h.data(), DType::F32, ff, 1);
    cpu.matmul(tx, w.gate_of(e), tg);
    cpu.matmul(tx, w.up_of(e), tu);
    for (int i = 0; i < ff; ++i) {
      g[size_t(i)] += w.gate_bias.ptr<float>()[int64_t(e) * ff + i];
      u[size_t(i)] += w.up_bias.ptr<float>()[int64_t(e) * ff + i];
    }
    cpu.swiglu_oai(tg, tu, th);
    auto hq = h;
    for (int b = 0; b < ff; b += 32) {
      float amax = 0.0f;
      for (int i = b; i < std::min(ff, b + 32); ++i) amax = std::max(amax, std::fabs(h[size_t(i)]));
      const float step = amax / 127.0f;
      for (int i = b; i < std::min(ff, b + 32); ++i)
        hq[size_t(i)] = step > 0.0f ? std::nearbyint(h[size_t(i)] / step) * step : 0.0f;
    }
    Tensor ty = make_tensor(y.data(), DType::F32, d, 1), tyq = make_tensor(yq.data(), DType::F32, d, 1),
           thq = make_tensor(hq.data(), DType::F32, ff, 1);
    cpu.matmul(th, w.down_of(e), ty);
    cpu.matmul(thq, w.down_of(e), tyq);
    for (int i = 0; i < d; ++i) {
      const float db = w.down_bias.ptr<float>()[int64_t(e) * d + i];
      out[size_t(i)] += weights[j] * (y[size_t(i)] + db);
      out_q[size_t(i)] += weights[j] * (yq[size_t(i)] + db);
    }
  }
  return rel_l2(out_q, out);
}

// moe_ffn with router-chosen experts, gate/up/down biases and the clamped
// SwiGLU, against the CPU's moe_ffn on the same routing (the GPU's own
// moe_route on the same logits: the same experts, and for one token the
// plan it hands to moe_ffn). Gate and up weights of scale 0.2 over 256
// inputs give products ~N(0, 3.2^2): both clamps (7) are met.
TEST_P(CudaGptOssMoe, MatchesCpu) {
  RF_REQUIRE_GPU();
  const OaiMoeCase c = GetParam();
  const int d = c.d, ff = c.ff, E = c.n_expert, k = c.k;
  std::mt19937 rng(29 + E + int(c.gate_type));
  CudaOptions o;
  o.dequant_scratch_bytes = size_t(32) << 20;
  o.tune = [=](gpu::Tuning& t) { t.fusions.moe_down = c.combined; };
  auto gpu = std::make_unique<CudaBackend>(o);
  CpuBackend cpu(2);
  gpu->reserve(test::moe_limits(256, E, k, ff, d));
  cpu.reserve(test::moe_limits(256, E, k, ff, d));  // (the CPU's expert scratch)
  auto gate = test::random_weight(c.gate_type, E * ff, d, rng, 0.2f), up = test::random_weight(c.gate_type, E * ff, d, rng, 0.2f);
  auto down = test::random_weight(c.down_type, E * d, ff, rng, 0.2f);
  auto gate_b = test::randn(size_t(E) * ff, rng, 0.5f), up_b = test::randn(size_t(E) * ff, rng, 0.5f),
       down_b = test::randn(size_t(E) * d, rng, 0.5f);
  ExpertWeights cw;
  cw.gate = make_tensor(gate.data(), c.gate_type, d, int64_t(E) * ff);
  cw.up = make_tensor(up.data(), c.gate_type, d, int64_t(E) * ff);
  cw.down = make_tensor(down.data(), c.down_type, ff, int64_t(E) * d);
  cw.gate_bias = make_tensor(gate_b.data(), DType::F32, ff, E);
  cw.up_bias = make_tensor(up_b.data(), DType::F32, ff, E);
  cw.down_bias = make_tensor(down_b.data(), DType::F32, d, E);
  cw.n_expert = E;
  ExpertWeights gw;
  gw.gate = gpu->load_weight(cw.gate, "gate");
  gw.up = gpu->load_weight(cw.up, "up");
  gw.down = gpu->load_weight(cw.down, "down");
  gw.gate_bias = gpu->load_f32(gate_b.data(), ff, E, "gate bias");
  gw.up_bias = gpu->load_f32(up_b.data(), ff, E, "up bias");
  gw.down_bias = gpu->load_f32(down_b.data(), d, E, "down bias");
  gw.n_expert = E;
  MoeParams p;
  p.n_expert = E;
  p.n_used = k;
  p.n_ff = ff;
  p.norm_weights = true;
  p.act = Activation::SiLUClampedOai;
  if (c.combined) {
    ASSERT_TRUE(gpu::moe_down_combined_supported(gpu->tuning(), c.down_type, ff, k));
  }
  // 1: one-row GEMV tiles (and the fused down + sum); 3, 8: GEMV tiles; 200
  // tokens of 8 experts (100 rows an expert): the tensor-core expert matmuls
  // where the format has them.
  for (const int n : {1, 3, 8, 200}) {
    const auto x = test::round_f16(test::randn(size_t(n) * d, rng));
    const auto logits = test::randn(size_t(n) * E, rng, 2.0f);
    std::vector<int32_t> ids(size_t(n) * k);
    std::vector<float> weights(ids.size()), ref(size_t(n) * d);
    auto cl = logits;
    Tensor tcl = make_tensor(cl.data(), DType::F32, E, n), tci = make_tensor(ids.data(), DType::I32, k, n),
           tcw = make_tensor(weights.data(), DType::F32, k, n);
    cpu.moe_route(tcl, p, tci, tcw);
    // The CPU on the activations as the GPU's gate/up matmuls read them.
    auto xr = test::gemv_activations(*gpu, c.gate_type, n, d, x);
    Tensor cx = make_tensor(xr.data(), DType::F32, d, n), co = make_tensor(ref.data(), DType::F32, d, n);
    cpu.moe_ffn(cx, tci, tcw, cw, p, co);

    void* gx = test::upload(*gpu, test::to_f16(x));
    void* gl = test::upload(*gpu, logits);
    void* gi = gpu->alloc(ids.size() * 4, "ids");
    void* gwt = gpu->alloc(ids.size() * 4, "weights");
    void* go = gpu->alloc(size_t(n) * d * 2, "out");
    Tensor tx = gpu_tensor(gx, DType::F16, d, n), tl = gpu_tensor(gl, DType::F32, E, n),
           ti = gpu_tensor(gi, DType::I32, k, n), tw = gpu_tensor(gwt, DType::F32, k, n), to = gpu_tensor(go, DType::F16, d, n);
    const Handoff planned = gpu->moe_route(tl, p, ti, tw);
    ASSERT_EQ(test::download<int32_t>(*gpu, gi, ids.size()), ids) << "routing differs from the CPU's";
    gpu->moe_ffn(tx, ti, tw, gw, p, to, {}, planned);
    const double err = rel_l2(test::from_f16(test::download<uint16_t>(*gpu, go, ref.size())), ref);
    std::printf("  %s/%s, %d tokens: rel. L2 %.6f\n", dtype_name(c.gate_type), dtype_name(c.down_type), n, err);
    // The GPU rounds gate and up (before their biases), the GLU output and
    // the result to f16 (cuda_moe_test.cpp: 3e-3 for the plain experts).
    const bool q8_down = n == 1 && gpu->expert_down_quantizes_activations(c.down_type, ff, k);
    // Where one token's down GEMV reads the GLU outputs as 8-bit quants,
    // the bound adds what that rounding alone does to this token's output
    // on the CPU (q8_glu_rounding_error), with half again for the GPU
    // rounding its own f16 GLU outputs, whose blocks round slightly
    // differently.
    const double q8 = q8_down ? q8_glu_rounding_error(cpu, xr, ids, weights, cw, d, ff) : 0.0;
    if (q8_down) std::printf("    8-bit rounding of the GLU outputs alone: rel. L2 %.6f\n", q8);
    EXPECT_LT(err, 3e-3 + 1.5 * q8) << n << " tokens, " << dtype_name(c.gate_type) << "/" << dtype_name(c.down_type);
    for (void* b : {gx, gl, gi, gwt, go}) gpu->free(b);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGptOssMoe,
                         ::testing::Values(OaiMoeCase{DType::F16, DType::F16, 8, 4, 256, 256, false},
                                           OaiMoeCase{DType::Q8_0, DType::Q8_0, 8, 4, 256, 256, false},
                                           OaiMoeCase{DType::Q4_K, DType::Q6_K, 8, 4, 256, 512, false},
                                           OaiMoeCase{DType::Q4_K, DType::Q4_K, 32, 4, 256, 256, true},
                                           // gpt-oss's own: MXFP4 experts 2880 wide (the tensor-core
                                           // stages end in a partial one), and rows of 256
                                           OaiMoeCase{DType::MXFP4, DType::MXFP4, 32, 4, 2880, 2880, false},
                                           OaiMoeCase{DType::MXFP4, DType::MXFP4, 8, 4, 256, 256, false},
                                           OaiMoeCase{DType::F32, DType::F32, 8, 4, 64, 32, false}),
                         [](const auto& info) {
                           const OaiMoeCase& c = info.param;
                           return std::string(dtype_name(c.gate_type)) + "_" + dtype_name(c.down_type) + "_e" +
                                  std::to_string(c.n_expert) + "_ff" + std::to_string(c.ff) +
                                  (c.combined ? "_combined" : "");
                         });

// ---- YaRN RoPE -------------------------------------------------------------

// gpt-oss's RoPE (NeoX over all 64 dims, base 150000, YaRN factor 32 over
// an original context of 4096, beta 32 / 1: core/rope_params.h as
// model/config.cpp reads it) on the GPU against the CPU, for a prompt
// chunk from position 4000 to past the original context; the kernels'
// f32 angles against the CPU's double ones, f16 in and out: 2e-3.
TEST(CudaGptOss, YarnRopeMatchesCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(8);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  const int hd = 64, n_heads = 8, n_kv = 2, bs = 16, first = 4000, n = 300;
  const int num_blocks = (first + n + bs - 1) / bs;
  RopeParams rope;
  rope.n_rot = hd;
  rope.neox = true;
  rope.freq_base = 150000.0f;
  rope.freq_scale = 1.0f / 32.0f;
  rope.ext_factor = 1.0f;
  rope.attn_factor = 1.0f;
  rope.beta_fast = 32.0f;
  rope.beta_slow = 1.0f;
  rope.n_ctx_orig = 4096;
  Batch b;
  b.reset(bs, num_blocks);
  std::vector<int32_t> toks(size_t(n), 0), table(static_cast<size_t>(num_blocks));
  std::iota(table.begin(), table.end(), 0);
  b.add_sequence(toks, first, table, false);
  gpu->reserve(BackendLimits{n, 4, num_blocks, 4, 10, 1, n_heads, hd});
  auto q = test::round_f16(test::randn(size_t(n) * n_heads * hd, rng)),
       k = test::round_f16(test::randn(size_t(n) * n_kv * hd, rng)), v = test::round_f16(test::randn(size_t(n) * n_kv * hd, rng));
  std::vector<float> kc(size_t(num_blocks) * bs * n_kv * hd, 0), vc(kc.size(), 0);
  auto cq = q, ck = k;
  Tensor tq = make_tensor(cq.data(), DType::F32, n_heads * hd, n), tk = make_tensor(ck.data(), DType::F32, n_kv * hd, n),
         tv = make_tensor(v.data(), DType::F32, n_kv * hd, n);
  KVLayer ccache{kc.data(), vc.data(), DType::F32, num_blocks, bs, n_kv, hd};
  cpu.rope_store_kv(tq, tk, tv, cpu.upload_step(b), rope, ccache);
  void* gkc = gpu->alloc(kc.size() * 2, "k cache");
  void* gvc = gpu->alloc(kc.size() * 2, "v cache");
  KVLayer gcache{gkc, gvc, DType::F16, num_blocks, bs, n_kv, hd};
  void* gq = test::upload(*gpu, test::to_f16(q));
  void* gk = test::upload(*gpu, test::to_f16(k));
  void* gv = test::upload(*gpu, test::to_f16(v));
  Tensor uq = gpu_tensor(gq, DType::F16, n_heads * hd, n), uk = gpu_tensor(gk, DType::F16, n_kv * hd, n),
         uv = gpu_tensor(gv, DType::F16, n_kv * hd, n);
  gpu->rope_store_kv(uq, uk, uv, gpu->upload_step(b), rope, gcache);
  EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, gq, cq.size())), cq), 2e-3);
  EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, gk, ck.size())), ck), 2e-3);
  EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, gkc, kc.size())), kc), 2e-3);
  // The YaRN terms matter here: without them the CPU's q differs by far more.
  RopeParams plain = rope;
  plain.ext_factor = 0.0f;
  auto pq = q, pk = k;
  Tensor tpq = make_tensor(pq.data(), DType::F32, n_heads * hd, n), tpk = make_tensor(pk.data(), DType::F32, n_kv * hd, n);
  std::vector<float> kc2(kc.size(), 0), vc2(kc.size(), 0);
  KVLayer c2{kc2.data(), vc2.data(), DType::F32, num_blocks, bs, n_kv, hd};
  cpu.rope_store_kv(tpq, tpk, tv, cpu.upload_step(b), plain, c2);
  EXPECT_GT(rel_l2(pq, cq), 0.05) << "the case does not exercise YaRN";
  for (void* p : {gkc, gvc, gq, gk, gv}) gpu->free(p);
}

// ---- whole models -------------------------------------------------------------

// The tiny-gpt-oss preset (4 layers, head size 64, 4 heads, 2 KV heads,
// window 16 on layers 0 and 2, YaRN, sinks, q/k/v/o biases, 8 experts of
// which 4 run with router and expert biases and the clamped SwiGLU),
// written in TYPE: a 24-token prompt (prefill past the window), then decode
// steps through captured graphs, the CPU's greedy tokens fed to both, on a
// prompt whose CPU routing is clear of near-ties (routing_margin.h): 4
// layers x 30 tokens make 120 routing choices, so most random prompts meet
// a near-tie somewhere and the search draws up to 200 (on the CPU, in
// milliseconds each; the same draws every run). Logits
// within 1e-2 relative L2 every step (as cuda_model_test.cpp); q4_k's
// decode steps, whose batch-1 GEMVs read 8-bit activations, within
// sqrt(5e-4) (cuda_model_test.cpp's kQ8ActivationsL2); the GPU's argmax is
// the CPU's.
class CudaGptOssModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGptOssModel, LogitsAndGreedyTokensMatchCpu) {
  RF_REQUIRE_GPU();
  const std::string type = GetParam();
  test::TempModel model("tiny-gpt-oss", type);
  constexpr int kSteps = 6, kPrompt = 24, kDraws = 200;
  test::RoutingMarginCpu cpu(2);
  std::mt19937 rng(9);
  int draw = 0;
  const std::vector<int32_t> prompt = test::clear_routing_prompt(model.path(), cpu, rng, kPrompt, kSteps, kDraws, &draw);
  ASSERT_FALSE(prompt.empty()) << type << ": no prompt with routing margins >= " << test::kMinRoutingMargin;
  std::printf("  tiny-gpt-oss %s: prompt draw %d, smallest routing margin %.2e\n", type.c_str(), draw,
              double(cpu.min_margin));
  auto gpu = test::make_gpu(false);
  test::ModelRunner g(model.path(), *gpu), c(model.path(), cpu);
  test::ModelRunner::Seq sg, sc;
  sg.tokens = sc.tokens = prompt;
  for (int step = 0; step < kSteps; ++step) {
    const auto lg = g.step({&sg})[0];
    const auto lc = c.step({&sc})[0];
    const double err = rel_l2(lg, lc);
    std::printf("  tiny-gpt-oss %s step %d: rel. L2 %.4f against the CPU\n", type.c_str(), step, err);
    EXPECT_LT(err, step > 0 && type == "q4_k" ? 0.0224 : 1e-2) << type << " step " << step;
    EXPECT_EQ(test::ModelRunner::argmax(lg), test::ModelRunner::argmax(lc)) << type << " step " << step;
    const int32_t next = test::ModelRunner::argmax(lc);
    sg.tokens.push_back(next);
    sc.tokens.push_back(next);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaGptOssModel, ::testing::Values("f16", "q8_0", "q4_k", "mxfp4_f16"),
                         [](const auto& info) { return test::param_name(info.param); });

}  // namespace
}  // namespace rf
