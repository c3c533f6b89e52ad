// CUDA matmuls and norms against the CPU backend on fresh random inputs, by
// normalized error, beyond the table of op cases (op_cases_gpu_test.cpp):
// matmul's kernel paths (GEMV, tensor cores, FP8, BLAS) over the shapes
// and tuning variants that pick them, rms_norm_pair, the GLUs at every
// width and alignment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "backend/cuda/matmul/matmul.cuh"
#include "core/fp8.h"
#include "core/quant.h"
#include "gpu/gpu_test_util.h"

namespace rf {
namespace {

using test::rel_l2;

struct MatmulCase {
  DType type;
  int n, k, m;
};

// gpu.matmul of the f16 activations x (n rows, f16-exact values) and the
// host weight cw (loaded for the call), out of `out_type`, read back as floats.
std::vector<float> gpu_matmul(CudaBackend& gpu, const Tensor& cw, const std::vector<float>& x, int n,
                              DType out_type) {
  const int k = int(cw.cols()), m = int(cw.rows());
  Tensor gw = gpu.load_weight(cw, "w");
  void* gx = test::upload(gpu, test::to_f16(x));
  void* go = gpu.alloc(size_t(n) * m * 4, "out");
  Tensor tx = make_tensor(gx, DType::F16, k, n, DeviceKind::CUDA), to = make_tensor(go, out_type, m, n, DeviceKind::CUDA);
  gpu.matmul(tx, gw, to);
  std::vector<float> got = out_type == DType::F32 ? test::download<float>(gpu, go, size_t(n) * m)
                                                  : test::from_f16(test::download<uint16_t>(gpu, go, size_t(n) * m));
  gpu.free(gw.data);
  gpu.free(gx);
  gpu.free(go);
  return got;
}

class CudaMatmul : public ::testing::TestWithParam<DType> {};

TEST_P(CudaMatmul, MatchesCpu) {
  RF_REQUIRE_GPU();
  const DType type = GetParam();
  std::mt19937 rng(100 + int(type));
  auto gpu = test::make_gpu();
  gpu->reserve(BackendLimits{128, 4, 4, 4, 100, 2112 * 512, 1, 1});
  CpuBackend cpu(2);
  // n <= 8: GEMV; 9..64 (and 100 = 64 + 36): the tensor-core path for
  // Q4_K/Q6_K (256-row blocks: 2112 rows fill several), split over k when
  // k >= 1024; else dequantize + BLAS. n = 1, f16 and FP8: the default
  // rows per bulk-copying GEMV block (f16 one, FP8 two), then four (k =
  // 14336 f16: halved to two, four do not fit). n = 1 at k = 768,
  // 1024, 2048: k-quant GEMVs with 4 or 2 sets of rows per block. n = 90
  // at k = 768, m = 37: 888 sub-blocks of 32 to dequantize, the last
  // dequantizing block partly filled.
  // The second GPU backend: bulk-copying GEMV blocks of four rows.
  std::unique_ptr<CudaBackend> four;
  if (type == DType::F16 || type == DType::F8_E4M3_ROW) {
    CudaOptions o;
    o.dequant_scratch_bytes = size_t(32) << 20;
    o.tune = [=](gpu::Tuning& t) {
      t.gemv_tma_rows = 4;
    };
    four = std::make_unique<CudaBackend>(o);
    four->reserve(BackendLimits{128, 4, 4, 4, 100, 2112 * 512, 1, 1});
  }
  const std::vector<std::array<int, 3>> shapes = {{1, 256, 96},    {3, 512, 40},     {8, 256, 130},
                                                  {17, 512, 64},   {64, 256, 300},   {37, 2048, 200},
                                                  {100, 1024, 72}, {20, 512, 2112}, {1, 14336, 67},
                                                  {1, 768, 37},    {1, 2048, 130},   {1, 1024, 21},
                                                  {90, 768, 37}};
  for (auto [n, k, m] : shapes) {
    for (DType out_type : {DType::F16, DType::F32}) {
      auto wq = test::random_weight(type, m, k, rng, 0.3f);
      auto x = test::round_f16(test::randn(size_t(n) * k, rng));
      Tensor cw = make_tensor(wq.data(), type, k, m);
      auto xr = test::matmul_activations(*gpu, cw, n, out_type, x);
      std::vector<float> ref(size_t(n) * m);
      Tensor cx = make_tensor(xr.data(), DType::F32, k, n), co = make_tensor(ref.data(), DType::F32, m, n);
      cpu.matmul(cx, cw, co);
      const double tol = out_type == DType::F32 ? 2e-3 : 3e-3;
      const std::vector<float> got = gpu_matmul(*gpu, cw, x, n, out_type);
      EXPECT_LT(rel_l2(got, ref), tol)
          << dtype_name(type) << " n=" << n << " k=" << k << " m=" << m << " out " << dtype_name(out_type);
      if (four && n == 1)
        EXPECT_LT(rel_l2(gpu_matmul(*four, cw, x, n, out_type), ref), tol)
            << dtype_name(type) << " n=1 k=" << k << " m=" << m << ", 4 rows a bulk-copying block";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaMatmul,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                           DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K, DType::F8_E4M3_ROW),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Batches of 9..64 rows on Q4_K / Q5_K / Q6_K weights and the 32-wide block
// formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): Hopper's wgmma kernel
// (its k range split by the rule, wherever that costs no more (split cost
// 0), and never (1000)) and the mma.sync kernel (formats past Q4_K, Q6_K:
// dequantize + BLAS),
// each against the CPU. Shapes: one super-block (k = 256); partial 256-row
// blocks (m = 257, 300, 513); k split over blocks (4096; 14336: 56
// super-blocks, an uneven split; 1280: two splits of 3 and 2 stages); Q6_K
// super-blocks at every 2-byte alignment (210 bytes each; rows of 3 and 5
// super-blocks start unaligned too, and the last one's copy window reaches
// past the matrix); 9, 16, 33 and 64 rows (wgmma pads to 16 or 64; 9 and 16
// on both variants). The 32-wide formats' stages are four blocks (128 k;
// 18 to 34 bytes each): also one stage (k = 128), three (384, the 16-column
// variant), and glm4-9b's 13,696-wide down rows (107 stages; rows start 8
// bytes off a 16-byte boundary every other row, each stage 8 bytes on from
// the last).
TEST(CudaOps, KQuantTensorCoreMatmulKernels) {
  RF_REQUIRE_GPU();
#if defined(ROCMFORGE_PORTABLE_KERNELS)
  GTEST_SKIP() << "the portable kernels have no tensor-core matmul";
#else
  ASSERT_TRUE(gpu::wgmma_matmul_supported(DType::Q4_K, 256) && gpu::wgmma_matmul_supported(DType::Q6_K, 768) &&
              gpu::wgmma_matmul_supported(DType::Q5_K, 3072) && gpu::wgmma_matmul_supported(DType::Q8_0, 13696) &&
              gpu::wgmma_matmul_supported(DType::Q5_0, 13696));
  std::mt19937 rng(31);
  CpuBackend cpu(2);
  const std::vector<std::array<int, 3>> shapes = {{9, 256, 257}, {64, 4096, 300}, {33, 14336, 64},
                                                  {64, 768, 513}, {16, 1280, 256}, {64, 512, 4096}};
  // (wgmma, split cost, 16-column variant for <= 16 rows)
  for (auto [wgmma, split_cost, narrow] : std::vector<std::tuple<bool, int, bool>>{
           {true, 2, true}, {true, 0, true}, {true, 1000, true}, {true, 2, false}, {false, 0, false}}) {
    CudaOptions o;
    o.dequant_scratch_bytes = size_t(32) << 20;
    o.tune = [=](gpu::Tuning& t) {
      t.wgmma = wgmma;
      t.wgmma_split_cost = split_cost;
      t.wgmma_narrow = narrow;
    };
    auto gpu = std::make_unique<CudaBackend>(o);
    gpu->reserve(BackendLimits{128, 4, 4, 4, 100, 4096 * 512, 1, 1});
    for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                       DType::Q8_0}) {
      auto type_shapes = shapes;
      if (info(type).block_size == 32)
        type_shapes.insert(type_shapes.end(), {{9, 128, 257}, {16, 384, 300}, {64, 13696, 300}, {24, 13696, 64}});
      for (auto [n, k, m] : type_shapes) {
        const DType out_type = n % 2 ? DType::F32 : DType::F16;
        auto wq = test::random_weight(type, m, k, rng, 0.3f);
        auto x = test::round_f16(test::randn(size_t(n) * k, rng));
        Tensor cw = make_tensor(wq.data(), type, k, m);
        std::vector<float> ref(size_t(n) * m);
        Tensor cx = make_tensor(x.data(), DType::F32, k, n), co = make_tensor(ref.data(), DType::F32, m, n);
        cpu.matmul(cx, cw, co);
        const std::vector<float> got = gpu_matmul(*gpu, cw, x, n, out_type);
        EXPECT_LT(rel_l2(got, ref), out_type == DType::F32 ? 2e-3 : 3e-3)
            << dtype_name(type) << " n=" << n << " k=" << k << " m=" << m
            << (wgmma ? " wgmma split cost " : " mma.sync") << split_cost << (narrow ? " narrow" : "");
      }
    }
  }
#endif
}

// The wgmma kernel's split rule on an H100's 132 SMs, 64 rows (host only):
// small matrices split until their blocks fill the SMs; matrices of about a
// wave or more of row blocks never split (their partials would cost more
// bytes than the split gains: the 128k-row output head, a 37,888-row gate
// and up).
TEST(CudaOps, WgmmaSplitRule) {
#if !defined(ROCMFORGE_PORTABLE_KERNELS)
  const auto splits = [](DType t, int m, int k) { return gpu::wgmma_matmul_splits(t, m, k, 64, 132, 2); };
  EXPECT_EQ(splits(DType::Q4_K, 4096, 4096), 8);     // o: 16 row blocks
  EXPECT_EQ(splits(DType::Q4_K, 1024, 4096), 8);     // k, v: 4 row blocks
  EXPECT_EQ(splits(DType::Q6_K, 4096, 14336), 8);    // down: 56 stages in 8 of 7
  EXPECT_EQ(splits(DType::Q4_K, 28672, 4096), 1);    // gate and up: 112 row blocks
  EXPECT_EQ(splits(DType::Q4_K, 37888, 3584), 1);    // qwen2.5-7b's gate and up: 148
  EXPECT_EQ(splits(DType::Q6_K, 128256, 4096), 1);   // output head: 501
  EXPECT_EQ(splits(DType::Q4_K, 4096, 512), 1);      // one split keeps >= 2 stages
#endif
}

// FP8 weights on FP8 tensor cores (Tuning::fp8_gemm_min_rows, cuBLASLt
// with a scale per weight row and per activation row): the path must run on
// this device (Hopper has e4m3 GEMMs), and it matches the CPU given the
// activations the GPU multiplies (each row quantized to e4m3 with its own
// scale, core/fp8.h), in every chunking of the rows; against the f16
// activations themselves the difference is e4m3's rounding of them. The
// portable build (the project's tiled BLAS, what AMD runs) has no FP8 GEMM:
// there every batch must take dequantize + BLAS with f16 activations.
#if defined(ROCMFORGE_PORTABLE_KERNELS)
constexpr bool kFp8TensorCores = false;
#else
constexpr bool kFp8TensorCores = true;
#endif

TEST(CudaOps, Fp8TensorCoreMatmul) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(23);
  CudaOptions o;
  o.dequant_scratch_bytes = size_t(1) << 20;  // rows in chunks of at most ~480 at k = 2048
  o.tune = [=](gpu::Tuning& t) {
    t.fp8_gemm_min_rows = 9;  // from 9 rows on, before the f16 tensor-core matmul of 9..256 rows
  };
  auto gpu = std::make_unique<CudaBackend>(o);
  gpu->reserve(BackendLimits{1024, 4, 4, 4, 100, 2112 * 2048, 1, 1});
  CpuBackend cpu(2);
  constexpr DType type = DType::F8_E4M3_ROW;
  for (auto [n, k, m] : std::vector<std::array<int, 3>>{{9, 256, 64}, {64, 2048, 2112}, {100, 1024, 72},
                                                        {1000, 2048, 320}}) {
    for (DType out_type : {DType::F16, DType::F32}) {
      auto wq = test::random_weight(type, m, k, rng, 0.3f);
      auto x = test::round_f16(test::randn(size_t(n) * k, rng));
      std::vector<float> xe = test::e4m3_rows(x, k);
      std::vector<float> ref(size_t(n) * m), ref_f16(size_t(n) * m);
      Tensor cw = make_tensor(wq.data(), type, k, m);
      Tensor cx = make_tensor(xe.data(), DType::F32, k, n), co = make_tensor(ref.data(), DType::F32, m, n);
      cpu.matmul(cx, cw, co);
      Tensor cx16 = make_tensor(x.data(), DType::F32, k, n), co16 = make_tensor(ref_f16.data(), DType::F32, m, n);
      cpu.matmul(cx16, cw, co16);

      bool fp8 = false;
      {
        Tensor gw = gpu->load_weight(cw, "w");
        fp8 = gpu->matmul_runs_fp8(gw, n, out_type);
        gpu->free(gw.data);
      }
      // f16 outputs (the activations between layers) must run on FP8 tensor
      // cores; f32 ones may not (cuBLASLt's FP8 output types), then they
      // take dequantize + BLAS with the f16 activations.
      if (out_type == DType::F16)
        ASSERT_EQ(fp8, kFp8TensorCores) << "FP8 GEMM " << (fp8 ? "on" : "off") << " for n=" << n << " k=" << k
                                        << " m=" << m;
      else if (!fp8) std::printf("n=%d k=%d m=%d: no FP8 GEMM into f32, dequantize + BLAS\n", n, k, m);
      const std::vector<float> got = gpu_matmul(*gpu, cw, x, n, out_type);
      EXPECT_LT(rel_l2(got, fp8 ? ref : ref_f16), out_type == DType::F32 ? 2e-3 : 3e-3)
          << "n=" << n << " k=" << k << " m=" << m << " out " << dtype_name(out_type);
      // e4m3 activations: a relative step of 1/16 to 1/8 per value.
      EXPECT_LT(rel_l2(got, ref_f16), 0.05) << "n=" << n << " k=" << k << " m=" << m;
    }
  }
}

// Batch-1 Q4_K, Q5_K, Q6_K, 32-wide block format (Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0) and 4-bit level-table (IQ4_NL, IQ4_XS, MXFP4) GEMVs read
// their activations as 8-bit quants (one scale per 32; gemv_stream.cu).
// Against the CPU with the same quantized activations they agree as
// closely as any GEMV (every rows-per-warp and warps-per-row variant (Q5_K,
// IQ4_XS and the 32-wide formats: always two rows; the 32-wide formats
// also glm4-9b's 13,696-wide rows, 214 chunks; MXFP4's 34-byte chunks
// sit at both 2-byte alignments), a
// partial last block, rows of an odd number of super-blocks (so Q6_K's at
// both 2-byte alignments), gate*up fused with SiLU); against the CPU with
// the f16 activations themselves the normalized mean squared error
// stays under 5e-4, the tolerance llama.cpp's test-backend-ops gives matrix
// products (whose CUDA GEMVs quantize activations the same way).
TEST(CudaOps, KQuantGemvEightBitActivations) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(17);
  CpuBackend cpu(2);
  const auto quantized = [&](DType type, int m, int k) {
    auto wf = test::randn(size_t(m) * k, rng, 0.3f);
    std::vector<uint8_t> wq(row_bytes(type, uint64_t(k)) * size_t(m));
    test::quantize_rows(type, wf.data(), m, k, wq.data());
    return wq;
  };
  for (const DType type :
       {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
        DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4})
  for (const int rows_per_warp : {1, 2, 4})
  for (const int split : {0, 1, 2, 4}) {
    CudaOptions o;
    o.dequant_scratch_bytes = size_t(32) << 20;
    o.tune = [=](gpu::Tuning& t) {
      t.kq_stream_rows = t.kq_stream_q6k_rows = rows_per_warp;
      t.kq_stream_split = split;
      // 3072-wide Q4_K / Q5_K rows at two rows per warp: one row a warp
      // (the default) at split 0, lane groups of 16 at split 1.
      t.kq_stream_uneven_one_row = split != 1;
    };
    CudaBackend gpu(o);
    gpu.reserve(BackendLimits{64, 4, 4, 4, 100, 14336 * 64, 1, 1});
    const std::string variant = str(dtype_name(type), ", rows per warp ", rows_per_warp, ", split ", split);
    std::vector<std::pair<int, int>> shapes = {{4096, 67}, {14336, 130}, {2304, 40}, {3072, 70}, {3584, 45}, {18944, 37}};
    if (info(type).block_size == 32) shapes.push_back({13696, 50});
    for (const auto& [k, m] : shapes) {
      ASSERT_TRUE(gpu.gemv_quantizes_activations(type, 1, k)) << variant << ", k=" << k;
      auto wq = quantized(type, m, k);
      auto x = test::round_f16(test::randn(size_t(k), rng));
      auto xq = test::gemv_activations(gpu, type, 1, k, x);
      std::vector<float> ref(static_cast<size_t>(m)), ref_q(static_cast<size_t>(m));
      Tensor cw = make_tensor(wq.data(), type, k, m);
      Tensor cx = make_tensor(x.data(), DType::F32, k, 1), cxq = make_tensor(xq.data(), DType::F32, k, 1);
      Tensor co = make_tensor(ref.data(), DType::F32, m, 1), coq = make_tensor(ref_q.data(), DType::F32, m, 1);
      cpu.matmul(cx, cw, co);
      cpu.matmul(cxq, cw, coq);
      Tensor gw = gpu.load_weight(cw, "w");
      void* gx = test::upload(gpu, test::to_f16(x));
      void* go = gpu.alloc(size_t(m) * 4, "out");
      Tensor tx = make_tensor(gx, DType::F16, k, 1, DeviceKind::CUDA), to = make_tensor(go, DType::F32, m, 1, DeviceKind::CUDA);
      gpu.matmul(tx, gw, to);
      const auto got = test::download<float>(gpu, go, size_t(m));
      EXPECT_LT(test::rel_l2(got, ref_q), 2e-3) << variant << ", k=" << k;
      const double nmse = test::rel_l2(got, ref) * test::rel_l2(got, ref);
      EXPECT_LT(nmse, 5e-4) << variant << ", k=" << k;
      EXPECT_GT(test::rel_l2(ref_q, ref), 1e-4) << "the activations were not quantized";
      gpu.free(gw.data);
      gpu.free(gx);
      gpu.free(go);
    }
    // gate * up with SiLU, 5120 wide (two warps per row set by the rule)
    // and 3072 wide (as above).
    for (const int k : {5120, 3072}) {
      const int m = 96;
      auto wg = quantized(type, m, k), wu = quantized(type, m, k);
      auto x = test::round_f16(test::randn(size_t(k), rng));
      auto xq = test::gemv_activations(gpu, type, 1, k, x);
      std::vector<float> g(static_cast<size_t>(m)), u(static_cast<size_t>(m));
      Tensor cwg = make_tensor(wg.data(), type, k, m), cwu = make_tensor(wu.data(), type, k, m);
      Tensor cxq = make_tensor(xq.data(), DType::F32, k, 1);
      Tensor cg = make_tensor(g.data(), DType::F32, m, 1), cu = make_tensor(u.data(), DType::F32, m, 1);
      cpu.matmul_gate_up_glu(cxq, cwg, cwu, cg, cu, cg, Activation::SiLU);
      Tensor gwg = gpu.load_weight(cwg, "g"), gwu = gpu.load_weight(cwu, "u");
      void* gx = test::upload(gpu, test::to_f16(x));
      Tensor tx = make_tensor(gx, DType::F16, k, 1, DeviceKind::CUDA);
      Tensor go = make_tensor(gpu.alloc(size_t(m) * 2, "o"), DType::F16, m, 1, DeviceKind::CUDA);
      Tensor gu = make_tensor(gpu.alloc(size_t(m) * 2, "u"), DType::F16, m, 1, DeviceKind::CUDA);
      gpu.matmul_gate_up_glu(tx, gwg, gwu, go, gu, go, Activation::SiLU);
      EXPECT_LT(test::rel_l2(test::from_f16(test::download<uint16_t>(gpu, go.data, size_t(m))), g), 5e-3)
          << variant << ", gate*up, k=" << k;
      for (void* p : {gwg.data, gwu.data, gx, go.data, gu.data}) gpu.free(p);
    }
  }
}

