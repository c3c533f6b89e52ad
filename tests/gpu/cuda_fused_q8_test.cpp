// The batch-1 k-quant GEMV's 8-bit activations written by the kernel that
// produces its input row (CudaOptions::fused_act_q8): the residual add +
// RMSNorm and the attention combine. Every result must be bit-identical to
// the separate quantize kernel's (the same arithmetic on the same f16
// values), GEMVs of the row in the ops right after reuse the quants (and
// a MoE layer's expert gate*up after the router, which carries them), and
// none does once another op came between.
#include <gtest/gtest.h>

#include <functional>

#include "backend/cuda/gpu.h"
#include "gpu/attention_shapes.h"
#include "gpu/gpu_test_util.h"

namespace rf {
namespace {

constexpr int kHidden = 4096;  // 32 heads of 128: wide enough for the streaming GEMV

struct FusedQ8Results {
  std::vector<float> after_norm, second_gemv, after_other_op, after_combine;
  // A producer, its row changed behind the backend's back (a copy, no
  // kernel between), the GEMV, another op, the GEMV again: the first GEMV
  // reads the producer's quants where they are reused, the second the
  // changed row.
  std::vector<float> norm_stale, norm_fresh, combine_stale, combine_fresh;
  // The same with the row replaced through the backend (copy_to_device):
  // the GEMV must quantize it anew.
  std::vector<float> norm_copied, combine_copied;
};

// The residual add + RMSNorm's inputs for one row of d: residual x (f32),
// the added row y (f16), norm weights around 1.
struct NormInputs {
  Tensor res, y, w;
};
NormInputs norm_inputs(CudaBackend& gpu, int d, std::mt19937& rng) {
  const auto res = test::randn(d, rng), y = test::round_f16(test::randn(d, rng));
  auto nw = test::randn(d, rng, 0.5f);
  for (float& v : nw) v += 1.0f;
  return {make_tensor(test::upload(gpu, res), DType::F32, d, 1, DeviceKind::CUDA),
          make_tensor(test::upload(gpu, test::to_f16(y)), DType::F16, d, 1, DeviceKind::CUDA),
          gpu.load_f32(nw.data(), d, 1, "norm")};
}

// One backend (fused_act_q8 on or off) through the same ops on the same data.
FusedQ8Results run_ops(bool fused) {
  std::mt19937 rng(23);
  CudaOptions o;
  o.dequant_scratch_bytes = size_t(32) << 20;
  o.fused_act_q8 = fused;
  CudaBackend gpu(o);
  const int n_heads = 32, hd = 128, bs = 16, num_blocks = 160, max_blocks = 150;
  BackendLimits lim{64, 4, max_blocks, 4, 100, int64_t(kHidden) * 256, n_heads, hd, n_heads};
  gpu.reserve(lim);
  const int m4 = 192, m6 = 96;
  auto w4 = test::random_weight(DType::Q4_K, m4, kHidden, rng, 0.3f);
  auto w6 = test::random_weight(DType::Q6_K, m6, kHidden, rng, 0.3f);
  Tensor gw4 = gpu.load_weight(make_tensor(w4.data(), DType::Q4_K, kHidden, m4), "w4");
  Tensor gw6 = gpu.load_weight(make_tensor(w6.data(), DType::Q6_K, kHidden, m6), "w6");
  EXPECT_TRUE(gpu.gemv_quantizes_activations(DType::Q4_K, 1, kHidden));
  EXPECT_TRUE(gpu.gemv_quantizes_activations(DType::Q6_K, 1, kHidden));

  const NormInputs ni = norm_inputs(gpu, kHidden, rng);
  Tensor gres = ni.res, gy = ni.y, gnw = ni.w;
  Tensor xn = make_tensor(gpu.alloc(kHidden * 2, "normed"), DType::F16, kHidden, 1, DeviceKind::CUDA);
  Tensor o4 = make_tensor(gpu.alloc(m4 * 4, "o4"), DType::F32, m4, 1, DeviceKind::CUDA);
  Tensor o6 = make_tensor(gpu.alloc(m6 * 4, "o6"), DType::F32, m6, 1, DeviceKind::CUDA);
  const auto read = [&](const Tensor& t, int m) { return test::download<float>(gpu, t.data, size_t(m)); };

  FusedQ8Results r;
  // Add + RMSNorm, then two GEMVs of its row (the second in the op after).
  gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn);
  gpu.matmul(xn, gw4, o4);
  r.after_norm = read(o4, m4);
  gpu.matmul(xn, gw6, o6);
  r.second_gemv = read(o6, m6);
  // Add + RMSNorm, an op that changes the row, then the GEMV: quantized anew.
  gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn);
  const auto bias = test::randn(kHidden, rng);
  Tensor gbias = gpu.load_f32(bias.data(), kHidden, 1, "bias");
  gpu.add_bias(xn, gbias);
  gpu.matmul(xn, gw4, o4);
  r.after_other_op = read(o4, m4);

