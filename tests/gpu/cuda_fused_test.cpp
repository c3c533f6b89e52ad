// The CUDA backend's fused ops (q/k/v in one GEMV, packed q/k/v weights in
// one matmul, gate*up with SwiGLU or GeGLU, add + RMSNorm with or without a
// post norm, per-head q/k norms with RoPE and the KV store) against the CPU
// backend's unfused reference, on fresh random inputs, for plain and
// quantized weights.
#include <gtest/gtest.h>

#include <array>

#include "core/error.h"
#include "core/quant.h"
#include "gpu/gpu_test_util.h"

namespace rf {
namespace {

using test::rel_l2;

struct Weight {
  std::vector<uint8_t> bytes;
  Tensor host;
};

Weight make_weight(DType type, int rows, int cols, std::mt19937& rng) {
  Weight w;
  auto f = test::randn(size_t(rows) * cols, rng, 0.3f);
  const size_t rb = row_bytes(type, uint64_t(cols));
  w.bytes.resize(rb * size_t(rows));
  for (int r = 0; r < rows; ++r) quantize_row(type, f.data() + size_t(r) * cols, w.bytes.data() + r * rb, size_t(cols));
  w.host = make_tensor(w.bytes.data(), type, cols, rows);
  return w;
}

// q/k/v-like weights on both backends with an f32 bias each.
struct Projections {
  std::vector<Tensor> cws, gws, cbias, gbias;
  std::vector<std::vector<float>> bias;
  void add(const Tensor& host, const Tensor& device, CudaBackend& gpu, std::mt19937& rng) {
    cws.push_back(host);
    gws.push_back(device);
    bias.push_back(test::randn(size_t(host.rows()), rng));
    cbias.push_back(make_tensor(bias.back().data(), DType::F32, host.rows()));
    gbias.push_back(gpu.load_f32(bias.back().data(), host.rows(), 1, "bias"));
  }
};

// matmul_multi of x (cx on the CPU, tx on the GPU) by p's weights, without
// and with the biases: each GPU output within 4e-3 relative L2 of the CPU's.
void expect_projections_match(CpuBackend& cpu, CudaBackend& gpu, const Tensor& cx, const Tensor& tx,
                              const Projections& p, const std::string& what) {
  const int64_t n = cx.rows();
  const size_t count = p.cws.size();
  for (const bool with_bias : {false, true}) {
    std::vector<std::vector<float>> ref(count);
    std::vector<Tensor> couts, gouts;
    for (size_t i = 0; i < count; ++i) {
      const int64_t rows = p.cws[i].rows();
      ref[i].resize(size_t(n * rows));
      couts.push_back(make_tensor(ref[i].data(), DType::F32, rows, n));
      gouts.push_back(make_tensor(gpu.alloc(size_t(n * rows) * 2, "out"), DType::F16, rows, n, DeviceKind::CUDA));
    }
    cpu.matmul_multi(cx, p.cws, couts, with_bias ? std::span<const Tensor>(p.cbias) : std::span<const Tensor>());
    gpu.matmul_multi(tx, p.gws, gouts, with_bias ? std::span<const Tensor>(p.gbias) : std::span<const Tensor>());
    for (size_t i = 0; i < count; ++i) {
      EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(gpu, gouts[i].data, ref[i].size())), ref[i]), 4e-3)
          << what << " output " << i << (with_bias ? " with bias" : "");
      gpu.free(gouts[i].data);
    }
  }
}

class CudaFused : public ::testing::TestWithParam<DType> {};