// Q6_K rows of one warp each on a grid past one wave of the unbounded
// kernel (4,100 rows: 513 blocks of 8 on a 132-SM H100 that holds 3 an SM)
// take the kernel bounded to 128 registers (gemv_stream_q6k_bounded_kernel),
// f16 outputs (down projections) and f32 (the output matrix); against the
// CPU on the same 8-bit activations, and a one-wave grid (the unbounded
// kernel) beside them.
TEST(CudaOps, Q6kGemvPastOneWave) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(23);
  CpuBackend cpu(2);
  auto gpu = test::make_gpu();
  gpu->reserve(BackendLimits{64, 4, 4, 4, 100, 4096 * 64, 1, 1});
  const int k = 4096;
  for (const DType out_type : {DType::F16, DType::F32})
  for (const int m : {4100, 1000}) {
    auto wf = test::randn(size_t(m) * k, rng, 0.3f);
    std::vector<uint8_t> wq(row_bytes(DType::Q6_K, uint64_t(k)) * size_t(m));
    test::quantize_rows(DType::Q6_K, wf.data(), m, k, wq.data());
    auto x = test::round_f16(test::randn(size_t(k), rng));
    auto xq = test::gemv_activations(*gpu, DType::Q6_K, 1, k, x);
    std::vector<float> ref(static_cast<size_t>(m));
    Tensor cw = make_tensor(wq.data(), DType::Q6_K, k, m);
    Tensor cxq = make_tensor(xq.data(), DType::F32, k, 1), co = make_tensor(ref.data(), DType::F32, m, 1);
    cpu.matmul(cxq, cw, co);
    Tensor gw = gpu->load_weight(cw, "w");
    void* gx = test::upload(*gpu, test::to_f16(x));
    Tensor tx = make_tensor(gx, DType::F16, k, 1, DeviceKind::CUDA);
    const size_t out_bytes = size_t(m) * (out_type == DType::F16 ? 2 : 4);
    Tensor to = make_tensor(gpu->alloc(out_bytes, "out"), out_type, m, 1, DeviceKind::CUDA);
    gpu->matmul(tx, gw, to);
    const auto got = out_type == DType::F16 ? test::from_f16(test::download<uint16_t>(*gpu, to.data, size_t(m)))
                                            : test::download<float>(*gpu, to.data, size_t(m));
    EXPECT_LT(test::rel_l2(got, ref), 2e-3) << dtype_name(out_type) << ", m=" << m;
    for (void* p : {gw.data, gx, to.data}) gpu->free(p);
  }
}