  // Decode attention of one token over 1,500 keys (8 slices summed by a
  // cluster of their blocks: see CudaBackend::decode_slices), then the GEMV
  // of its output row.
  const int kv_dim = n_heads * hd;
  const size_t slots = size_t(num_blocks) * bs;
  void* kc = test::upload(gpu, test::to_f16(test::round_f16(test::randn(slots * kv_dim, rng))));
  void* vc = test::upload(gpu, test::to_f16(test::round_f16(test::randn(slots * kv_dim, rng))));
  KVLayer cache{kc, vc, DType::F16, num_blocks, bs, n_heads, hd};
  const Batch b = test::attention_batch({{1500, 1}}, bs, max_blocks, num_blocks);
  const StepMeta meta = gpu.upload_step(b);
  Tensor q = make_tensor(test::upload(gpu, test::to_f16(test::round_f16(test::randn(kv_dim, rng)))), DType::F16,
                         kv_dim, 1, DeviceKind::CUDA);
  Tensor att = make_tensor(gpu.alloc(kv_dim * 2, "attention out"), DType::F16, kv_dim, 1, DeviceKind::CUDA);
  const AttentionParams ap{n_heads, n_heads, hd, 1.0f / std::sqrt(float(hd))};
  gpu.attention(q, cache, meta, ap, att);
  gpu.matmul(att, gw4, o4);
  r.after_combine = read(o4, m4);

  const auto other = test::to_f16(test::round_f16(test::randn(kHidden, rng)));
  Tensor spare = make_tensor(gpu.alloc(kHidden * 2, "spare"), DType::F16, kHidden, 1, DeviceKind::CUDA);
  // After `produce` wrote `row`: the row replaced by a raw copy behind the
  // backend's back (the backend idle: read() synchronized it), the GEMV
  // (stale where the quants are reused), another op, the GEMV again
  // (fresh); then produced again and replaced by the backend's own copy.
  const auto stale_then_fresh = [&](const std::function<void()>& produce, const Tensor& row,
                                    std::vector<float>& stale, std::vector<float>& fresh,
                                    std::vector<float>& copied) {
    produce();
    (void)read(o4, m4);
    ASSERT_EQ(gpuMemcpy(row.data, other.data(), kHidden * 2, gpuMemcpyHostToDevice), gpuSuccess);
    ASSERT_EQ(gpuDeviceSynchronize(), gpuSuccess);
    gpu.matmul(row, gw4, o4);
    stale = read(o4, m4);
    gpu.add_bias(spare, gbias);
    gpu.matmul(row, gw4, o4);
    fresh = read(o4, m4);
    produce();
    gpu.copy_to_device(row.data, other.data(), kHidden * 2);
    gpu.matmul(row, gw4, o4);
    copied = read(o4, m4);
  };
  stale_then_fresh([&] { gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn); }, xn, r.norm_stale, r.norm_fresh,
                   r.norm_copied);
  stale_then_fresh([&] { gpu.attention(q, cache, meta, ap, att); }, att, r.combine_stale, r.combine_fresh,
                   r.combine_copied);
  return r;
}

TEST(CudaFusedQ8, SameBitsAsTheQuantizeKernel) {
  RF_REQUIRE_GPU();
  const FusedQ8Results off = run_ops(false), on = run_ops(true);
  EXPECT_EQ(on.after_norm, off.after_norm) << "GEMV after add + RMSNorm";
  EXPECT_EQ(on.second_gemv, off.second_gemv) << "second GEMV of the normed row";
  EXPECT_EQ(on.after_other_op, off.after_other_op) << "GEMV after an op that changed the row";
  EXPECT_EQ(on.after_combine, off.after_combine) << "GEMV after the attention combine";
  EXPECT_EQ(on.norm_fresh, off.norm_fresh);
  EXPECT_EQ(on.combine_fresh, off.combine_fresh);
  // Without fusing, every GEMV quantizes the row it reads.
  EXPECT_EQ(off.norm_stale, off.norm_fresh);
  EXPECT_EQ(off.combine_stale, off.combine_fresh);
  // Fused, the GEMV right after each producer read the producer's quants.
  EXPECT_NE(on.norm_stale, on.norm_fresh) << "the GEMV after the norm quantized its row itself";
  EXPECT_NE(on.combine_stale, on.combine_fresh) << "the GEMV after the combine quantized its row itself";
  EXPECT_EQ(on.combine_stale, on.after_combine) << "the combine's quants are those of its output";
  // The backend's own copies drop the record.
  EXPECT_EQ(on.norm_copied, on.norm_fresh) << "GEMV after copy_to_device over the normed row";
  EXPECT_EQ(on.combine_copied, on.combine_fresh) << "GEMV after copy_to_device over the combined row";
}