TEST_P(CudaFused, MatchCpuReference) {
  RF_REQUIRE_GPU();
  const DType type = GetParam();
  std::mt19937 rng(21 + int(type));
  auto gpu = test::make_gpu();
  gpu->reserve(BackendLimits{64, 4, 4, 8, 100, 2048 * 512, 1, 1});
  CpuBackend cpu(2);
  // k = 512 and 2048: one-row k-quant GEMVs on such short rows split a
  // block's warps into 4 or 2 sets of rows.
  for (const int k : {512, 2048})
  for (int n : {1, 3, 8}) {
    auto x = test::round_f16(test::randn(size_t(n) * k, rng));
    void* gx = test::upload(*gpu, test::to_f16(x));
    auto xr = test::gemv_activations(*gpu, type, n, k, x);
    Tensor cx = make_tensor(xr.data(), DType::F32, k, n), tx = make_tensor(gx, DType::F16, k, n, DeviceKind::CUDA);
    // q/k/v: 3 weights of different heights, with and without biases (q/k/v
    // biases of Qwen2 and GLM-4; the GEMV adds them in its epilogue).
    const int rows[3] = {256, 64, 96};
    std::vector<Weight> ws;
    Projections qkv;
    for (int i = 0; i < 3; ++i) {
      ws.push_back(make_weight(type, rows[i], k, rng));
      qkv.add(ws.back().host, gpu->load_weight(ws.back().host, "w"), *gpu, rng);
    }
    expect_projections_match(cpu, *gpu, cx, tx, qkv, str(dtype_name(type), " k=", k, " n=", n));
    // gate * up with SwiGLU and with GeGLU.
    Weight wg = make_weight(type, 320, k, rng), wu = make_weight(type, 320, k, rng);
    Tensor gwg = gpu->load_weight(wg.host, "g"), gwu = gpu->load_weight(wu.host, "u");
    for (const Activation act : {Activation::SiLU, Activation::GeluTanh}) {
      std::vector<float> g(size_t(n) * 320), u(g.size());
      Tensor cg = make_tensor(g.data(), DType::F32, 320, n), cu = make_tensor(u.data(), DType::F32, 320, n);
      cpu.matmul_gate_up_glu(cx, wg.host, wu.host, cg, cu, cg, act);
      Tensor go = make_tensor(gpu->alloc(g.size() * 2, "o"), DType::F16, 320, n, DeviceKind::CUDA);
      Tensor gu = make_tensor(gpu->alloc(g.size() * 2, "u"), DType::F16, 320, n, DeviceKind::CUDA);
      gpu->matmul_gate_up_glu(tx, gwg, gwu, go, gu, go, act);
      EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, go.data, g.size())), g), 5e-3)
          << dtype_name(type) << " k=" << k << " n=" << n << (act == Activation::SiLU ? " gate*up silu" : " gate*up gelu");
      gpu->free(go.data);
      gpu->free(gu.data);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaFused,
                         ::testing::Values(DType::F16, DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::F8_E4M3_ROW),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// q, k and v weights in one allocation (Backend::packs_qkv, as the loader
// places them for the GPU): batches of 9..256 rows take one matmul and a
// split into the three outputs with their biases (CudaBackend::
// packed_matmul), larger ones three matmuls; each output matches the CPU.
class CudaPackedQkv : public ::testing::TestWithParam<DType> {};