TEST(CudaOps, MatmulOddWidthF32Weights) {
  RF_REQUIRE_GPU();  // stories260K's ffn_down has k = 172 (not a multiple of 32)
  std::mt19937 rng(7);
  auto gpu = test::make_gpu();
  gpu->reserve(BackendLimits{64, 4, 4, 4, 100, 172 * 64, 1, 1});
  CpuBackend cpu(2);
  for (int n : {1, 5, 20}) {
    const int k = 172, m = 64;
    auto w = test::randn(size_t(m) * k, rng), x = test::round_f16(test::randn(size_t(n) * k, rng));
    std::vector<float> ref(size_t(n) * m);
    Tensor cx = make_tensor(x.data(), DType::F32, k, n), cw = make_tensor(w.data(), DType::F32, k, m),
           co = make_tensor(ref.data(), DType::F32, m, n);
    cpu.matmul(cx, cw, co);
    Tensor gw = gpu->load_weight(cw, "w");
    void* gx = test::upload(*gpu, test::to_f16(x));
    void* go = gpu->alloc(size_t(n) * m * 4, "out");
    Tensor tx = make_tensor(gx, DType::F16, k, n, DeviceKind::CUDA), to = make_tensor(go, DType::F32, m, n, DeviceKind::CUDA);
    gpu->matmul(tx, gw, to);
    EXPECT_LT(rel_l2(test::download<float>(*gpu, go, size_t(n) * m), ref), 2e-3) << "n=" << n;
  }
}

