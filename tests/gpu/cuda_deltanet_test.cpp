// The CUDA Gated DeltaNet ops (backend.h "Gated DeltaNet") against the CPU
// backend on fresh random inputs: the conv1d with its state and the gated
// delta rule over state rows as the engine lays them out (rows of every
// recurrent layer interleaved, a gap between rows), at decode (one token
// each for several sequences in scattered rows) and prefill (1, 7, 64 and
// 300 tokens), each step with a sequence starting at position 0 (zero
// state, its row's old contents ignored), sequences resuming from random
// states and a padding sequence; then the gated RMSNorm, sigmoid gating
// (full and one scalar a row, in place) and the state-row copy. Every
// token's outputs, every state row (those of sequences in the step, and the
// others left untouched) compared.
//
// Tolerances. The GPU's activations are f16, so inputs are f16-exact
// values given to both backends, and each op's f16 outputs carry their
// rounding (relative 2^-11 at most, ~3e-4 in relative L2): outputs within
// 2e-3 relative L2. The delta rule gets the CPU's conv outputs rounded to
// f16 (what the GPU would hand over), so both run the same inputs; its
// state stays f32 on both sides, the GPU's sums in f32 against the CPU's in
// double: ~1e-7 relative per dot product of 128 terms, and the update
// S <- e^g (I - b k k^T) S + ... (|k| = 1, 0 < b < 1, e^g <= 1) does not
// amplify earlier errors, so after 300 tokens they are at most the sum of
// the per-token ones: state rows within 1e-4 relative L2 (the conv part, a
// copy of f16-exact inputs, exactly equal).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "gpu/gpu_test_util.h"

