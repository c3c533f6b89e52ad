// One token's residual add + RMSNorm folded into the f16 GEMVs around it
// (Fusions::fold_norm_gains): the norm gains folded into the q/k/v and
// gate/up weights at load (fold_norm_gain), an o / down projection that adds
// its rows to the residual (matmul_add_rms_norm), then the gate*up and
// q/k/v GEMVs scaling by 1 / rms of the row they read. Against a
// double-precision reference of the unfused ops, and against the same ops
// with folding off: residuals bit-identical, outputs within f16 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gpu/gpu_test_util.h"

namespace rf {
namespace {

constexpr int kIn = 2048, kFf = 1024, kQ = 512, kKv = 128;
constexpr float kEps = 1e-5f;

struct F16Weight {
  int rows, cols;
  std::vector<uint16_t> bits;
  std::vector<float> values;
};
F16Weight make_weight(int rows, int cols, std::mt19937& rng, float scale) {
  F16Weight w{rows, cols, test::to_f16(test::randn(size_t(rows) * size_t(cols), rng, scale)), {}};
  w.values = test::from_f16(w.bits);
  return w;
}

std::vector<double> gemv_ref(const F16Weight& w, const std::vector<double>& x) {
  std::vector<double> y(size_t(w.rows));
  for (int r = 0; r < w.rows; ++r) {
    double s = 0;
    for (int c = 0; c < w.cols; ++c) s += double(w.values[size_t(r) * w.cols + c]) * x[size_t(c)];
    y[size_t(r)] = s;
  }
  return y;
}

std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

struct Inputs {
  int hidden;
  F16Weight producer, gate, up, wq, wk, wv;
  std::vector<float> a, residual, gain_ffn, gain_attn, bq, bk, bv;
};

// The unfused ops in double precision: the projection rounded to f16 and
// added to the residual, the normed row, then its GEMVs.
struct Expected {
  std::vector<float> res1, res2, glu, q, k, v;
};
Expected reference(const Inputs& in) {
  const auto a = std::vector<double>(in.a.begin(), in.a.end());
  const auto proj = gemv_ref(in.producer, a);
  std::vector<double> r(in.residual.begin(), in.residual.end());
  const auto add_norm = [&](const std::vector<float>& gain) {
    double ss = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      r[i] += f16_to_f32(f32_to_f16(float(proj[i])));
      ss += r[i] * r[i];
    }
    const double inv = 1.0 / std::sqrt(ss / double(r.size()) + kEps);
    std::vector<double> xn(r.size());
    for (size_t i = 0; i < r.size(); ++i) xn[i] = r[i] * inv * gain[i];
    return xn;
  };
  Expected e;
  const auto xn1 = add_norm(in.gain_ffn);
  e.res1 = to_float(r);
  const auto g = gemv_ref(in.gate, xn1), u = gemv_ref(in.up, xn1);
  for (size_t i = 0; i < g.size(); ++i) e.glu.push_back(float(g[i] / (1.0 + std::exp(-g[i])) * u[i]));
  const auto xn2 = add_norm(in.gain_attn);
  e.res2 = to_float(r);
  const auto with_bias = [](std::vector<double> y, const std::vector<float>& b) {
    for (size_t i = 0; i < y.size(); ++i) y[i] += b[i];
    return to_float(y);
  };
  e.q = with_bias(gemv_ref(in.wq, xn2), in.bq);
  e.k = with_bias(gemv_ref(in.wk, xn2), in.bk);
  e.v = with_bias(gemv_ref(in.wv, xn2), in.bv);
  return e;
}

struct Results {
  bool folded_ffn = false, folded_attn = false, out_untouched = false;
  std::vector<float> res1, res2, glu, q, k, v;
};

// tma_rows: Tuning::gemv_tma_rows (0: the default rows per block).
Results run(const Inputs& in, bool fold, int tma_rows = 0) {
  CudaOptions o;
  o.dequant_scratch_bytes = size_t(32) << 20;
  o.tune = [=](gpu::Tuning& t) {
    t.fusions.fold_norm_gains = fold;
    t.gemv_tma_rows = tma_rows;
  };
  CudaBackend gpu(o);
  const int H = in.hidden;
  BackendLimits lim{8, 4, 4, 4, 100, int64_t(H) * kIn, 32, 128, 8};
  gpu.reserve(lim);
  const auto load = [&](const F16Weight& w, const char* name) {
    return gpu.load_weight(
        make_tensor(const_cast<uint16_t*>(w.bits.data()), DType::F16, w.cols, w.rows), name);
  };
  const Tensor wp = load(in.producer, "producer"), wg = load(in.gate, "gate"), wu = load(in.up, "up"),
               wq = load(in.wq, "q"), wk = load(in.wk, "k"), wv = load(in.wv, "v");
  Tensor gain_ffn = gpu.load_f32(in.gain_ffn.data(), H, 1, "ffn norm");
  Tensor gain_attn = gpu.load_f32(in.gain_attn.data(), H, 1, "attention norm");
  const Tensor bq = gpu.load_f32(in.bq.data(), kQ, 1, "bq"), bk = gpu.load_f32(in.bk.data(), kKv, 1, "bk"),
               bv = gpu.load_f32(in.bv.data(), kKv, 1, "bv");
  const Tensor ffn_in[2] = {wg, wu}, qkv_in[3] = {wq, wk, wv}, biases[3] = {bq, bk, bv};
  Results r;
  r.folded_ffn = gpu.fold_norm_gain(gain_ffn, ffn_in);
  r.folded_attn = gpu.fold_norm_gain(gain_attn, qkv_in);
  const auto act = [&](int cols, const char* what) {
    return make_tensor(gpu.alloc(row_bytes(DType::F16, uint64_t(cols)), what), DType::F16, cols, 1, DeviceKind::CUDA);
  };
  Tensor a = make_tensor(test::upload(gpu, test::to_f16(in.a)), DType::F16, kIn, 1, DeviceKind::CUDA);
  Tensor res = make_tensor(test::upload(gpu, in.residual), DType::F32, H, 1, DeviceKind::CUDA);
  const std::vector<uint16_t> sentinel(size_t(H), 0x7BFF);  // f16 65504
  Tensor out = make_tensor(test::upload(gpu, sentinel), DType::F16, H, 1, DeviceKind::CUDA);
  Tensor xn = act(H, "normed"), gate = act(kFf, "gate"), up = act(kFf, "up");
  Tensor q = act(kQ, "q"), k = act(kKv, "k"), v = act(kKv, "v");
  const auto read_f16 = [&](const Tensor& t) {
    return test::from_f16(test::download<uint16_t>(gpu, t.data, size_t(t.cols())));
  };
  // Each Handoff to the op after (folded: the row's norm left to it).
  const Handoff to_ffn = gpu.matmul_add_rms_norm(a, wp, out, res, gain_ffn, kEps, xn, ffn_in);
  EXPECT_EQ(to_ffn.norm_pending, fold);
  EXPECT_TRUE(!to_ffn.norm_pending || (to_ffn.data == xn.data && to_ffn.norm_eps == kEps));
  r.out_untouched = test::download<uint16_t>(gpu, out.data, size_t(H)) == sentinel;
  r.res1 = test::download<float>(gpu, res.data, size_t(H));
  gpu.matmul_gate_up_glu(xn, wg, wu, gate, up, gate, Activation::SiLU, to_ffn);
  r.glu = read_f16(gate);
  const Handoff to_qkv = gpu.matmul_add_rms_norm(a, wp, out, res, gain_attn, kEps, xn, qkv_in);
  r.res2 = test::download<float>(gpu, res.data, size_t(H));
  Tensor outs[3] = {q, k, v};
  gpu.matmul_multi(xn, qkv_in, outs, biases, to_qkv);
  r.q = read_f16(q);
  r.k = read_f16(k);
  r.v = read_f16(v);
  if (fold) {
    // The un-normed row is for the matmuls that apply its norm, and its
    // Handoff for the tensor it describes.
    const Handoff pending = gpu.matmul_add_rms_norm(a, wp, out, res, gain_ffn, kEps, xn, ffn_in);
    EXPECT_THROW(gpu.matmul(xn, wq, q, pending), Error);
    EXPECT_THROW(gpu.matmul_gate_up_glu(q, wg, wu, gate, up, gate, Activation::SiLU, pending), Error);
  }
  return r;
}

class CudaFoldedNorm : public ::testing::TestWithParam<int> {};

TEST_P(CudaFoldedNorm, MatchesUnfusedOps) {
  RF_REQUIRE_GPU();
  const int H = GetParam();
  std::mt19937 rng{uint32_t(H)};
  Inputs in{H,
            make_weight(H, kIn, rng, 0.03f),
            make_weight(kFf, H, rng, 0.03f),
            make_weight(kFf, H, rng, 0.03f),
            make_weight(kQ, H, rng, 0.03f),
            make_weight(kKv, H, rng, 0.03f),
            make_weight(kKv, H, rng, 0.03f),
            test::round_f16(test::randn(size_t(kIn), rng, 1.0f)),
            test::randn(size_t(H), rng, 2.0f),
            {},
            {},
            test::randn(size_t(kQ), rng, 0.1f),
            test::randn(size_t(kKv), rng, 0.1f),
            test::randn(size_t(kKv), rng, 0.1f)};
  for (int i = 0; i < H; ++i) {  // gains as trained models have them: around 1, some small, some large
    in.gain_ffn.push_back(0.5f + float(rng() % 1000) / 500.0f);
    in.gain_attn.push_back(i % 97 == 0 ? 8.0f : 0.05f + float(rng() % 1000) / 1000.0f);
  }
  const Expected e = reference(in);
  const Results on = run(in, true), off = run(in, false);
  EXPECT_TRUE(on.folded_ffn && on.folded_attn);
  EXPECT_FALSE(off.folded_ffn || off.folded_attn);
  EXPECT_TRUE(on.out_untouched) << "the fused projection wrote its output";
  EXPECT_FALSE(off.out_untouched);
  // The same GEMV value rounded to f16 and the same add: bit-identical, at
  // one blocking of rows (by default the fused o projection takes two rows
  // a block and the plain one one, so their sums add in another order).
  const Results on2 = run(in, true, 2), off2 = run(in, false, 2);
  EXPECT_EQ(0, std::memcmp(on2.res1.data(), off2.res1.data(), on2.res1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(on2.res2.data(), off2.res2.data(), on2.res2.size() * sizeof(float)));
  // Against double precision: the GPU's float sums round to f16 a half ulp
  // the other way now and then (~2^-12 of a projection against residuals
  // of ~2): measured 5e-6.
  EXPECT_LT(test::rel_l2(on.res2, e.res2), 5e-5);
  // f16 activations (folded: the weights times the gain rounded to f16, and
  // the residual rounded to f16 before the norm; unfused: the normed row
  // rounded to f16); outputs rounded to f16.
  for (const Results* r : {&on, &off}) {
    const char* which = r == &on ? "folded" : "unfused";
    EXPECT_LT(test::rel_l2(r->glu, e.glu), 2e-3) << which;
    EXPECT_LT(test::rel_l2(r->q, e.q), 2e-3) << which;
    EXPECT_LT(test::rel_l2(r->k, e.k), 2e-3) << which;
    EXPECT_LT(test::rel_l2(r->v, e.v), 2e-3) << which;
  }
}

INSTANTIATE_TEST_SUITE_P(Widths, CudaFoldedNorm, ::testing::Values(4096, 3072, 896));

TEST(CudaFoldedNormGain, OverflowKeepsTheGain) {
  RF_REQUIRE_GPU();
  CudaBackend gpu(CudaOptions{});
  std::mt19937 rng(3);
  const F16Weight w = make_weight(64, 256, rng, 1.0f);
  const Tensor t = gpu.load_weight(make_tensor(const_cast<uint16_t*>(w.bits.data()), DType::F16, 256, 64), "w");
  std::vector<float> gain(256, 1.0f);
  gain[7] = 1e6f;  // some weight times this is past f16's 65504
  Tensor g = gpu.load_f32(gain.data(), 256, 1, "gain");
  const Tensor consumers[1] = {t};
  EXPECT_FALSE(gpu.fold_norm_gain(g, consumers));
  EXPECT_EQ(test::download<uint16_t>(gpu, t.data, w.bits.size()), w.bits);
  EXPECT_EQ(test::download<float>(gpu, g.data, gain.size()), gain);
}

}  // namespace
}  // namespace rf