// One token's MoE layer: add + RMSNorm (writing the row's quants), the
// router GEMV + routing in one launch (CudaOptions::fused_moe_router, which
// carries the record: it neither writes the row nor act_q8), the experts'
// gate*up (a streaming GEMV of 2048-wide Q4_K rows, reading the norm's
// quants) and down. Results after a normal pass, after the normed row was
// replaced behind the backend's back (stale where the gate*up reused the
// norm's quants), and after another op came between (fresh).
struct MoeQ8Results {
  std::vector<float> normal, stale, fresh;
};

MoeQ8Results run_moe(bool fused) {
  std::mt19937 rng(31);
  const int d = 2048, E = 16, k = 4, ff = 256;
  CudaOptions o;
  o.dequant_scratch_bytes = size_t(32) << 20;
  o.fused_act_q8 = fused;
  o.fused_moe_router = true;
  CudaBackend gpu(o);
  gpu.reserve(test::moe_limits(8, E, k, ff, d));
  const auto gate = test::random_weight(DType::Q4_K, E * ff, d, rng, 0.3f);
  const auto up = test::random_weight(DType::Q4_K, E * ff, d, rng, 0.3f);
  const auto down = test::random_weight(DType::Q4_K, E * d, ff, rng, 0.3f);
  ExpertWeights w;
  w.gate = gpu.load_weight(make_tensor(const_cast<uint8_t*>(gate.data()), DType::Q4_K, d, E * ff), "gate");
  w.up = gpu.load_weight(make_tensor(const_cast<uint8_t*>(up.data()), DType::Q4_K, d, E * ff), "up");
  w.down = gpu.load_weight(make_tensor(const_cast<uint8_t*>(down.data()), DType::Q4_K, ff, E * d), "down");
  w.n_expert = E;
  const auto router = test::randn(size_t(E) * d, rng, 0.05f);
  Tensor wr = gpu.load_f32(router.data(), d, E, "router");
  MoeParams p;
  p.n_expert = E;
  p.n_used = k;
  p.n_ff = ff;
  const NormInputs ni = norm_inputs(gpu, d, rng);
  Tensor gres = ni.res, gy = ni.y, gnw = ni.w;
  const auto act = [&](const char* what, int64_t cols, DType t) {
    return make_tensor(gpu.alloc(row_bytes(t, uint64_t(cols)), what), t, cols, 1, DeviceKind::CUDA);
  };
  Tensor xn = act("normed", d, DType::F16), logits = act("logits", E, DType::F32), ids = act("ids", k, DType::I32),
         weights = act("weights", k, DType::F32), out = act("out", d, DType::F16), spare = act("spare", d, DType::F16);
  const auto bias = test::randn(d, rng);
  Tensor gbias = gpu.load_f32(bias.data(), d, 1, "bias");
  const auto other = test::to_f16(test::round_f16(test::randn(d, rng)));
  const auto moe = [&] {
    gpu.moe_router_route(xn, wr, p, logits, ids, weights);
    gpu.moe_ffn(xn, ids, weights, w, p, out);
    return test::from_f16(test::download<uint16_t>(gpu, out.data, size_t(d)));
  };
  MoeQ8Results r;
  gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn);
  (void)moe();  // a k-quant GEMV has run: from now on the norm writes quants
  gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn);
  r.normal = moe();
  gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn);
  gpu.synchronize();  // the norm done before the raw copy (on another stream) lands
  EXPECT_EQ(gpuMemcpy(xn.data, other.data(), size_t(d) * 2, gpuMemcpyHostToDevice), gpuSuccess);
  EXPECT_EQ(gpuDeviceSynchronize(), gpuSuccess);
  r.stale = moe();
  gpu.add_bias(spare, gbias);
  r.fresh = moe();
  return r;
}

TEST(CudaFusedQ8, MoeGateUpReadsTheNormsQuants) {
  RF_REQUIRE_GPU();
  const MoeQ8Results off = run_moe(false), on = run_moe(true);
  EXPECT_EQ(on.normal, off.normal) << "the MoE layer after add + RMSNorm";
  EXPECT_EQ(on.fresh, off.fresh);
  EXPECT_EQ(off.stale, off.fresh) << "without fusing, the gate*up quantizes the row it reads";
  EXPECT_NE(on.stale, on.fresh) << "the gate*up after the router quantized its row itself";
}

}  // namespace
}  // namespace rf