namespace rf {
namespace {

using test::rel_l2;

constexpr double kOutL2 = 2e-3, kStateL2 = 1e-4;

struct Shape {
  int hk, hv, dk, dv, kernel;
};

// Hybrid-layer state rows on both backends, the same random contents.
struct Rows {
  Rows(CudaBackend& gpu, const Shape& s, int n_rows, std::mt19937& rng) : gpu(gpu) {
    RecurrentLayer l;
    l.conv_kernel = s.kernel, l.n_k_heads = s.hk, l.n_v_heads = s.hv, l.head_k_dim = s.dk, l.head_v_dim = s.dv;
    l.conv_channels = 2 * s.hk * s.dk + s.hv * s.dv;
    l.row_stride = l.conv_floats() + l.ssm_floats() + 37;  // other layers' parts between rows
    l.n_rows = n_rows;
    host = test::round_f16(test::randn(size_t(l.row_stride) * size_t(n_rows), rng, 0.5f));
    dev = static_cast<float*>(test::upload(gpu, host));
    cpu_layer = gpu_layer = l;
    cpu_layer.conv = host.data() + 5;  // the layer's parts at an offset into the row
    cpu_layer.ssm = cpu_layer.conv + l.conv_floats();
    gpu_layer.conv = dev + 5;
    gpu_layer.ssm = gpu_layer.conv + l.conv_floats();
  }
  ~Rows() { gpu.free(dev); }
  std::vector<float> device() const { return test::download<float>(gpu, dev, host.size()); }
  CudaBackend& gpu;
  std::vector<float> host;
  float* dev = nullptr;
  RecurrentLayer cpu_layer, gpu_layer;
};

// One sequence of a step: n tokens from position `start` into state `row`.
struct Part {
  int start, n, row;
};

BackendLimits limits() {
  BackendLimits lim;
  lim.max_tokens = 1024;
  lim.max_seqs = 8;
  lim.max_blocks_per_seq = 32;
  lim.max_logits = 8;
  lim.vocab = 16;
  lim.max_weight_elems = 1;
  lim.n_heads = lim.head_dim = lim.n_kv_heads = 1;
  return lim;
}

// A step of the parts (and a padding sequence), conv and delta rule on both
// backends, outputs and state rows compared.
void run_step(CudaBackend& gpu, const Shape& sh, const std::vector<Part>& parts, int n_rows, std::mt19937& rng) {
  CpuBackend cpu(2);
  Rows rows(gpu, sh, n_rows, rng);
  const int C = rows.cpu_layer.conv_channels, K = sh.kernel, O = sh.hv * sh.dv;
  Batch b;
  b.reset(16, 32);
  std::vector<int32_t> blocks(32);
  for (int i = 0; i < 32; ++i) blocks[size_t(i)] = i;
  for (const Part& p : parts) b.add_sequence(std::vector<int32_t>(size_t(p.n), 1), p.start, blocks, true, p.row);
  b.pad_to(b.n_seqs() + 1);
  const int n = b.n_tokens();
  const auto x = test::round_f16(test::randn(size_t(n) * C, rng));
  const auto alpha = test::round_f16(test::randn(size_t(n) * sh.hv, rng));
  const auto beta = test::round_f16(test::randn(size_t(n) * sh.hv, rng, 2.0f));
  auto w = test::randn(size_t(C) * K, rng, 0.5f);
  auto dt_bias = test::randn(size_t(sh.hv), rng);
  auto a = test::randn(size_t(sh.hv), rng);
  for (float& v : a) v = -std::exp(v);
  a[0] = -30.0f;  // a head whose state decays at once

  // CPU: conv, then the delta rule on its outputs rounded to f16.
  const StepMeta cm = cpu.upload_step(b);
  std::vector<float> cx = x, c_conv(size_t(n) * C), c_out(size_t(n) * O);
  Tensor tw = make_tensor(w.data(), DType::F32, K, C), tdt = make_tensor(dt_bias.data(), DType::F32, sh.hv),
         ta = make_tensor(a.data(), DType::F32, sh.hv);
  Tensor cxt = make_tensor(cx.data(), DType::F32, C, n), cct = make_tensor(c_conv.data(), DType::F32, C, n);
  cpu.conv1d_silu_state(cxt, tw, cm, rows.cpu_layer, cct);
  std::vector<float> qkv = test::round_f16(c_conv), calpha = alpha, cbeta = beta;
  Tensor cq = make_tensor(qkv.data(), DType::F32, C, n), cal = make_tensor(calpha.data(), DType::F32, sh.hv, n),
         cbe = make_tensor(cbeta.data(), DType::F32, sh.hv, n), cot = make_tensor(c_out.data(), DType::F32, O, n);
  cpu.gated_delta_net(cq, cal, cbe, tdt, ta, cm, rows.cpu_layer, 1e-6f, cot);

  // GPU: the same, the delta rule on the same f16 q|k|v.
  gpu.reserve(limits());
  const StepMeta gm = gpu.upload_step(b);
  void* gx = test::upload(gpu, test::to_f16(x));
  void* gconv = gpu.alloc(size_t(n) * C * 2, "conv out");
  void* gqkv = test::upload(gpu, test::to_f16(qkv));
  void* gal = test::upload(gpu, alpha);  // (alpha and beta are f32 on every backend)
  void* gbe = test::upload(gpu, beta);
  void* gout = gpu.alloc(size_t(n) * O * 4, "out");  // (f32 on every backend)
  Tensor gw = gpu.load_f32(w.data(), K, C, "w"), gdt = gpu.load_f32(dt_bias.data(), sh.hv, 1, "dt_bias"),
         ga = gpu.load_f32(a.data(), sh.hv, 1, "a");
  Tensor gxt = make_tensor(gx, DType::F16, C, n, DeviceKind::CUDA),
         gct = make_tensor(gconv, DType::F16, C, n, DeviceKind::CUDA);
  gpu.conv1d_silu_state(gxt, gw, gm, rows.gpu_layer, gct);
  const auto g_conv = test::from_f16(test::download<uint16_t>(gpu, gconv, size_t(n) * C));
  Tensor gq = make_tensor(gqkv, DType::F16, C, n, DeviceKind::CUDA),
         gat = make_tensor(gal, DType::F32, sh.hv, n, DeviceKind::CUDA),
         gbt = make_tensor(gbe, DType::F32, sh.hv, n, DeviceKind::CUDA),
         got = make_tensor(gout, DType::F32, O, n, DeviceKind::CUDA);
  gpu.gated_delta_net(gq, gat, gbt, gdt, ga, gm, rows.gpu_layer, 1e-6f, got);
  const auto g_out = test::download<float>(gpu, gout, size_t(n) * O);
  const auto g_rows = rows.device();

  // Outputs of the real tokens (the padding token's are unspecified).
  const int real = n - 1;
  const auto head = [](const std::vector<float>& v, size_t count) {
    return std::vector<float>(v.begin(), v.begin() + ptrdiff_t(count));
  };
  EXPECT_LT(rel_l2(head(g_conv, size_t(real) * C), head(c_conv, size_t(real) * C)), kOutL2) << "conv outputs";
  EXPECT_LT(rel_l2(head(g_out, size_t(real) * O), head(c_out, size_t(real) * O)), kOutL2) << "delta rule outputs";
  for (size_t i = 0; i < size_t(real) * O; ++i) ASSERT_TRUE(std::isfinite(g_out[i])) << "output " << i;
  // Every row: the layer's conv part equal, its ssm part within kStateL2,
  // the rest of the row (other layers) and untouched rows exactly as before.
  const RecurrentLayer& l = rows.cpu_layer;
  for (int r = 0; r < n_rows; ++r) {
    const size_t base = size_t(r) * size_t(l.row_stride);
    const size_t conv0 = base + 5, ssm0 = conv0 + size_t(l.conv_floats()), end = ssm0 + size_t(l.ssm_floats());
    for (size_t i = base; i < base + size_t(l.row_stride); ++i)
      if (i < ssm0 || i >= end) {
        ASSERT_EQ(g_rows[i], rows.host[i]) << "row " << r << " float " << i - base;
      }
    const std::vector<float> gs(g_rows.begin() + ptrdiff_t(ssm0), g_rows.begin() + ptrdiff_t(end)),
        cs(rows.host.begin() + ptrdiff_t(ssm0), rows.host.begin() + ptrdiff_t(end));
    EXPECT_LT(rel_l2(gs, cs), kStateL2) << "row " << r << "'s delta-rule state";
  }
  for (void* p : {gx, gconv, gqkv, gal, gbe, gout, gw.data, gdt.data, ga.data}) gpu.free(p);
}

// Real head sizes (128: four key components a lane on 32-wide warps), and
// small ragged ones (16 key components: lanes past them idle; 8 value rows:
// half a block of rows) with a 3-tap conv.
const Shape kShapes[] = {{2, 4, 128, 128, 4}, {2, 6, 16, 8, 3}};

TEST(CudaDeltaNet, DecodeOfSequencesInScatteredRowsMatchesCpu) {
  RF_REQUIRE_GPU();
  auto gpu = test::make_gpu();
  std::mt19937 rng(71);
  for (const Shape& sh : kShapes) {
    SCOPED_TRACE(::testing::Message() << "head_k_dim " << sh.dk << ", head_v_dim " << sh.dv);
    // Rows 2, 4 and 6 are no sequence's: they must stay as they were.
    run_step(*gpu, sh, {{9, 1, 3}, {0, 1, 0}, {30, 1, 5}, {2, 1, 1}}, 7, rng);
  }
}

TEST(CudaDeltaNet, PrefillMatchesCpu) {
  RF_REQUIRE_GPU();
  auto gpu = test::make_gpu();
  std::mt19937 rng(72);
  for (const Shape& sh : kShapes)
    for (int n : {1, 7, 64, 300}) {
      SCOPED_TRACE(::testing::Message() << "head_k_dim " << sh.dk << ", " << n << " tokens");
      // A prompt from position 0, a chunk resuming at 13 (fewer new tokens
      // than the conv's taps when n = 1), and a decode token beside them.
      run_step(*gpu, sh, {{0, n, 2}, {13, n, 0}, {5, 1, 3}}, 4, rng);
    }
}

TEST(CudaDeltaNet, GatedRmsNormMatchesCpu) {
  RF_REQUIRE_GPU();
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  std::mt19937 rng(73);
  for (auto [rows, heads, seg] : std::vector<std::array<int, 3>>{{1, 32, 128}, {37, 4, 128}, {5, 6, 8}, {3, 2, 256}}) {
    const int cols = heads * seg;
    // x: the delta rule's f32 output, here at a scale below f16's normal
    // range in one case (the state's scale), which the f32 input keeps.
    auto x = test::randn(size_t(rows) * cols, rng, rows == 5 ? 1e-6f : 2.0f);
    auto z = test::round_f16(test::randn(size_t(rows) * cols, rng));
    auto w = test::randn(size_t(seg), rng);
    std::vector<float> want(x.size());
    Tensor cx = make_tensor(x.data(), DType::F32, cols, rows), cz = make_tensor(z.data(), DType::F32, cols, rows),
           cw = make_tensor(w.data(), DType::F32, seg), co = make_tensor(want.data(), DType::F32, cols, rows);
    cpu.gated_rms_norm(cx, cw, cz, 1e-6f, co);
    void* gx = test::upload(*gpu, x);
    void* gz = test::upload(*gpu, test::to_f16(z));
    void* go = gpu->alloc(x.size() * 2, "out");
    Tensor gw = gpu->load_f32(w.data(), seg, 1, "w");
    Tensor tx = make_tensor(gx, DType::F32, cols, rows, DeviceKind::CUDA),
           tz = make_tensor(gz, DType::F16, cols, rows, DeviceKind::CUDA),
           to = make_tensor(go, DType::F16, cols, rows, DeviceKind::CUDA);
    gpu->gated_rms_norm(tx, gw, tz, 1e-6f, to);
    const auto got = test::from_f16(test::download<uint16_t>(*gpu, go, x.size()));
    EXPECT_LT(rel_l2(got, want), kOutL2) << rows << " rows of " << heads << " x " << seg;
    for (void* p : {gx, gz, go, gw.data}) gpu->free(p);
  }
}

TEST(CudaDeltaNet, SigmoidMulMatchesCpu) {
  RF_REQUIRE_GPU();
  auto gpu = test::make_gpu();
  CpuBackend cpu(2);
  std::mt19937 rng(74);
  // (rows, cols, gate columns): the gated attention output (a gate per
  // element) and the shared expert's scalar gate (one column).
  for (auto [rows, cols, gcols] : std::vector<std::array<int, 3>>{{1, 1024, 1024}, {40, 96, 96}, {1, 256, 1}, {33, 256, 1}}) {
    auto x = test::round_f16(test::randn(size_t(rows) * cols, rng));
    auto g = test::round_f16(test::randn(size_t(rows) * gcols, rng, 3.0f));
    std::vector<float> want(x.size());
    Tensor cx = make_tensor(x.data(), DType::F32, cols, rows), cg = make_tensor(g.data(), DType::F32, gcols, rows),
           co = make_tensor(want.data(), DType::F32, cols, rows);
    cpu.sigmoid_mul(cx, cg, co);
    void* gx = test::upload(*gpu, test::to_f16(x));
    void* gg = test::upload(*gpu, test::to_f16(g));
    Tensor tx = make_tensor(gx, DType::F16, cols, rows, DeviceKind::CUDA),
           tg = make_tensor(gg, DType::F16, gcols, rows, DeviceKind::CUDA);
    gpu->sigmoid_mul(tx, tg, tx);  // in place, as the model runs it
    const auto got = test::from_f16(test::download<uint16_t>(*gpu, gx, x.size()));
    EXPECT_LT(rel_l2(got, want), kOutL2) << rows << " x " << cols << ", gate of " << gcols;
    for (void* p : {gx, gg}) gpu->free(p);
  }
}

TEST(CudaDeltaNet, CopyOnDeviceCopiesAStateRow) {
  RF_REQUIRE_GPU();
  auto gpu = test::make_gpu();
  std::mt19937 rng(75);
  const size_t row = 12345;  // floats: not a multiple of anything
  const auto host = test::randn(3 * row, rng);
  void* d = test::upload(*gpu, host);
  auto* f = static_cast<float*>(d);
  gpu->copy_on_device(f + 2 * row, f, row * 4);  // row 0 -> row 2, queued with the ops
  gpu->copy_on_device(f + row, f + row, row * 4);  // onto itself: nothing
  const auto got = test::download<float>(*gpu, d, 3 * row);
  for (size_t i = 0; i < row; ++i) {
    ASSERT_EQ(got[2 * row + i], host[i]) << i;
    ASSERT_EQ(got[i], host[i]) << i;
    ASSERT_EQ(got[row + i], host[row + i]) << i;
  }
  gpu->free(d);
}

}  // namespace
}  // namespace rf
