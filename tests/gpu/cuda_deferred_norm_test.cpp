// One token's residual add + RMSNorm folded into the streaming GEMVs around
// it (CudaOptions::fused_norm_gemv, gemv_norm.cuh): an o / down projection
// (CudaBackend::matmul_add_rms_norm) of each streaming shape — two rows a
// warp, one row a warp (3072-wide Q4_K rows), lane groups (3072-wide Q6_K
// rows), split and early-loading warps (14336-wide rows) — then the GEMVs
// of the normed row: gate*up, q/k/v in two formats, and an f16 GEMV that
// needs the row itself. Three rounds on the same buffers (each group's
// ticket must be back at 0 for the next).
//
// Reference: double precision on the dequantized weights, each GEMV's
// activations quantized to 8 bits as the GPU reads them (q8_activations;
// the producer's of its input row, the consumers' of the normed row).
// Residuals must be bit-identical to the unfused ops' (the same GEMV value
// rounded to f16, the same add).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gpu/gpu_test_util.h"

namespace rf {
namespace {

constexpr int kHidden = 4096, kFf = 1024, kQ = 512, kKv = 128, kF16Rows = 256;
constexpr float kEps = 1e-5f;

// rows x cols weights from N(0, scale^2) in `type` and their dequantized values.
struct Weight {
  DType type;
  int rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};
Weight make_weight(DType type, int rows, int cols, std::mt19937& rng, float scale) {
  Weight w{type, rows, cols, {}, std::vector<float>(size_t(rows) * size_t(cols))};
  const auto f = test::randn(size_t(rows) * size_t(cols), rng, scale);
  w.bytes.resize(row_bytes(type, uint64_t(cols)) * size_t(rows));
  if (type == DType::F16) {
    const auto h = test::to_f16(f);
    std::memcpy(w.bytes.data(), h.data(), w.bytes.size());
    w.values = test::round_f16(f);
  } else {
    test::quantize_rows(type, f.data(), rows, cols, w.bytes.data(), w.values.data());
  }
  return w;
}

std::vector<float> gemv_ref(const Weight& w, const std::vector<float>& x) {
  std::vector<float> y(size_t(w.rows));
  for (int r = 0; r < w.rows; ++r) {
    double s = 0;
    for (int c = 0; c < w.cols; ++c) s += double(w.values[size_t(r) * w.cols + c]) * x[size_t(c)];
    y[size_t(r)] = float(s);
  }
  return y;
}

struct Inputs {
  Weight producer, gate, up, wq, wk, wv, f16;
  std::vector<float> a, residual, norm_w;  // the producer's input row (f16 values), residual, norm weights
};

// What a run gives: per round the residual after the producer, and the
// GEMVs of the normed row; the f16 GEMV's output and the normed row as
// written out; whether the producer left `out` untouched (fused).
struct Results {
  std::vector<float> res[3], glu, q, k, v, f16_out, normed;
  bool out_untouched = false;
};

Results run(const Inputs& in, bool fused) {
  CudaOptions o;
  o.dequant_scratch_bytes = size_t(32) << 20;
  o.fused_norm_gemv = fused;
  CudaBackend gpu(o);
  BackendLimits lim{8, 4, 4, 4, 100, int64_t(kHidden) * 14336, 32, 128, 8};
  gpu.reserve(lim);
  const auto load = [&](const Weight& w, const char* name) {
    return gpu.load_weight(make_tensor(const_cast<uint8_t*>(w.bytes.data()), w.type, w.cols, w.rows), name);
  };
  const Tensor wp = load(in.producer, "producer"), wg = load(in.gate, "gate"), wu = load(in.up, "up"),
               wq = load(in.wq, "q"), wk = load(in.wk, "k"), wv = load(in.wv, "v"), wf = load(in.f16, "f16");
  const auto act = [&](int cols, DType t, const char* what) {
    return make_tensor(gpu.alloc(row_bytes(t, uint64_t(cols)), what), t, cols, 1, DeviceKind::CUDA);
  };
  Tensor a = make_tensor(test::upload(gpu, test::to_f16(in.a)), DType::F16, in.producer.cols, 1, DeviceKind::CUDA);
  Tensor res = make_tensor(test::upload(gpu, in.residual), DType::F32, kHidden, 1, DeviceKind::CUDA);
  const Tensor nw = gpu.load_f32(in.norm_w.data(), kHidden, 1, "norm");
  const std::vector<uint16_t> sentinel(kHidden, 0x7BFF);  // f16 65504
  Tensor out = make_tensor(test::upload(gpu, sentinel), DType::F16, kHidden, 1, DeviceKind::CUDA);
  Tensor xn = act(kHidden, DType::F16, "normed"), gate = act(kFf, DType::F16, "gate"), up = act(kFf, DType::F16, "up");
  Tensor q = act(kQ, DType::F16, "q"), k = act(kKv, DType::F16, "k"), v = act(kKv, DType::F16, "v");
  Tensor f = act(kF16Rows, DType::F16, "f16 out");
  const auto read_f16 = [&](const Tensor& t) {
    return test::from_f16(test::download<uint16_t>(gpu, t.data, size_t(t.cols())));
  };
  const auto read_res = [&] { return test::download<float>(gpu, res.data, kHidden); };
  Results r;
  const Tensor ffn_in[2] = {wg, wu}, qkv_in[3] = {wq, wk, wv};
  gpu.matmul_add_rms_norm(a, wp, out, res, nw, kEps, xn, ffn_in);
  r.out_untouched = test::download<uint16_t>(gpu, out.data, kHidden) == sentinel;
  r.res[0] = read_res();
  gpu.matmul_gate_up_glu(xn, wg, wu, gate, up, gate, Activation::SiLU);
  r.glu = read_f16(gate);
  gpu.matmul_add_rms_norm(a, wp, out, res, nw, kEps, xn, qkv_in);
  r.res[1] = read_res();
  Tensor outs[3] = {q, k, v};
  gpu.matmul_multi(xn, qkv_in, outs, {});
  r.q = read_f16(q);
  r.k = read_f16(k);
  r.v = read_f16(v);
  gpu.matmul_add_rms_norm(a, wp, out, res, nw, kEps, xn, ffn_in);
  r.res[2] = read_res();
  gpu.matmul(xn, wf, f);  // not a streaming GEMV: reads the row written out
  r.f16_out = read_f16(f);
  r.normed = read_f16(xn);
  return r;
}

struct Case {
  DType type;
  int k;
};

class CudaDeferredNorm : public ::testing::TestWithParam<Case> {};

TEST_P(CudaDeferredNorm, MatchesTheReference) {
  RF_REQUIRE_GPU();
  const Case c = GetParam();
  std::mt19937 rng(41 + c.k);
  Inputs in{make_weight(c.type, kHidden, c.k, rng, 0.02f),
            make_weight(DType::Q4_K, kFf, kHidden, rng, 0.02f),
            make_weight(DType::Q4_K, kFf, kHidden, rng, 0.02f),
            make_weight(DType::Q4_K, kQ, kHidden, rng, 0.02f),
            make_weight(DType::Q4_K, kKv, kHidden, rng, 0.02f),
            make_weight(DType::Q6_K, kKv, kHidden, rng, 0.02f),
            make_weight(DType::F16, kF16Rows, kHidden, rng, 0.02f),
            test::round_f16(test::randn(size_t(c.k), rng)),
            test::randn(kHidden, rng, 4.0f),
            test::randn(kHidden, rng, 0.3f)};
  for (float& w : in.norm_w) w += 1.0f;

  // The reference, three rounds.
  const auto y = test::round_f16(gemv_ref(in.producer, test::q8_activations(in.a)));
  std::vector<float> res = in.residual, normed;
  std::vector<float> ref_res[3];
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kHidden; ++i) res[size_t(i)] += y[size_t(i)];
    ref_res[round] = res;
  }
  const auto normed_of = [&](const std::vector<float>& x) {
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / kHidden + kEps);
    std::vector<float> n(x.size());
    for (size_t i = 0; i < x.size(); ++i) n[i] = float(x[i] * inv * in.norm_w[i]);
    return n;
  };
  const auto q8n0 = test::q8_activations(normed_of(ref_res[0])), q8n1 = test::q8_activations(normed_of(ref_res[1]));
  const auto g = gemv_ref(in.gate, q8n0), u = gemv_ref(in.up, q8n0);
  std::vector<float> ref_glu(kFf);
  for (int i = 0; i < kFf; ++i) ref_glu[size_t(i)] = float(g[size_t(i)] / (1.0 + std::exp(-double(g[size_t(i)]))) * u[size_t(i)]);
  const auto ref_normed2 = test::round_f16(normed_of(ref_res[2]));
  const auto ref_f16 = gemv_ref(in.f16, ref_normed2);

  const Results on = run(in, true), off = run(in, false);
  const std::string what = std::string(dtype_name(c.type)) + " k" + std::to_string(c.k);
  EXPECT_TRUE(on.out_untouched) << what << ": the projection did not take the fused path";
  EXPECT_FALSE(off.out_untouched) << what;
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(on.res[round], off.res[round]) << what << " round " << round << ": residuals differ from the unfused ops'";
    EXPECT_LT(test::rel_l2(on.res[round], ref_res[round]), 1e-3) << what << " round " << round;
  }
  // GEMVs of the deferred norm: 8-bit activations, f16 outputs.
  const std::pair<const char*, std::pair<const std::vector<float>*, std::vector<float>>> checks[] = {
      {"gate*up", {&on.glu, ref_glu}},
      {"q", {&on.q, gemv_ref(in.wq, q8n1)}},
      {"k", {&on.k, gemv_ref(in.wk, q8n1)}},
      {"v (Q6_K)", {&on.v, gemv_ref(in.wv, q8n1)}},
      {"f16 GEMV of the written-out row", {&on.f16_out, ref_f16}}};
  for (const auto& [name, pair] : checks) {
    const double err = test::rel_l2(*pair.first, pair.second);
    std::printf("  %s %s: rel. L2 %.2e against the reference\n", what.c_str(), name, err);
    EXPECT_LT(err, 1.5e-3) << what << " " << name;
  }
  EXPECT_LT(test::rel_l2(on.normed, ref_normed2), 1e-3) << what << ": the normed row as written out";
  // The unfused ops quantize the f16-rounded row: close, not equal.
  EXPECT_LT(test::rel_l2(on.glu, off.glu), 1e-2) << what;
  EXPECT_LT(test::rel_l2(on.q, off.q), 1e-2) << what;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaDeferredNorm,
                         ::testing::Values(Case{DType::Q4_K, 4096}, Case{DType::Q4_K, 3072}, Case{DType::Q6_K, 3072},
                                           Case{DType::Q6_K, 14336}, Case{DType::Q4_K, 14336}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.type)) + "_k" + std::to_string(info.param.k);
                         });

}  // namespace
}  // namespace rf