TEST_P(CudaPackedQkv, MatchesCpu) {
  RF_REQUIRE_GPU();
  const DType type = GetParam();
  std::mt19937 rng(41 + int(type));
  auto gpu = test::make_gpu();
  // 4 query heads and 1 KV head of 64: a packed width of 384.
  gpu->reserve(BackendLimits{512, 4, 4, 4, 100, 384 * 512, 4, 64, 1});
  CpuBackend cpu(2);
  const int k = 512, rows[3] = {256, 64, 64};
  const Weight packed = make_weight(type, 384, k, rng);
  const Tensor gpacked = gpu->load_weight(packed.host, "qkv");
  Projections qkv;
  for (int i = 0, first = 0; i < 3; first += rows[i++])
    qkv.add(packed.host.slice_rows(first, rows[i]), gpacked.slice_rows(first, rows[i]), *gpu, rng);
  for (const int n : {9, 40, 64, 256, 300}) {
    auto x = test::round_f16(test::randn(size_t(n) * k, rng));
    void* gx = test::upload(*gpu, test::to_f16(x));
    auto xr = test::matmul_activations(*gpu, packed.host, n, DType::F16, x);
    Tensor cx = make_tensor(xr.data(), DType::F32, k, n), tx = make_tensor(gx, DType::F16, k, n, DeviceKind::CUDA);
    expect_projections_match(cpu, *gpu, cx, tx, qkv, str(dtype_name(type), " n=", n));
    gpu->free(gx);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaPackedQkv,
                         ::testing::Values(DType::F16, DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::F8_E4M3_ROW),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Gate and up weights in one allocation (as the loader places them for the
// GPU, or as a fused ffn_up holds them): batches of 9..256 rows take one
// matmul over both and the GLU of its two halves (CudaBackend::
// packed_gate_up), larger ones two matmuls; SwiGLU and GeGLU match the CPU
// either way, with the packed matmul on and off.
class CudaPackedGateUp : public ::testing::TestWithParam<DType> {};

TEST_P(CudaPackedGateUp, MatchesCpu) {
  RF_REQUIRE_GPU();
  const DType type = GetParam();
  CpuBackend cpu(2);
  const int k = 512, ff = 320;
  for (const bool packed_matmul : {true, false}) {
    std::mt19937 rng(43 + int(type));
    CudaOptions o;
    o.tune = [=](gpu::Tuning& t) {
      t.fusions.packed_gate_up = packed_matmul;
    };
    CudaBackend gpu(o);
    BackendLimits lim{512, 4, 4, 4, 100, 2 * ff * k, 4, 64, 1};
    lim.n_ff = ff;
    gpu.reserve(lim);
    const Weight both = make_weight(type, 2 * ff, k, rng);
    const Tensor gboth = gpu.load_weight(both.host, "gate_up");
    const Tensor cg_w = both.host.slice_rows(0, ff), cu_w = both.host.slice_rows(ff, ff);
    const Tensor gg_w = gboth.slice_rows(0, ff), gu_w = gboth.slice_rows(ff, ff);
    for (const int n : {9, 40, 64, 256, 300}) {
      auto x = test::round_f16(test::randn(size_t(n) * k, rng));
      void* gx = test::upload(gpu, test::to_f16(x));
      auto xr = test::matmul_activations(gpu, both.host, n, DType::F16, x);
      Tensor cx = make_tensor(xr.data(), DType::F32, k, n), tx = make_tensor(gx, DType::F16, k, n, DeviceKind::CUDA);
      for (const Activation act : {Activation::SiLU, Activation::GeluTanh}) {
        std::vector<float> g(size_t(n) * ff), u(g.size());
        Tensor cg = make_tensor(g.data(), DType::F32, ff, n), cu = make_tensor(u.data(), DType::F32, ff, n);
        cpu.matmul_gate_up_glu(cx, cg_w, cu_w, cg, cu, cg, act);
        Tensor go = make_tensor(gpu.alloc(g.size() * 2, "o"), DType::F16, ff, n, DeviceKind::CUDA);
        Tensor gu = make_tensor(gpu.alloc(g.size() * 2, "u"), DType::F16, ff, n, DeviceKind::CUDA);
        gpu.matmul_gate_up_glu(tx, gg_w, gu_w, go, gu, go, act);
        EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(gpu, go.data, g.size())), g), 5e-3)
            << dtype_name(type) << " n=" << n << (act == Activation::SiLU ? " silu" : " gelu")
            << (packed_matmul ? ", packed" : ", two matmuls");
        gpu.free(go.data);
        gpu.free(gu.data);
      }
      gpu.free(gx);
    }
    gpu.free(gboth.data);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaPackedGateUp,
                         ::testing::Values(DType::F16, DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::F8_E4M3_ROW),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// q/k/v of mixed formats (q4_k_m keeps some V projections in Q6_K): one
// row takes one launch of the streaming GEMV for both formats
// (Fusions::gemv_two_formats), a few rows the leading run of one
// format fused and the rest alone; all match the CPU, with and without
// biases.
TEST(CudaFusedOps, MixedFormatProjectionsMatchCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(5);
  auto gpu = test::make_gpu();
  gpu->reserve(BackendLimits{64, 4, 4, 8, 100, 2048 * 512, 1, 1});
  CpuBackend cpu(2);
  const int rows[3] = {256, 64, 64};
  // 2048 wide: one chunk a lane; 3584: 56 chunks, a lane's first two
  // loaded before the PDL wait (Tuning::kq_stream_early_two).
  for (const int k : {2048, 3584})
  for (const auto& types : {std::array<DType, 3>{DType::Q4_K, DType::Q4_K, DType::Q6_K},
                            std::array<DType, 3>{DType::Q6_K, DType::Q4_K, DType::Q4_K}}) {
    std::vector<Weight> ws;
    std::vector<Tensor> cws, gws;
    for (int i = 0; i < 3; ++i) {
      ws.push_back(make_weight(types[size_t(i)], rows[i], k, rng));
      cws.push_back(ws.back().host);
      gws.push_back(gpu->load_weight(ws.back().host, "w"));
    }
    std::vector<std::vector<float>> bias(3);
    std::vector<Tensor> gbias;
    for (int i = 0; i < 3; ++i) {
      bias[size_t(i)] = test::randn(size_t(rows[i]), rng);
      gbias.push_back(gpu->load_f32(bias[size_t(i)].data(), rows[i], 1, "bias"));
    }
    for (const bool with_bias : {false, true})
    for (int n : {1, 3}) {
      auto x = test::round_f16(test::randn(size_t(n) * k, rng));
      void* gx = test::upload(*gpu, test::to_f16(x));
      Tensor tx = make_tensor(gx, DType::F16, k, n, DeviceKind::CUDA);
      std::vector<std::vector<float>> ref(3);
      std::vector<Tensor> gouts;
      for (int i = 0; i < 3; ++i) {
        // Each output from the activations its format's GEMV reads.
        auto xr = test::gemv_activations(*gpu, types[size_t(i)], n, k, x);
        ref[size_t(i)].resize(size_t(n) * rows[i]);
        Tensor cx = make_tensor(xr.data(), DType::F32, k, n);
        Tensor cout = make_tensor(ref[size_t(i)].data(), DType::F32, rows[i], n);
        cpu.matmul(cx, cws[size_t(i)], cout);
        if (with_bias)
          for (size_t j = 0; j < ref[size_t(i)].size(); ++j) ref[size_t(i)][j] += bias[size_t(i)][j % size_t(rows[i])];
        gouts.push_back(make_tensor(gpu->alloc(size_t(n) * rows[i] * 2, "out"), DType::F16, rows[i], n, DeviceKind::CUDA));
      }
      gpu->matmul_multi(tx, gws, gouts, with_bias ? std::span<const Tensor>(gbias) : std::span<const Tensor>());
      for (int i = 0; i < 3; ++i) {
        EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, gouts[size_t(i)].data, ref[size_t(i)].size())),
                         ref[size_t(i)]),
                  4e-3)
            << "n=" << n << " output " << i << " " << dtype_name(types[size_t(i)]) << (with_bias ? " with bias" : "")
            << ", k=" << k;
        gpu->free(gouts[size_t(i)].data);
      }
      gpu->free(gx);
    }
    for (Tensor& b : gbias) gpu->free(b.data);
    for (Tensor& g : gws) gpu->free(g.data);
  }
}

