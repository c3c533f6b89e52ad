// The batch-1 k-quant GEMV's 8-bit activations written by the kernel that
// produces its input row (Fusions::act_q8): the residual add +
// RMSNorm and the attention combine, which hand them over with the row
// (Handoff). Every result must be bit-identical to the separate quantize
// kernel's (the same arithmetic on the same f16 values); a GEMV handed the
// quants reads them (and hands them on to another GEMV of the row, and a
// MoE layer's expert gate*up takes the norm's through the router); one
// handed nothing quantizes its row itself; quants overwritten since they
// were handed over are refused.
#include <gtest/gtest.h>

#include <functional>

#include "backend/cuda/gpu.h"
#include "gpu/attention_shapes.h"
#include "gpu/gpu_test_util.h"

namespace rf {
namespace {

constexpr int kHidden = 4096;  // 32 heads of 128: wide enough for the streaming GEMV

struct FusedQ8Results {
  std::vector<float> after_norm, second_gemv, not_handed, after_combine;
  // A producer, its row changed behind the backend's back (a copy, no
  // kernel between), the GEMV handed the producer's Handoff (it reads the
  // producer's quants where they are handed over: stale), the same GEMV
  // handed nothing (fresh).
  std::vector<float> norm_stale, norm_fresh, combine_stale, combine_fresh;
  // Handed quants that were overwritten since (the backend's own copy over
  // the row; another GEMV's quants in the buffer): the GEMV refuses them.
  bool norm_copied_refused = false, combine_copied_refused = false, other_gemv_refused = false;
  bool handed_other_tensor_refused = false;
  // Whether each producer handed quants over.
  bool norm_hands_quants = false, combine_hands_quants = false;
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

bool throws(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error&) {
    return true;
  }
  return false;
}

// One backend (fused_act_q8 on or off) through the same ops on the same data.
FusedQ8Results run_ops(bool fused) {
  std::mt19937 rng(23);
  CudaOptions o;
  o.dequant_scratch_bytes = size_t(32) << 20;
  o.tune = [=](gpu::Tuning& t) {
    t.fusions.act_q8 = fused;
  };
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
  // Add + RMSNorm, then two GEMVs of its row, each handed what the op
  // before handed over.
  const Handoff from_norm = gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn);
  r.norm_hands_quants = from_norm.copy != 0 && from_norm.data == xn.data;
  const Handoff after_first = gpu.matmul(xn, gw4, o4, from_norm);
  r.after_norm = read(o4, m4);
  gpu.matmul(xn, gw6, o6, after_first);
  r.second_gemv = read(o6, m6);
  // The GEMV handed nothing quantizes the row itself.
  gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn);
  gpu.matmul(xn, gw4, o4);
  r.not_handed = read(o4, m4);

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
  const Handoff from_attention = gpu.attention(q, cache, meta, ap, att);
  r.combine_hands_quants = from_attention.copy != 0 && from_attention.data == att.data;
  gpu.matmul(att, gw4, o4, from_attention);
  r.after_combine = read(o4, m4);

  const auto other = test::to_f16(test::round_f16(test::randn(kHidden, rng)));
  Tensor spare = make_tensor(gpu.alloc(kHidden * 2, "spare"), DType::F16, kHidden, 1, DeviceKind::CUDA);
  gpu.copy_to_device(spare.data, other.data(), kHidden * 2);
  // After `produce` wrote `row`: the row replaced by a raw copy behind the
  // backend's back (the backend idle: read() synchronized it), the GEMV
  // handed the producer's Handoff (stale where it hands quants over), the
  // GEMV handed nothing (fresh); then produced again, replaced by the
  // backend's own copy, and the GEMV handed the old Handoff (refused where
  // it hands quants over).
  const auto stale_then_fresh = [&](const std::function<Handoff()>& produce, const Tensor& row,
                                    std::vector<float>& stale, std::vector<float>& fresh, bool& copied_refused) {
    Handoff h = produce();
    (void)read(o4, m4);
    EXPECT_EQ(gpuMemcpy(row.data, other.data(), kHidden * 2, gpuMemcpyHostToDevice), gpuSuccess);
    EXPECT_EQ(gpuDeviceSynchronize(), gpuSuccess);
    gpu.matmul(row, gw4, o4, h);
    stale = read(o4, m4);
    gpu.matmul(row, gw4, o4);
    fresh = read(o4, m4);
    h = produce();
    gpu.copy_to_device(row.data, other.data(), kHidden * 2);
    copied_refused = throws([&] { gpu.matmul(row, gw4, o4, h); });
  };
  stale_then_fresh([&] { return gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn); }, xn, r.norm_stale, r.norm_fresh,
                   r.norm_copied_refused);
  stale_then_fresh([&] { return gpu.attention(q, cache, meta, ap, att); }, att, r.combine_stale, r.combine_fresh,
                   r.combine_copied_refused);
  // Another row's GEMV between the producer and the GEMV it handed over to:
  // the quants in the buffer are that row's now.
  const Handoff h = gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn);
  gpu.matmul(spare, gw4, o4);
  r.other_gemv_refused = throws([&] { gpu.matmul(xn, gw4, o4, h); });
  // A Handoff is for the tensor it describes.
  const Handoff h2 = gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn);
  r.handed_other_tensor_refused = throws([&] { gpu.matmul(spare, gw4, o4, h2); });
  return r;
}