// Both per-head norms in one launch (rms_norm_pair: q rows and k rows of
// f16) against the CPU's rms_norm of each (the single ops are in the table
// of op cases).
TEST(CudaOps, RmsNormPairMatchesCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(21);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  const int n = 5, d = 256;
  BackendLimits lim{64, 4, 4, 4, 100, 1, 1, 1};
  gpu->reserve(lim);
  const size_t nd = size_t(n) * d;
  auto x = test::round_f16(test::randn(nd, rng, 2.0f));
  auto w = test::randn(size_t(d / 2), rng);
  std::vector<float> nref(nd), kref(nd / 2);
  Tensor cw = make_tensor(w.data(), DType::F32, d / 2, 1);
  Tensor cxn = make_tensor(x.data(), DType::F32, d / 2, n * 2), cn = make_tensor(nref.data(), DType::F32, d / 2, n * 2);
  cpu.rms_norm(cxn, cw, 1e-6f, cn);
  Tensor ckn = make_tensor(x.data(), DType::F32, d / 2, n), ck = make_tensor(kref.data(), DType::F32, d / 2, n);
  cpu.rms_norm(ckn, cw, 1e-6f, ck);
  void* gx2 = test::upload(*gpu, test::to_f16(x));
  Tensor tw = gpu->load_f32(w.data(), d / 2, 1, "w");
  Tensor tx2 = make_tensor(gx2, DType::F16, d / 2, n * 2, DeviceKind::CUDA);
  void* gq2 = gpu->alloc(nd * 2, "q norm out");
  void* gk2 = gpu->alloc(nd, "k norm out");
  Tensor tq2 = make_tensor(gq2, DType::F16, d / 2, n * 2, DeviceKind::CUDA),
         tk2 = make_tensor(gk2, DType::F16, d / 2, n, DeviceKind::CUDA);
  gpu->rms_norm_pair(tx2, tw, tq2, tx2.slice_rows(0, n), tw, tk2, 1e-6f);
  EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, gq2, nd)), nref), 1e-3);
  EXPECT_LT(rel_l2(test::from_f16(test::download<uint16_t>(*gpu, gk2, nd / 2)), kref), 1e-3);
  for (void* p : {gx2, gq2, gk2}) gpu->free(p);
}

