// The CUDA backend's fused ops (q/k/v in one GEMV, gate*up with SwiGLU, add
// + RMSNorm) against the CPU backend's unfused reference, on fresh random
// inputs, for plain and quantized weights.
#include <gtest/gtest.h>

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

class CudaFused : public ::testing::TestWithParam<DType> {};

TEST_P(CudaFused, MatchCpuReference) {
  RF_REQUIRE_GPU();
  const DType type = GetParam();
  std::mt19937 rng(21 + int(type));
  auto gpu = test::make_gpu();
  gpu->reserve(BackendLimits{64, 4, 4, 8, 100, 512 * 512, 1, 1});
  CpuBackend cpu(2);
  const int k = 512;
  for (int n : {1, 3, 8}) {
    auto x = test::round_f16(test::randn(size_t(n) * k, rng));
    void* gx = test::upload(*gpu, test::to_f16(x));
    Tensor cx = make_tensor(x.data(), DType::F32, k, n), tx = make_tensor(gx, DType::F16, k, n, DeviceKind::CUDA);
    // q/k/v: 3 weights of different heights.
    const int rows[3] = {256, 64, 96};
    std::vector<Weight> ws;
    std::vector<Tensor> cws, gws, couts, gouts;
    std::vector<std::vector<float>> ref(3);
    for (int i = 0; i < 3; ++i) {
      ws.push_back(make_weight(type, rows[i], k, rng));
      ref[size_t(i)].resize(size_t(n) * rows[i]);
    }
    for (int i = 0; i < 3; ++i) {
      cws.push_back(ws[size_t(i)].host);
      gws.push_back(gpu->load_weight(ws[size_t(i)].host, "w"));
      couts.push_back(make_tensor(ref[size_t(i)].data(), DType::F32, rows[i], n));
      gouts.push_back(make_tensor(gpu->alloc(size_t(n) * rows[i] * 2, "out"), DType::F16, rows[i], n, DeviceKind::CUDA));
    }
    cpu.matmul_multi(cx, cws, couts);
    gpu->matmul_multi(tx, gws, gouts);
    for (int i = 0; i < 3; ++i)
      EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, gouts[size_t(i)].data, ref[size_t(i)].size())),
                       ref[size_t(i)]),
                4e-3)
          << dtype_name(type) << " n=" << n << " output " << i;
    // gate * up with SwiGLU.
    Weight wg = make_weight(type, 320, k, rng), wu = make_weight(type, 320, k, rng);
    std::vector<float> g(size_t(n) * 320), u(g.size());
    Tensor cg = make_tensor(g.data(), DType::F32, 320, n), cu = make_tensor(u.data(), DType::F32, 320, n);
    cpu.matmul_gate_up_swiglu(cx, wg.host, wu.host, cg, cu, cg);
    Tensor gwg = gpu->load_weight(wg.host, "g"), gwu = gpu->load_weight(wu.host, "u");
    Tensor go = make_tensor(gpu->alloc(g.size() * 2, "o"), DType::F16, 320, n, DeviceKind::CUDA);
    Tensor gu = make_tensor(gpu->alloc(g.size() * 2, "u"), DType::F16, 320, n, DeviceKind::CUDA);
    gpu->matmul_gate_up_swiglu(tx, gwg, gwu, go, gu, go);
    EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, go.data, g.size())), g), 5e-3)
        << dtype_name(type) << " n=" << n << " gate*up";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaFused, ::testing::Values(DType::F16, DType::Q4_K, DType::Q6_K, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaFusedOps, AddRmsNormMatchesCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(31);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  // 5 rows: the decode kernel (values in registers); 100 rows: the loop.
  for (const int n : {5, 100}) {
    const int d = 4096;
    auto x = test::randn(size_t(n) * d, rng, 4.0f), y = test::round_f16(test::randn(size_t(n) * d, rng)),
         w = test::randn(size_t(d), rng);
    std::vector<float> cx = x, out(x.size());
    Tensor tcx = make_tensor(cx.data(), DType::F32, d, n), ty = make_tensor(y.data(), DType::F32, d, n),
           tw = make_tensor(w.data(), DType::F32, d), to = make_tensor(out.data(), DType::F32, d, n);
    cpu.add_rms_norm(tcx, ty, tw, 1e-5f, to);
    void* gx = test::upload(*gpu, x);
    void* gy = test::upload(*gpu, test::to_f16(y));
    Tensor gw = gpu->load_f32(w.data(), d, 1, "w");
    void* go = gpu->alloc(out.size() * 2, "o");
    Tensor ugx = make_tensor(gx, DType::F32, d, n, DeviceKind::CUDA), ugy = make_tensor(gy, DType::F16, d, n, DeviceKind::CUDA),
           ugo = make_tensor(go, DType::F16, d, n, DeviceKind::CUDA);
    gpu->add_rms_norm(ugx, ugy, gw, 1e-5f, ugo);
    EXPECT_LT(rel_l2(test::download<float>(*gpu, gx, x.size()), cx), 1e-6);
    EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, go, out.size())), out), 1e-3) << n << " rows";
    gpu->free(gx);
    gpu->free(gy);
    gpu->free(gw.data);
    gpu->free(go);
  }
}

}  // namespace
}  // namespace rf