TEST(CudaFusedQ8, SameBitsAsTheQuantizeKernel) {
  RF_REQUIRE_GPU();
  const FusedQ8Results off = run_ops(false), on = run_ops(true);
  EXPECT_TRUE(on.norm_hands_quants && on.combine_hands_quants);
  EXPECT_FALSE(off.norm_hands_quants || off.combine_hands_quants);
  EXPECT_EQ(on.after_norm, off.after_norm) << "GEMV after add + RMSNorm";
  EXPECT_EQ(on.second_gemv, off.second_gemv) << "second GEMV of the normed row";
  EXPECT_EQ(on.not_handed, off.not_handed) << "GEMV handed nothing";
  EXPECT_EQ(on.after_combine, off.after_combine) << "GEMV after the attention combine";
  EXPECT_EQ(on.norm_fresh, off.norm_fresh);
  EXPECT_EQ(on.combine_fresh, off.combine_fresh);
  // Without fusing, every GEMV quantizes the row it reads.
  EXPECT_EQ(off.norm_stale, off.norm_fresh);
  EXPECT_EQ(off.combine_stale, off.combine_fresh);
  // Fused, the GEMV handed each producer's quants read them.
  EXPECT_NE(on.norm_stale, on.norm_fresh) << "the GEMV after the norm quantized its row itself";
  EXPECT_NE(on.combine_stale, on.combine_fresh) << "the GEMV after the combine quantized its row itself";
  EXPECT_EQ(on.combine_stale, on.after_combine) << "the combine's quants are those of its output";
  // Quants overwritten since they were handed over are refused.
  EXPECT_TRUE(on.norm_copied_refused) << "GEMV handed quants after copy_to_device over the normed row";
  EXPECT_TRUE(on.combine_copied_refused) << "GEMV handed quants after copy_to_device over the combined row";
  EXPECT_TRUE(on.other_gemv_refused) << "GEMV handed quants after another row's GEMV";
  EXPECT_FALSE(off.norm_copied_refused || off.combine_copied_refused || off.other_gemv_refused);
  // A Handoff is checked against the tensor it describes; unfused, the norm
  // hands nothing over (an empty Handoff describes no tensor).
  EXPECT_TRUE(on.handed_other_tensor_refused) << "GEMV of another tensor handed the normed row's quants";
  EXPECT_FALSE(off.handed_other_tensor_refused);
}

// One token's MoE layer: add + RMSNorm (handing over the row's quants), the
// router GEMV + routing in one launch (Fusions::moe_router: it
// neither writes the row nor the quants, so the norm's Handoff goes on to
// moe_ffn), the experts' gate*up (a streaming GEMV of 2048-wide Q4_K rows,
// reading the norm's quants) and down. Results after a normal pass, after
// the normed row was replaced behind the backend's back (stale where the
// gate*up read the norm's quants), and with no Handoff (fresh).
struct MoeQ8Results {
  std::vector<float> normal, stale, fresh;
};

MoeQ8Results run_moe(bool fused) {
  std::mt19937 rng(31);
  const int d = 2048, E = 16, k = 4, ff = 256;
  CudaOptions o;
  o.dequant_scratch_bytes = size_t(32) << 20;
  o.tune = [=](gpu::Tuning& t) {
    t.fusions.act_q8 = fused;
    t.fusions.moe_router = true;
  };
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
         weights = act("weights", k, DType::F32), out = act("out", d, DType::F16);
  const auto other = test::to_f16(test::round_f16(test::randn(d, rng)));
  const auto moe = [&](const Handoff& xn_h) {
    const Handoff ids_h = gpu.moe_router_route(xn, wr, p, logits, ids, weights);
    gpu.moe_ffn(xn, ids, weights, w, p, out, xn_h, ids_h);
    return test::from_f16(test::download<uint16_t>(gpu, out.data, size_t(d)));
  };
  MoeQ8Results r;
  r.normal = moe(gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn));
  const Handoff h = gpu.add_rms_norm(gres, gy, gnw, 1e-5f, xn);
  gpu.synchronize();  // the norm done before the raw copy (on another stream) lands
  EXPECT_EQ(gpuMemcpy(xn.data, other.data(), size_t(d) * 2, gpuMemcpyHostToDevice), gpuSuccess);
  EXPECT_EQ(gpuDeviceSynchronize(), gpuSuccess);
  r.stale = moe(h);
  r.fresh = moe({});
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
