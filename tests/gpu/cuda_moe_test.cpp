// The CUDA backend's mixture-of-experts ops against naive double-precision
// references: routing (softmax, top-k with ties to the lower index,
// renormalisation on and off; with the router GEMV in the same launch) and the expert FFN for plain and quantized
// experts, one token (single-row GEMV tiles), a few (GEMV tiles of up to 8
// rows), many (tensor-core tiles where the format has them, MXFP4's rows
// of 2880 ending in a partial chunk; else GEMV tiles: the i-quants) and more tokens
// than the reserved chunk (the op loops); one token's down projections and
// their weighted sum in one launch (moe_down.cu).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <numeric>

#include "backend/cuda/moe/moe.cuh"
#include "core/activation.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "gpu/gpu_test_util.h"

namespace rf {
namespace {

using test::rel_l2;

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed route_reference(const std::vector<float>& logits, int n, int n_expert, int k, bool norm) {
  Routed r;
  for (int t = 0; t < n; ++t) {
    const float* l = logits.data() + size_t(t) * n_expert;
    const double mx = *std::max_element(l, l + n_expert);
    double sum = 0;
    for (int e = 0; e < n_expert; ++e) sum += std::exp(double(l[e]) - mx);
    std::vector<int> order(static_cast<size_t>(n_expert));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    double chosen = 0;
    for (int j = 0; j < k; ++j) chosen += std::exp(double(l[order[size_t(j)]]) - mx) / sum;
    for (int j = 0; j < k; ++j) {
      const double p = std::exp(double(l[order[size_t(j)]]) - mx) / sum;
      r.ids.push_back(order[size_t(j)]);
      r.weights.push_back(float(norm ? p / chosen : p));
    }
  }
  return r;
}

TEST(CudaMoe, RouteMatchesNaiveSoftmaxTopK) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(5);
  auto gpu = test::make_gpu();
  for (const auto& [n_expert, k] : {std::pair{4, 2}, std::pair{8, 2}, std::pair{128, 8}, std::pair{256, 8}}) {
    for (const bool norm : {true, false}) {
      const int n = 37;
      auto logits = test::randn(size_t(n) * n_expert, rng, 2.0f);
      // Ties: token 0's two largest logits equal (the lower index wins).
      const auto top = std::max_element(logits.begin(), logits.begin() + n_expert);
      logits[size_t(n_expert - 1)] = *top;
      void* gl = test::upload(*gpu, logits);
      void* gi = gpu->alloc(size_t(n) * k * 4, "ids");
      void* gw = gpu->alloc(size_t(n) * k * 4, "weights");
      Tensor tl = make_tensor(gl, DType::F32, n_expert, n, DeviceKind::CUDA);
      Tensor ti = make_tensor(gi, DType::I32, k, n, DeviceKind::CUDA), tw = make_tensor(gw, DType::F32, k, n, DeviceKind::CUDA);
      MoeParams p;
      p.n_expert = n_expert;
      p.n_used = k;
      p.norm_weights = norm;
      gpu->moe_route(tl, p, ti, tw);
      const Routed ref = route_reference(logits, n, n_expert, k, norm);
      EXPECT_EQ(test::download<int32_t>(*gpu, gi, ref.ids.size()), ref.ids) << n_expert << " experts";
      EXPECT_LT(rel_l2(test::download<float>(*gpu, gw, ref.weights.size()), ref.weights), 1e-6);
      for (void* b : {gl, gi, gw}) gpu->free(b);
    }
  }
}

struct Experts {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // dequantized, [rows, cols]
  Tensor host;
};

Experts make_experts(DType type, int rows, int cols, std::mt19937& rng) {
  Experts w;
  auto f = test::randn(size_t(rows) * cols, rng, 0.2f);
  w.bytes.resize(row_bytes(type, uint64_t(cols)) * size_t(rows));
  w.values.resize(f.size());
  test::quantize_rows(type, f.data(), rows, cols, w.bytes.data(), w.values.data());
  w.host = make_tensor(w.bytes.data(), type, cols, rows);
  return w;
}

double act_ref(double g, bool gelu) {
  if (!gelu) return g / (1.0 + std::exp(-g));
  return 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
}

// One token's router GEMV and routing in one launch
// (Fusions::moe_router): the logits against a double-precision
// product, the routing (and the one-token plan moe_ffn then uses) exactly
// as moe_route and moe_ffn give them from those logits; several launches in
// a row (the last block's ticket goes back to 0).
TEST(CudaMoe, RouterAndRouteInOneLaunch) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(41);
  for (const auto& [E, k, d] : {std::array{128, 8, 2048}, std::array{8, 2, 4096}, std::array{256, 8, 1024},
                                std::array{60, 4, 512}}) {
    const int ff = 64;
    const BackendLimits lim = test::moe_limits(8, E, k, ff, d);
    CudaOptions o;
    o.tune = [=](gpu::Tuning& t) {
      t.fusions.moe_router = true;
    };
    CudaBackend fused(o);
    auto plain = test::make_gpu();
    fused.reserve(lim);
    plain->reserve(lim);
    const auto router = test::randn(size_t(E) * d, rng, 0.05f);
    const Experts gate = make_experts(DType::Q8_0, E * ff, d, rng), up = make_experts(DType::Q8_0, E * ff, d, rng);
    const Experts down = make_experts(DType::Q8_0, E * d, ff, rng);
    struct Side {
      CudaBackend& gpu;
      Tensor router;
      ExpertWeights w;
    };
    const auto load = [&](CudaBackend& gpu) {
      ExpertWeights w;
      w.gate = gpu.load_weight(gate.host, "gate");
      w.up = gpu.load_weight(up.host, "up");
      w.down = gpu.load_weight(down.host, "down");
      w.n_expert = E;
      return Side{gpu, gpu.load_f32(router.data(), d, E, "router"), w};
    };
    Side sides[2] = {load(fused), load(*plain)};
    MoeParams p;
    p.n_expert = E;
    p.n_used = k;
    p.n_ff = ff;
    for (int round = 0; round < 3; ++round) {
      const auto x = test::round_f16(test::randn(size_t(d), rng));
      std::vector<float> out[2];
      std::vector<float> logits;
      for (int side = 0; side < 2; ++side) {
        CudaBackend& gpu = sides[side].gpu;
        Tensor tx = make_tensor(test::upload(gpu, test::to_f16(x)), DType::F16, d, 1, DeviceKind::CUDA);
        Tensor tl = make_tensor(gpu.alloc(size_t(E) * 4, "logits"), DType::F32, E, 1, DeviceKind::CUDA);
        Tensor ti = make_tensor(gpu.alloc(size_t(k) * 4, "ids"), DType::I32, k, 1, DeviceKind::CUDA);
        Tensor tw = make_tensor(gpu.alloc(size_t(k) * 4, "weights"), DType::F32, k, 1, DeviceKind::CUDA);
        Tensor to = make_tensor(gpu.alloc(size_t(d) * 2, "out"), DType::F16, d, 1, DeviceKind::CUDA);
        Handoff planned;  // the routing's plan for these ids, which moe_ffn takes
        if (side == 0) {
          planned = gpu.moe_router_route(tx, sides[side].router, p, tl, ti, tw);
          logits = test::download<float>(gpu, tl.data, size_t(E));
        } else {
          // The plain path from the fused side's logits: the same routing.
          gpu.copy_to_device(tl.data, logits.data(), size_t(E) * 4);
          planned = gpu.moe_route(tl, p, ti, tw);
        }
        EXPECT_TRUE(planned.data == ti.data && planned.copy != 0);
        gpu.moe_ffn(tx, ti, tw, sides[side].w, p, to, {}, planned);
        out[side] = test::from_f16(test::download<uint16_t>(gpu, to.data, size_t(d)));
        if (side == 0) {
          std::vector<double> ref(static_cast<size_t>(E), 0.0);
          for (int e = 0; e < E; ++e)
            for (int i = 0; i < d; ++i) ref[size_t(e)] += double(router[size_t(e) * d + i]) * x[size_t(i)];
          EXPECT_LT(rel_l2(logits, std::vector<float>(ref.begin(), ref.end())), 1e-5) << E << " experts";
          const Routed r = route_reference(logits, 1, E, k, true);
          EXPECT_EQ(test::download<int32_t>(gpu, ti.data, size_t(k)), r.ids) << E << " experts, round " << round;
          EXPECT_LT(rel_l2(test::download<float>(gpu, tw.data, size_t(k)), r.weights), 1e-6);
        }
        for (void* b : {tx.data, tl.data, ti.data, tw.data, to.data}) gpu.free(b);
      }
      EXPECT_EQ(out[0], out[1]) << E << " experts, round " << round << ": the expert FFN after the fused routing";
    }
  }
}