// SwiGLU and GeGLU at widths and addresses that take the eight-wide kernel
// (multiples of 8, 16-byte aligned) and those that take one value a thread
// (odd widths, a misaligned start): every element against the CPU backend.
TEST(CudaOps, GluEveryWidthMatchesCpu) {
  RF_REQUIRE_GPU();
  std::mt19937 rng(57);
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  BackendLimits lim{64, 4, 4, 4, 100, 1, 1, 1};
  gpu->reserve(lim);
  for (const int n : {4096, 8 * 37, 1001, 7})
    for (const int offset : {0, 1})
      for (const bool gelu : {false, true}) {
        auto g = test::round_f16(test::randn(size_t(n), rng, 3.0f)), u = test::round_f16(test::randn(size_t(n), rng));
        std::vector<float> ref(static_cast<size_t>(n));
        Tensor cg = make_tensor(g.data(), DType::F32, n, 1), cu = make_tensor(u.data(), DType::F32, n, 1),
               co = make_tensor(ref.data(), DType::F32, n, 1);
        gelu ? cpu.geglu(cg, cu, co) : cpu.swiglu(cg, cu, co);
        std::vector<float> gpad(size_t(offset), 0.0f), upad(size_t(offset), 0.0f);
        gpad.insert(gpad.end(), g.begin(), g.end());
        upad.insert(upad.end(), u.begin(), u.end());
        void* gg = test::upload(*gpu, test::to_f16(gpad));
        void* gu = test::upload(*gpu, test::to_f16(upad));
        void* go = gpu->alloc(size_t(n + offset) * 2, "glu out");
        auto at = [&](void* p) { return static_cast<uint16_t*>(p) + offset; };
        Tensor tg = make_tensor(at(gg), DType::F16, n, 1, DeviceKind::CUDA),
               tu = make_tensor(at(gu), DType::F16, n, 1, DeviceKind::CUDA),
               to = make_tensor(at(go), DType::F16, n, 1, DeviceKind::CUDA);
        gelu ? gpu->geglu(tg, tu, to) : gpu->swiglu(tg, tu, to);
        const auto got = test::from_f16(test::download<uint16_t>(*gpu, go, size_t(n + offset)));
        for (int i = 0; i < n; ++i)
          ASSERT_NEAR(got[size_t(offset + i)], ref[size_t(i)], 2e-3f * std::max(1.0f, std::fabs(ref[size_t(i)])))
              << (gelu ? "geglu" : "swiglu") << " n=" << n << " offset=" << offset << " i=" << i;
        gpu->free(gg);
        gpu->free(gu);
        gpu->free(go);
      }
}

}  // namespace
}  // namespace rf