// 5 rows: the decode kernel (values in registers); 100 rows of 4096: the
// prefill variant in registers; 100 rows of 5120: the loop. A row's
// result must not depend on the launch it is in (bit for bit).
TEST(CudaFusedOps, AddRmsNormMatchesCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(31);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  for (const int d : {4096, 5120}) {
    const int n = 100, few = 5;
    auto x = test::randn(size_t(n) * d, rng, 4.0f), y = test::round_f16(test::randn(size_t(n) * d, rng)),
         w = test::randn(size_t(d), rng);
    std::vector<float> cx = x, out(x.size());
    Tensor tcx = make_tensor(cx.data(), DType::F32, d, n), ty = make_tensor(y.data(), DType::F32, d, n),
           tw = make_tensor(w.data(), DType::F32, d), to = make_tensor(out.data(), DType::F32, d, n);
    cpu.add_rms_norm(tcx, ty, tw, 1e-5f, to);
    Tensor gw = gpu->load_f32(w.data(), d, 1, "w");
    const auto run = [&](int rows) {
      void* gx = test::upload(*gpu, std::vector<float>(x.begin(), x.begin() + size_t(rows) * d));
      void* gy = test::upload(*gpu, test::to_f16(std::vector<float>(y.begin(), y.begin() + size_t(rows) * d)));
      void* go = gpu->alloc(size_t(rows) * d * 2, "o");
      Tensor ugx = make_tensor(gx, DType::F32, d, rows, DeviceKind::CUDA),
             ugy = make_tensor(gy, DType::F16, d, rows, DeviceKind::CUDA),
             ugo = make_tensor(go, DType::F16, d, rows, DeviceKind::CUDA);
      gpu->add_rms_norm(ugx, ugy, gw, 1e-5f, ugo);
      std::pair<std::vector<float>, std::vector<uint16_t>> r{test::download<float>(*gpu, gx, size_t(rows) * d),
                                                             test::download<uint16_t>(*gpu, go, size_t(rows) * d)};
      gpu->free(gx);
      gpu->free(gy);
      gpu->free(go);
      return r;
    };
    const auto [all_x, all_o] = run(n);
    const auto [few_x, few_o] = run(few);
    EXPECT_LT(rel_l2(all_x, cx), 1e-6) << d;
    EXPECT_LT(rel_l2(test::from_f16(all_o), out), 1e-3) << d;
    EXPECT_EQ(few_x, std::vector<float>(all_x.begin(), all_x.begin() + size_t(few) * d)) << d;
    EXPECT_EQ(few_o, std::vector<uint16_t>(all_o.begin(), all_o.begin() + size_t(few) * d)) << d;
    gpu->free(gw.data);
  }
}