// One token's expert down rows and their weighted sum in one launch
// (gpu::moe_down_combined) against a double-precision sum over the same
// 8-bit GLU outputs: Qwen3-MoE's shape (8 of 128 experts, 768 wide), wide
// rows (4 warps a row set), one expert used, an output count that leaves
// a block's rows short, and choices whose GLU rows are permuted (pos_of).
TEST(CudaMoe, DownAndCombineInOneLaunch) {
  RF_REQUIRE_GPU();
  struct Shape {
    DType type;
    int n_expert, k, m, ff;
  };
  std::mt19937 rng(53);
  for (const Shape& c : {Shape{DType::Q4_K, 128, 8, 512, 768}, Shape{DType::Q6_K, 128, 8, 512, 768},
                         Shape{DType::Q4_K, 8, 2, 256, 14336}, Shape{DType::Q6_K, 4, 1, 98, 256},
                         Shape{DType::Q4_K, 16, 4, 30, 512}}) {
    CudaBackend gpu;
    gpu.reserve(test::moe_limits(4, c.n_expert, c.k, c.ff, c.m));
    ASSERT_TRUE(gpu::moe_down_combined_supported(gpu.tuning(), c.type, c.ff, c.k));
    const Experts down = make_experts(c.type, c.n_expert * c.m, c.ff, rng);
    const Tensor w = gpu.load_weight(down.host, "down");
    std::vector<int32_t> ids(static_cast<size_t>(c.n_expert)), pos(static_cast<size_t>(c.k));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    ids.resize(size_t(c.k));
    std::iota(pos.begin(), pos.end(), 0);
    std::shuffle(pos.begin(), pos.end(), rng);
    std::vector<float> weights(static_cast<size_t>(c.k));
    for (float& x : weights) x = std::uniform_real_distribution<float>(0.05f, 1.0f)(rng);
    const auto h = test::round_f16(test::randn(size_t(c.k) * c.ff, rng));
    void* gh = test::upload(gpu, test::to_f16(h));
    void* gi = test::upload(gpu, ids);
    void* gw = test::upload(gpu, weights);
    void* gp = test::upload(gpu, pos);
    void* go = gpu.alloc(size_t(c.m) * 2, "out");
    const size_t rb = row_bytes(c.type, uint64_t(c.ff));
    ASSERT_TRUE(gpu::moe_down_combined(c.type, w.data, rb * size_t(c.m), rb, c.m, c.ff, c.k, gh,
                                       static_cast<const int32_t*>(gi), static_cast<const float*>(gw),
                                       static_cast<const int32_t*>(gp), go, gpu.ctx()))
        << dtype_name(c.type) << " ff " << c.ff;
    const auto hq = test::q8_activations(h);
    std::vector<float> ref(static_cast<size_t>(c.m));
    for (int r = 0; r < c.m; ++r) {
      double s = 0;
      for (int j = 0; j < c.k; ++j) {
        const float* wr = down.values.data() + (size_t(ids[size_t(j)]) * c.m + r) * c.ff;
        const float* x = hq.data() + size_t(pos[size_t(j)]) * c.ff;
        double dot = 0;
        for (int i = 0; i < c.ff; ++i) dot += double(wr[i]) * x[i];
        s += double(weights[size_t(j)]) * dot;
      }
      ref[size_t(r)] = float(s);
    }
    // f32 sums of exact products, rounded to f16 once.
    const double err = rel_l2(test::from_f16(test::download<uint16_t>(gpu, go, size_t(c.m))), ref);
    EXPECT_LT(err, 1e-3) << dtype_name(c.type) << ", " << c.k << " of " << c.n_expert << " experts, ff " << c.ff;
    for (void* b : {gh, gi, gw, gp, go}) gpu.free(b);
  }
}

