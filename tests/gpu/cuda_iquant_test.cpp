// The i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ4_NL, IQ4_XS) and MXFP4 on the CUDA backend, each against the CPU
// backend on weights the CPU quantizer wrote from random values: the
// device decoders (matmul/dequant_iq.cuh) give the CPU's dequantized values
// bit for bit (rows dequantized to f16 for BLAS, embedding rows in f32),
// and matmuls on every path a batch takes (the GEMV at 1, 2 and 8 rows,
// dequantize + BLAS at 16 and 64) agree with the CPU's matmul by normalized
// squared error; the batch-1 streaming GEMV with its 8-bit activations
// closer still, at every split of a row. (The expert FFN on these formats is in cuda_moe_test.cpp,
// whole models in cuda_model_test.cpp.)
#include <gtest/gtest.h>

#include <cstring>

#include "backend/cuda/elementwise/elementwise.cuh"
#include "backend/cuda/matmul/matmul.cuh"
#include "core/quant.h"
#include "gpu/gpu_test_util.h"

namespace rf {
namespace {

// sum (a - b)^2 / sum b^2
double nmse(const std::vector<float>& a, const std::vector<float>& b) {
  const double r = test::rel_l2(a, b);
  return r * r;
}

// llama.cpp's test-backend-ops tolerance for matmuls on quantized weights.
// Both sides multiply the same dequantized weights by the same activations
// (8-bit quants of them where the GPU's GEMV reads those, as the reference
// does then); what differs is f32 summation order and the f16 output, so
// the expected error is ~1e-6 - 1e-5: the bound catches a wrong decoder
// (a wrong scale or level is an NMSE near 1).
constexpr double kMatmulNmse = 5e-4;

struct Quantized {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // the CPU's dequantization, [rows, cols]
  size_t row_bytes;
};

// rows x cols values from N(0, 0.5^2), quantized by the CPU (the i-quants
// below 4 bits without importances: every weight counts 1).
Quantized quantized(DType type, int rows, int cols, std::mt19937& rng) {
  Quantized q;
  const auto f = test::randn(size_t(rows) * cols, rng, 0.5f);
  q.row_bytes = row_bytes(type, uint64_t(cols));
  q.bytes.resize(q.row_bytes * size_t(rows));
  q.values.resize(f.size());
  test::quantize_rows(type, f.data(), rows, cols, q.bytes.data(), q.values.data());
  return q;
}

// Row widths: one 256-element super-block, and 2048 (IQ4_XS: the
// streaming GEMV's 8-bit activations at n = 1); for the 32-wide formats
// gpt-oss's 2880 (90 blocks, MXFP4 rows at both 2-byte alignments; streamed
// at n = 1 too).
std::vector<int> widths(DType type) {
  if (info(type).block_size == 32) return {256, 2880};
  return {256, 2048};
}

class CudaIquant : public ::testing::TestWithParam<DType> {};

// gpu::dequant_rows_f16 (the batched matmul's scratch) from rows row0 ..
// row0 + rows of the matrix: each f16 the CPU's dequantized value rounded
// to f16. Then the same rows through the embedding lookup (f32 outputs):
// the CPU's values exactly, token ids in any order and repeated.
TEST_P(CudaIquant, DequantizedRowsEqualCpuBitForBit) {
  RF_REQUIRE_GPU();
  const DType type = GetParam();
  std::mt19937 rng(300 + int(type));
  auto gpu = test::make_gpu();
  for (const int k : widths(type)) {
    const int m = 37;
    const Quantized w = quantized(type, m, k, rng);
    void* gw = test::upload(*gpu, w.bytes);
    // Rows 5 .. 36: a first row past the matrix's start.
    const int row0 = 5, rows = m - row0;
    void* gd = gpu->alloc(size_t(rows) * k * 2, "dequantized");
    gpu::dequant_rows_f16(type, gw, w.row_bytes, row0, rows, k, gd, gpu->ctx());
    const auto got = test::download<uint16_t>(*gpu, gd, size_t(rows) * k);
    size_t mismatches = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const uint16_t want = f32_to_f16(w.values[size_t(row0) * k + i]);
      if (got[i] != want && mismatches++ == 0) first = i;
    }
    EXPECT_EQ(mismatches, 0u) << dtype_name(type) << " k=" << k << ": first at row " << row0 + int(first / size_t(k))
                              << " column " << first % size_t(k);
    // Embedding rows (f32): ids in any order, one repeated.
    const std::vector<int32_t> ids = {7, 0, 36, 7, 19, 2};
    const int n = int(ids.size());
    void* gi = test::upload(*gpu, ids);
    void* ge = gpu->alloc(size_t(n) * k * 4, "embedded");
    gpu::embed_rows(type, gw, w.row_bytes, k, static_cast<const int32_t*>(gi), n, m, static_cast<float*>(ge),
                    gpu->ctx());
    const auto emb = test::download<float>(*gpu, ge, size_t(n) * k);
    for (int t = 0; t < n; ++t)
      EXPECT_EQ(std::memcmp(emb.data() + size_t(t) * k, w.values.data() + size_t(ids[size_t(t)]) * k, size_t(k) * 4), 0)
          << dtype_name(type) << " k=" << k << ": embedding row of token " << ids[size_t(t)];
    for (void* b : {gw, gd, gi, ge}) gpu->free(b);
  }
}

// gpu.matmul at n = 1, 2, 8 (the GEMV; n = 1 may read 8-bit activations,
// and the reference then multiplies the same quants) and n = 16, 64
// (dequantize + BLAS: the tensor-core matmuls take none of these formats),
// f16 and f32 outputs, against cpu.matmul on the same weights. m = 130: a
// GEMV block's rows cut short at the end.
TEST_P(CudaIquant, MatmulMatchesCpu) {
  RF_REQUIRE_GPU();
  const DType type = GetParam();
  std::mt19937 rng(400 + int(type));
  auto gpu = test::make_gpu();
  gpu->reserve(BackendLimits{64, 4, 4, 4, 100, 130 * 2880, 1, 1});
  CpuBackend cpu(2);
  for (const int k : widths(type)) {
    const int m = 130;
    const Quantized w = quantized(type, m, k, rng);
    Tensor cw = make_tensor(const_cast<uint8_t*>(w.bytes.data()), type, k, m);
    Tensor gw = gpu->load_weight(cw, "w");
    for (const int n : {1, 2, 8, 16, 64}) {
      for (const DType out_type : {DType::F16, DType::F32}) {
        const auto x = test::round_f16(test::randn(size_t(n) * k, rng));
        const auto xr = test::matmul_activations(*gpu, cw, n, out_type, x);
        std::vector<float> ref(size_t(n) * m);
        Tensor cx = make_tensor(const_cast<float*>(xr.data()), DType::F32, k, n);
        Tensor co = make_tensor(ref.data(), DType::F32, m, n);
        cpu.matmul(cx, cw, co);
        void* gx = test::upload(*gpu, test::to_f16(x));
        void* go = gpu->alloc(size_t(n) * m * 4, "out");
        Tensor tx = make_tensor(gx, DType::F16, k, n, DeviceKind::CUDA);
        Tensor to = make_tensor(go, out_type, m, n, DeviceKind::CUDA);
        gpu->matmul(tx, gw, to);
        const std::vector<float> got = out_type == DType::F32
                                           ? test::download<float>(*gpu, go, size_t(n) * m)
                                           : test::from_f16(test::download<uint16_t>(*gpu, go, size_t(n) * m));
        EXPECT_LT(nmse(got, ref), kMatmulNmse)
            << dtype_name(type) << " n=" << n << " k=" << k << " out " << dtype_name(out_type);
        gpu->free(gx);
        gpu->free(go);
      }
    }
    gpu->free(gw.data);
  }
}

// The batch-1 streaming GEMV (gemv_stream.cu; the grid i-quants'
// chunks in gemv_stream_grid.cuh) against the CPU on the same 8-bit
// activations, at every warps-per-row split: rows of 16 super-blocks,
// of 9 (super-blocks, and rows, starting at both 2-byte alignments), of 56 (several chunks a lane), a block's rows cut short; and
// gate * up with SiLU (the fused pair).
TEST_P(CudaIquant, StreamingGemvMatchesCpu) {
  RF_REQUIRE_GPU();
  const DType type = GetParam();
  std::mt19937 rng(500 + int(type));
  CpuBackend cpu(2);
  for (const int split : {0, 1, 2, 4}) {
    CudaOptions o;
    o.tune = [=](gpu::Tuning& t) { t.kq_stream_split = split; };
    CudaBackend gpu(o);
    gpu.reserve(BackendLimits{64, 4, 4, 4, 100, 14336 * 64, 1, 1});
    for (const auto& [k, m] : std::vector<std::pair<int, int>>{{4096, 67}, {2304, 40}, {14336, 21}}) {
      ASSERT_TRUE(gpu.gemv_quantizes_activations(type, 1, k)) << dtype_name(type) << " k=" << k;
      const Quantized w = quantized(type, m, k, rng);
      const auto x = test::round_f16(test::randn(size_t(k), rng));
      const auto xq = test::gemv_activations(gpu, type, 1, k, x);
      std::vector<float> ref(static_cast<size_t>(m));
      Tensor cw = make_tensor(const_cast<uint8_t*>(w.bytes.data()), type, k, m);
      Tensor cx = make_tensor(const_cast<float*>(xq.data()), DType::F32, k, 1);
      Tensor co = make_tensor(ref.data(), DType::F32, m, 1);
      cpu.matmul(cx, cw, co);
      Tensor gw = gpu.load_weight(cw, "w");
      void* gx = test::upload(gpu, test::to_f16(x));
      void* go = gpu.alloc(size_t(m) * 4, "out");
      Tensor tx = make_tensor(gx, DType::F16, k, 1, DeviceKind::CUDA), to = make_tensor(go, DType::F32, m, 1, DeviceKind::CUDA);
      gpu.matmul(tx, gw, to);
      EXPECT_LT(test::rel_l2(test::download<float>(gpu, go, size_t(m)), ref), 2e-3)
          << dtype_name(type) << " split " << split << " k=" << k;
      for (void* b : {gw.data, gx, go}) gpu.free(b);
    }
    const int k = 5120, m = 48;
    const Quantized wg = quantized(type, m, k, rng), wu = quantized(type, m, k, rng);
    const auto x = test::round_f16(test::randn(size_t(k), rng));
    const auto xq = test::gemv_activations(gpu, type, 1, k, x);
    std::vector<float> g(static_cast<size_t>(m)), u(static_cast<size_t>(m));
    Tensor cwg = make_tensor(const_cast<uint8_t*>(wg.bytes.data()), type, k, m);
    Tensor cwu = make_tensor(const_cast<uint8_t*>(wu.bytes.data()), type, k, m);
    Tensor cxq = make_tensor(const_cast<float*>(xq.data()), DType::F32, k, 1);
    Tensor cg = make_tensor(g.data(), DType::F32, m, 1), cu = make_tensor(u.data(), DType::F32, m, 1);
    cpu.matmul_gate_up_glu(cxq, cwg, cwu, cg, cu, cg, Activation::SiLU);
    Tensor gwg = gpu.load_weight(cwg, "g"), gwu = gpu.load_weight(cwu, "u");
    void* gx = test::upload(gpu, test::to_f16(x));
    Tensor tx = make_tensor(gx, DType::F16, k, 1, DeviceKind::CUDA);
    Tensor go = make_tensor(gpu.alloc(size_t(m) * 2, "o"), DType::F16, m, 1, DeviceKind::CUDA);
    Tensor gu = make_tensor(gpu.alloc(size_t(m) * 2, "u"), DType::F16, m, 1, DeviceKind::CUDA);
    gpu.matmul_gate_up_glu(tx, gwg, gwu, go, gu, go, Activation::SiLU);
    EXPECT_LT(test::rel_l2(test::from_f16(test::download<uint16_t>(gpu, go.data, size_t(m))), g), 5e-3)
        << dtype_name(type) << " split " << split << ", gate*up";
    for (void* b : {gwg.data, gwu.data, gx, go.data, gu.data}) gpu.free(b);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CudaIquant,
                         ::testing::Values(DType::IQ1_S, DType::IQ1_M, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                                           DType::IQ3_XXS, DType::IQ3_S, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace rf