// Gemma's and GLM-4's post norms: x += rms_norm(y) * wy, then the next
// RMSNorm, against the CPU's three separate ops.
TEST(CudaFusedOps, AddPostNormRmsNormMatchesCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(37);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  for (const int n : {1, 5, 100}) {
    const int d = 3584;
    auto x = test::randn(size_t(n) * d, rng, 4.0f), y = test::round_f16(test::randn(size_t(n) * d, rng, 3.0f)),
         wy = test::randn(size_t(d), rng), w = test::randn(size_t(d), rng);
    std::vector<float> cx = x, out(x.size());
    Tensor tcx = make_tensor(cx.data(), DType::F32, d, n), ty = make_tensor(y.data(), DType::F32, d, n),
           twy = make_tensor(wy.data(), DType::F32, d), tw = make_tensor(w.data(), DType::F32, d),
           to = make_tensor(out.data(), DType::F32, d, n);
    cpu.add_post_norm_rms_norm(tcx, ty, twy, tw, 1e-6f, to);
    void* gx = test::upload(*gpu, x);
    void* gy = test::upload(*gpu, test::to_f16(y));
    Tensor gwy = gpu->load_f32(wy.data(), d, 1, "wy"), gw = gpu->load_f32(w.data(), d, 1, "w");
    void* go = gpu->alloc(out.size() * 2, "o");
    Tensor ugx = make_tensor(gx, DType::F32, d, n, DeviceKind::CUDA), ugy = make_tensor(gy, DType::F16, d, n, DeviceKind::CUDA),
           ugo = make_tensor(go, DType::F16, d, n, DeviceKind::CUDA);
    gpu->add_post_norm_rms_norm(ugx, ugy, gwy, gw, 1e-6f, ugo);
    // The normed y is rounded to f16 on the GPU (as a separate norm would
    // store it), not on the CPU: x differs by that rounding (~3e-4 of |y'|).
    EXPECT_LT(rel_l2(test::download<float>(*gpu, gx, x.size()), cx), 2e-4) << n << " rows";
    EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, go, out.size())), out), 1e-3) << n << " rows";
    gpu->free(gx);
    gpu->free(gy);
    gpu->free(gwy.data);
    gpu->free(gw.data);
    gpu->free(go);
  }
}