struct MoeCase {
  DType gate_type, down_type;
  int n_expert, k;
  bool gelu;
  int d = 256;  // model width (gate/up rows' length); 2048: one token's gate*up streams (gemv_stream.cu)
  int ff = 512;  // each expert's FFN width (the down rows' length)
  // One token's down GEMV streams too (Tuning::kq_stream_expert_rows;
  // with ff >= 2048, Q4_K / Q6_K), reading the GLU outputs' 8-bit quants
  // (ff 8192: two warps per row set).
  bool stream_rows = false;
  // ... also rows shorter than a warp's lanes have chunks (lane groups;
  // Tuning::kq_stream_short_expert_rows).
  bool short_rows = false;
  // One token's down rows and their weighted sum in one launch
  // (Fusions::moe_down).
  bool combined = false;
  // One token's 2,048-wide gate and up rows (one chunk a lane) in lane
  // groups of 16, else whole warps (Tuning::kq_stream_expert_groups).
  bool expert_groups = true;
  // gpt-oss's experts: gate, up and down biases and the clamped SwiGLU
  // (one token: gate, up, biases and GLU in one launch,
  // Fusions::moe_glu_biased; else a bias + GLU kernel after them).
  bool oai = false;
};

class CudaMoeFfn : public ::testing::TestWithParam<MoeCase> {};

// One case against the naive reference; `wgmma`: Tuning::wgmma (the
// batched expert matmuls on Hopper's wgmma kernel or on the mma.sync one).
void check_moe_case(const MoeCase& c, bool wgmma) {
  const int d = c.d, ff = c.ff, E = c.n_expert, k = c.k;
  std::mt19937 rng(17 + int(c.gate_type) * 7 + E);
  CudaOptions o;
  o.dequant_scratch_bytes = size_t(32) << 20;
  o.tune = [=](gpu::Tuning& t) {
    t.wgmma = wgmma;
    t.kq_stream_expert_rows = c.stream_rows;
    t.kq_stream_short_expert_rows = c.short_rows;
    t.fusions.moe_down = c.combined;
    t.kq_stream_expert_groups = c.expert_groups;
  };
  auto gpu = std::make_unique<CudaBackend>(o);
  // moe_ffn works in chunks of at most max_tokens tokens.
  const BackendLimits lim = test::moe_limits(128, E, k, ff, d);
  gpu->reserve(lim);
  const Experts gate = make_experts(c.gate_type, E * ff, d, rng), up = make_experts(c.gate_type, E * ff, d, rng);
  const Experts down = make_experts(c.down_type, E * d, ff, rng);
  ExpertWeights gw;
  gw.gate = gpu->load_weight(gate.host, "gate");
  gw.up = gpu->load_weight(up.host, "up");
  gw.down = gpu->load_weight(down.host, "down");
  gw.n_expert = E;
  std::vector<float> gate_bias, up_bias, down_bias;
  if (c.oai) {
    gate_bias = test::randn(size_t(E) * ff, rng, 0.5f), up_bias = test::randn(size_t(E) * ff, rng, 0.5f);
    down_bias = test::randn(size_t(E) * d, rng, 0.5f);
    gw.gate_bias = gpu->load_f32(gate_bias.data(), ff, E, "gate bias");
    gw.up_bias = gpu->load_f32(up_bias.data(), ff, E, "up bias");
    gw.down_bias = gpu->load_f32(down_bias.data(), d, E, "down bias");
  }
  MoeParams p;
  p.n_expert = E;
  p.n_used = k;
  p.n_ff = ff;
  p.act = c.oai ? Activation::SiLUClampedOai : c.gelu ? Activation::GeluTanh : Activation::SiLU;
  // (The wide streaming cases: one token, and a few for the other path.)
  const bool wide = c.stream_rows || c.combined;
  // (128 tokens of 128 experts, 8 each: expert tiles of 16 rows, the
  // busiest experts taking several.)
  for (const int n : wide ? std::vector<int>{1, 3} : std::vector<int>{1, 3, 8, 40, 128, 300}) {
    const auto x = test::round_f16(test::randn(size_t(n) * d, rng));
    const auto logits = test::randn(size_t(n) * E, rng, 2.0f);
    void* gx = test::upload(*gpu, test::to_f16(x));
    void* gl = test::upload(*gpu, logits);
    void* gi = gpu->alloc(size_t(n) * k * 4, "ids");
    void* gwt = gpu->alloc(size_t(n) * k * 4, "weights");
    void* go = gpu->alloc(size_t(n) * d * 2, "out");
    Tensor tx = make_tensor(gx, DType::F16, d, n, DeviceKind::CUDA), tl = make_tensor(gl, DType::F32, E, n, DeviceKind::CUDA);
    Tensor ti = make_tensor(gi, DType::I32, k, n, DeviceKind::CUDA), tw = make_tensor(gwt, DType::F32, k, n, DeviceKind::CUDA);
    Tensor to = make_tensor(go, DType::F16, d, n, DeviceKind::CUDA);
    const Handoff planned = gpu->moe_route(tl, p, ti, tw);  // (one token: its plan)
    EXPECT_EQ(planned.copy != 0, n == 1);
    gpu->moe_ffn(tx, ti, tw, gw, p, to, {}, planned);
    const Routed r = route_reference(logits, n, E, k, true);
    // The activations as the gate*up GEMV reads them (8-bit for one token
    // on wide rows).
    const auto xr = test::gemv_activations(*gpu, c.gate_type, n, d, x);
    std::vector<float> ref(size_t(n) * d, 0.0f);
    std::vector<double> h(static_cast<size_t>(ff));
    for (int t = 0; t < n; ++t) {
      std::vector<double> acc(static_cast<size_t>(d), 0.0);
      for (int j = 0; j < k; ++j) {
        const int e = r.ids[size_t(t) * k + j];
        for (int i = 0; i < ff; ++i) {
          double g = 0, u = 0;
          const float* wg = gate.values.data() + (size_t(e) * ff + i) * d;
          const float* wu = up.values.data() + (size_t(e) * ff + i) * d;
          for (int q = 0; q < d; ++q) {
            g += double(wg[q]) * xr[size_t(t) * d + q];
            u += double(wu[q]) * xr[size_t(t) * d + q];
          }
          if (c.oai) {  // (f16 products as the GPU stores them, then the biases)
            g = double(f16_to_f32(f32_to_f16(float(g)))) + gate_bias[size_t(e) * ff + i];
            u = double(f16_to_f32(f32_to_f16(float(u)))) + up_bias[size_t(e) * ff + i];
            const double gc = std::min(g, double(kOaiGluLimit)), uc = std::clamp(u, -double(kOaiGluLimit),
                                                                                  double(kOaiGluLimit));
            h[size_t(i)] = gc / (1.0 + std::exp(-double(kOaiGluAlpha) * gc)) * (uc + 1.0);
          } else {
            h[size_t(i)] = act_ref(g, c.gelu) * u;
          }
        }
        if (n == 1 && gpu->expert_down_quantizes_activations(c.down_type, ff, k)) {
          // The down GEMV reads the f16 GLU output's 8-bit quants.
          std::vector<float> hf(h.begin(), h.end());
          hf = test::q8_activations(test::round_f16(std::move(hf)));
          std::copy(hf.begin(), hf.end(), h.begin());
        }
        for (int o = 0; o < d; ++o) {
          double s = 0;
          const float* wd = down.values.data() + (size_t(e) * d + o) * ff;
          for (int i = 0; i < ff; ++i) s += double(wd[i]) * h[size_t(i)];
          if (c.oai) s += down_bias[size_t(e) * d + o];
          acc[size_t(o)] += r.weights[size_t(t) * k + j] * s;
        }
      }
      for (int o = 0; o < d; ++o) ref[size_t(t) * d + o] = float(acc[size_t(o)]);
    }
    // f16 activations and the f16 intermediate (as the dense FFN stores it):
    // 3e-3. Where the down GEMV quantizes the intermediate to 8 bits, the
    // GPU's and the reference's intermediates still differ by f16 rounding
    // (delta), and rounding to 8 bits turns such a difference into a whole
    // step (amax / 127) with probability delta / step: an error of rms
    // sqrt(delta * step), measured 1.6e-3 - 1.9e-3 (3.6e-3 where the
    // gate*up GEMV itself ran in f16 arithmetic); allowed 5e-3.
    const double err = rel_l2(test::from_f16(test::download<uint16_t>(*gpu, go, ref.size())), ref);
    std::printf("  %d tokens: rel. L2 %.6f\n", n, err);
    if (wide && n == 1) {
      EXPECT_TRUE(gpu->expert_down_quantizes_activations(c.down_type, ff, k)) << "the case streams its down rows";
    }
    EXPECT_LT(err, wide && n == 1 ? 5e-3 : 3e-3)
        << n << " tokens, " << dtype_name(c.gate_type) << "/" << dtype_name(c.down_type) << (wgmma ? "" : ", mma.sync");
    for (void* b : {gx, gl, gi, gwt, go}) gpu->free(b);
  }
}