// Qwen3's and Gemma 3's per-head q/k norms inside the RoPE + KV store
// kernel (Fusions::qk_norm_rope) against the CPU's rms_norm_pair
// then rope_store_kv, and against the GPU's two kernels (the same values
// but for the order of a head's sum of squares).
struct QkNormRopeShape {
  int hd, n_heads, n_kv, n_rot;
  bool neox;
  int n = 5;  // tokens (past 512 the kernel's blocks loop over several)
};

class CudaQkNormRope : public ::testing::TestWithParam<QkNormRopeShape> {};

TEST_P(CudaQkNormRope, MatchesCpuAndUnfused) {
  RF_REQUIRE_GPU();
  const QkNormRopeShape sh = GetParam();
  const int hd = sh.hd, bs = 16, n = sh.n, first = 37, num_blocks = (first + n + bs - 1) / bs;
  std::mt19937 rng(29 + hd);
  RopeParams rope;
  rope.n_rot = sh.n_rot;
  rope.neox = sh.neox;
  rope.freq_base = 1e6f;
  rope.n_ctx_orig = 8192;
  Batch b;
  b.reset(bs, num_blocks);
  std::vector<int32_t> table(num_blocks);
  for (int i = 0; i < num_blocks; ++i) table[i] = num_blocks - 1 - i;  // blocks out of order
  b.add_sequence(std::vector<int32_t>(n, 0), first, table, false);
  const size_t q_n = size_t(n) * sh.n_heads * hd, k_n = size_t(n) * sh.n_kv * hd, cache_n = size_t(num_blocks) * bs * sh.n_kv * hd;
  const auto q_raw = test::round_f16(test::randn(q_n, rng, 2.0f)), k_raw = test::round_f16(test::randn(k_n, rng, 2.0f)),
             v = test::round_f16(test::randn(k_n, rng));
  auto wq = test::randn(size_t(hd), rng, 0.3f), wk = test::randn(size_t(hd), rng, 0.3f);
  for (float& w : wq) w += 1.0f;
  for (float& w : wk) w += 1.0f;

  // The CPU: the default (rms_norm_pair, then rope_store_kv).
  CpuBackend cpu(2);
  std::vector<float> cq(q_n), ck(k_n), kc(cache_n, 0.0f), vc(cache_n, 0.0f);
  {
    auto cq_raw = q_raw, ck_raw = k_raw, cv = v;
    Tensor tq_raw = make_tensor(cq_raw.data(), DType::F32, sh.n_heads * hd, n),
           tk_raw = make_tensor(ck_raw.data(), DType::F32, sh.n_kv * hd, n),
           tv = make_tensor(cv.data(), DType::F32, sh.n_kv * hd, n), tq = make_tensor(cq.data(), DType::F32, sh.n_heads * hd, n),
           tk = make_tensor(ck.data(), DType::F32, sh.n_kv * hd, n), twq = make_tensor(wq.data(), DType::F32, hd),
           twk = make_tensor(wk.data(), DType::F32, hd);
    KVLayer cache{kc.data(), vc.data(), DType::F32, num_blocks, bs, sh.n_kv, hd};
    cpu.qk_norm_rope_store_kv(tq_raw, twq, tk_raw, twk, 1e-6f, tq, tk, tv, cpu.upload_step(b), rope, cache);
  }

  struct Out {
    std::vector<float> q, k, kc, vc;
  };
  const auto run_gpu = [&](bool fused) {
    CudaOptions o;
    o.tune = [=](gpu::Tuning& t) {
      t.fusions.qk_norm_rope = fused;
    };
    CudaBackend gpu(o);
    gpu.reserve(BackendLimits{std::max(n, 64), 4, num_blocks, 4, 10, 1, sh.n_heads, hd});
    void* gkc = gpu.alloc(cache_n * 2, "k cache");
    void* gvc = gpu.alloc(cache_n * 2, "v cache");
    const std::vector<uint16_t> zeros(cache_n, 0);
    gpu.copy_to_device(gkc, zeros.data(), cache_n * 2);
    gpu.copy_to_device(gvc, zeros.data(), cache_n * 2);
    KVLayer cache{gkc, gvc, DType::F16, num_blocks, bs, sh.n_kv, hd};
    void* gq = gpu.alloc(q_n * 2, "q");
    void* gk = gpu.alloc(k_n * 2, "k");
    Tensor uq_raw = make_tensor(test::upload(gpu, test::to_f16(q_raw)), DType::F16, sh.n_heads * hd, n, DeviceKind::CUDA),
           uk_raw = make_tensor(test::upload(gpu, test::to_f16(k_raw)), DType::F16, sh.n_kv * hd, n, DeviceKind::CUDA),
           uv = make_tensor(test::upload(gpu, test::to_f16(v)), DType::F16, sh.n_kv * hd, n, DeviceKind::CUDA),
           uq = make_tensor(gq, DType::F16, sh.n_heads * hd, n, DeviceKind::CUDA),
           uk = make_tensor(gk, DType::F16, sh.n_kv * hd, n, DeviceKind::CUDA);
    Tensor gwq = gpu.load_f32(wq.data(), hd, 1, "wq"), gwk = gpu.load_f32(wk.data(), hd, 1, "wk");
    gpu.qk_norm_rope_store_kv(uq_raw, gwq, uk_raw, gwk, 1e-6f, uq, uk, uv, gpu.upload_step(b), rope, cache);
    return Out{test::from_f16(test::download<uint16_t>(gpu, gq, q_n)), test::from_f16(test::download<uint16_t>(gpu, gk, k_n)),
               test::from_f16(test::download<uint16_t>(gpu, gkc, cache_n)),
               test::from_f16(test::download<uint16_t>(gpu, gvc, cache_n))};
  };
  const Out fused = run_gpu(true), plain = run_gpu(false);
  const std::string name = "hd " + std::to_string(hd) + " n_rot " + std::to_string(sh.n_rot);
  EXPECT_LT(rel_l2(fused.q, cq), 2e-3) << name;
  EXPECT_LT(rel_l2(fused.k, ck), 2e-3) << name;
  EXPECT_LT(rel_l2(fused.kc, kc), 2e-3) << name;
  EXPECT_EQ(fused.vc, test::round_f16(vc)) << name;
  // Against the two GPU kernels: at most an f16 rounding apart where the
  // sums of squares round differently.
  EXPECT_LT(rel_l2(fused.q, plain.q), 1e-3) << name;
  EXPECT_LT(rel_l2(fused.k, plain.k), 1e-3) << name;
  EXPECT_LT(rel_l2(fused.kc, plain.kc), 1e-3) << name;
  EXPECT_EQ(fused.vc, plain.vc) << name;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaQkNormRope,
                         ::testing::Values(QkNormRopeShape{128, 32, 8, 128, true},   // Qwen3-8B
                                           QkNormRopeShape{128, 32, 4, 128, true},   // Qwen3-30B-A3B
                                           QkNormRopeShape{256, 16, 8, 256, true},   // Gemma 3 12B
                                           QkNormRopeShape{64, 8, 2, 32, false},     // partial, interleaved
                                           QkNormRopeShape{128, 32, 8, 128, true, 700}),  // a long prompt
                         [](const auto& info) {
                           const QkNormRopeShape& s = info.param;
                           return "hd" + std::to_string(s.hd) + "_heads" + std::to_string(s.n_heads) + "_kv" +
                                  std::to_string(s.n_kv) + "_rot" + std::to_string(s.n_rot) +
                                  (s.n != 5 ? "_tokens" + std::to_string(s.n) : std::string());
                         });

}  // namespace
}  // namespace rf