TEST_P(CudaMoeFfn, MatchesNaiveReference) {
  RF_REQUIRE_GPU();
  const MoeCase c = GetParam();
  check_moe_case(c, true);
  // The wide streaming cases run one token and three (no tensor cores):
  // the mma.sync kernel matters for the others.
  if (!(c.stream_rows || c.combined)) check_moe_case(c, false);
}

INSTANTIATE_TEST_SUITE_P(Types, CudaMoeFfn,
                         ::testing::Values(MoeCase{DType::F16, DType::F16, 8, 2, false},
                                           MoeCase{DType::Q4_K, DType::Q6_K, 8, 2, false},
                                           MoeCase{DType::Q4_K, DType::Q4_K, 16, 4, true},
                                           MoeCase{DType::Q4_K, DType::Q6_K, 8, 2, false, 2048},
                                           MoeCase{DType::Q4_K, DType::Q6_K, 8, 2, false, 2048, 512, false, false,
                                                   false, false},
                                           MoeCase{DType::Q6_K, DType::Q6_K, 16, 4, true, 2048},
                                           MoeCase{DType::Q4_K, DType::Q6_K, 8, 2, false, 2048, 2048, true},
                                           MoeCase{DType::Q4_K, DType::Q4_K, 2, 2, true, 2048, 8192, true},
                                           // short rows: 12 chunks (Qwen3-MoE's 768), 8 chunks
                                           MoeCase{DType::Q4_K, DType::Q6_K, 16, 4, false, 2048, 768, true, true},
                                           MoeCase{DType::Q4_K, DType::Q4_K, 8, 2, false, 2048, 512, true, true},
                                           // down + combine in one launch: Qwen3-MoE's shape (96
                                           // chunks a joined row), wide rows (4 warps a row set)
                                           MoeCase{DType::Q4_K, DType::Q6_K, 16, 8, false, 2048, 768, false, false, true},
                                           MoeCase{DType::Q4_K, DType::Q4_K, 8, 2, true, 2048, 8192, false, false, true},
                                           MoeCase{DType::Q6_K, DType::Q4_K, 8, 1, false, 256, 256, false, false, true},
                                           MoeCase{DType::Q6_K, DType::Q6_K, 128, 8, false},
                                           MoeCase{DType::Q8_0, DType::Q8_0, 4, 2, false},
                                           MoeCase{DType::Q5_K, DType::Q6_K, 8, 2, false},
                                           MoeCase{DType::Q5_0, DType::Q5_0, 4, 2, false},
                                           MoeCase{DType::Q4_0, DType::Q5_1, 4, 2, false},
                                           MoeCase{DType::Q4_1, DType::Q4_0, 4, 2, false},
                                           MoeCase{DType::F8_E4M3_ROW, DType::F8_E4M3_ROW, 8, 2, false},
                                           // gpt-oss's 2880-wide MXFP4 experts (4 of 32; tensor
                                           // cores for many tokens, gate/up and then down rows
                                           // 2880 long: 11 chunks and 2 slices); the i-quants
                                           // (GEMV tiles at every batch): IQ4_XS and two formats
                                           // below 4 bits
                                           MoeCase{DType::MXFP4, DType::MXFP4, 32, 4, false, 2880, 256},
                                           MoeCase{DType::MXFP4, DType::MXFP4, 8, 2, false, 256, 2880},
                                           // ... in gpt-oss's shape: biases, the clamped SwiGLU,
                                           // one token's down rows streamed
                                           MoeCase{DType::MXFP4, DType::MXFP4, 32, 4, false, 2880, 2880, true, false,
                                                   false, true, true},
                                           MoeCase{DType::MXFP4, DType::MXFP4, 8, 2, false, 256, 512, false, false,
                                                   false, true, true},
                                           MoeCase{DType::IQ4_XS, DType::IQ4_XS, 8, 2, false},
                                           MoeCase{DType::IQ4_NL, DType::MXFP4, 8, 2, true},
                                           MoeCase{DType::IQ2_XXS, DType::IQ3_S, 4, 2, false},
                                           MoeCase{DType::F32, DType::F32, 8, 2, false}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.gate_type)) + "_" +
                                  dtype_name(info.param.down_type) + "_e" + std::to_string(info.param.n_expert) +
                                  (info.param.gelu ? "_gelu" : "") +
                                  (info.param.d != 256 ? "_d" + std::to_string(info.param.d) : "") +
                                  (info.param.ff != 512 ? "_ff" + std::to_string(info.param.ff) : "") +
                                  (info.param.stream_rows ? "_stream_rows" : "") +
                                  (info.param.short_rows ? "_short" : "") +
                                  (info.param.combined ? "_combined" : "") +
                                  (info.param.expert_groups ? "" : "_whole_warps") + (info.param.oai ? "_oai" : "");
                         });

}  // namespace
}  // namespace rf
