// The CUDA backend's mixture-of-experts ops: routing (every MoeParams mode:
// softmax or sigmoid, a choice bias, groups, a weight scale; and the
// per-expert scale of its weights: Gemma 4), and the expert FFN as
// plan (pairs grouped by expert, tiles; for one token written by the
// routing) -> gather (not for one token) -> gate*up -> down -> weighted
// combine, each one launch over all active experts (for one token down and
// combine in one: moe_down.cu). Few rows per expert go
// through the GEMV kernels in expert mode (only the chosen
// experts' rows are read); many through the tensor-core kernel in expert
// mode (f16, Q4_K, Q6_K). Large batches run in chunks of the reserved size.
// Experts with biases or the clamped SwiGLU (gpt-oss) take gate and up as
// two expert matmuls and a bias + GLU kernel, their down biases in the
// weighted sum.
#include <algorithm>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/elementwise/elementwise.cuh"
#include "backend/cuda/gpu.h"
#include "backend/cuda/matmul/matmul.cuh"
#include "backend/cuda/moe/moe.cuh"
#include "backend/cuda/moe/moe_scratch.h"
#include "backend/cuda/op_profiler.h"
#include "core/error.h"

namespace rf {
namespace {

constexpr int kGemvTileRows = 8;   // the GEMV kernels' most activation rows
constexpr int kMmaTileRows = 64;   // the tensor-core kernel's
constexpr int kMaxChunkTokens = 1024;

// The routing kernels' view of MoeParams (a choice bias must be an f32
// vector of this backend's memory: one per expert).
gpu::MoeRouteSpec route_spec(const MoeParams& p) {
  gpu::MoeRouteSpec r;
  r.n_expert = p.n_expert;
  r.k = p.n_used;
  r.norm = p.norm_weights;
  r.sigmoid = p.gating == MoeGating::Sigmoid;
  if (p.choice_bias.data) {
    RF_CHECK(p.choice_bias.type == DType::F32 && p.choice_bias.numel() == p.n_expert, "cuda moe_route: choice bias is ",
             p.choice_bias.shape_string(), " ", dtype_name(p.choice_bias.type), ", expected [", p.n_expert, "] f32");
    r.bias = p.choice_bias.ptr<float>();
  }
  r.scale = p.weights_scale;
  if (p.grouped()) {
    r.n_group = p.n_group;
    r.n_group_used = p.n_group_used;
  }
  return r;
}

}  // namespace

bool CudaBackend::expert_down_quantizes_activations(DType w_type, int k, int n_used) const {
  return act_q8_ && (gpu::moe_down_combined_supported(tuning_, w_type, k, n_used) ||
                     gpu::gemv_expert_rows_quantize_activations(tuning_, warp_size_, w_type, k));
}

void CudaBackend::reserve_moe(const BackendLimits& lim) {
  if (lim.n_expert == 0) return;
  RF_CHECK(lim.n_expert <= gpu::kMoeMaxExperts && lim.n_expert_used >= 1 && lim.n_expert_used <= 32 &&
               lim.expert_ff > 0 && lim.n_embd > 0,
           "cuda: mixture of ", lim.n_expert, " experts (", lim.n_expert_used, " used) is not supported (at most ",
           gpu::kMoeMaxExperts, " experts, 32 used)");
  moe_ = std::make_unique<MoeScratch>();
  MoeScratch& M = *moe_;
  M.chunk_tokens = std::min(lim.max_tokens, kMaxChunkTokens);
  M.max_pairs = M.chunk_tokens * lim.n_expert_used;
  const size_t P = size_t(M.max_pairs);
  const int tiles = gpu::moe_max_tiles(M.max_pairs, lim.n_expert, 1);  // the most of either kind
  M.order = static_cast<int32_t*>(alloc(P * 4, "moe pair order"));
  M.pos_of = static_cast<int32_t*>(alloc(P * 4, "moe pair positions"));
  M.tiles_gemv = static_cast<int32_t*>(alloc(size_t(tiles) * 16, "moe gemv tiles"));
  M.tiles_mma = static_cast<int32_t*>(alloc(size_t(tiles) * 16, "moe mma tiles"));
  M.n_tiles = static_cast<int32_t*>(alloc(2 * 4, "moe tile counts"));
  M.router_ticket = static_cast<unsigned*>(alloc(4, "moe router ticket"));
  const unsigned zero = 0;
  copy_to_device(M.router_ticket, &zero, sizeof(zero));
  M.xs = alloc(P * size_t(lim.n_embd) * 2, "moe gathered activations");
  M.h = alloc(P * size_t(lim.expert_ff) * 2, "moe expert hidden");
  M.u = alloc(P * size_t(lim.expert_ff) * 2, "moe expert up");
  M.y = static_cast<float*>(alloc(P * size_t(lim.n_embd) * 4, "moe expert outputs"));
  if (lim.host_experts) {
    M.host = std::make_unique<gpu::HostExperts>(lim, options_.host_threads, stream_);
    if (tuning_.host_experts_upload_tokens > 0 && lim.host_expert_bytes > 0) {
      M.host_copy_bytes = lim.host_expert_bytes;
      M.host_copy = alloc(M.host_copy_bytes, "one layer's host experts, copied for large batches");
    }
  }
}

void CudaBackend::release_moe() {
  if (!moe_) return;
  MoeScratch& M = *moe_;
  for (void* p : {static_cast<void*>(M.order), static_cast<void*>(M.pos_of), static_cast<void*>(M.tiles_gemv),
                  static_cast<void*>(M.tiles_mma), static_cast<void*>(M.n_tiles),
                  static_cast<void*>(M.router_ticket), M.xs, M.h, M.u,
                  static_cast<void*>(M.y), M.host_copy})
    if (p) free(p);
  moe_.reset();
}

Handoff CudaBackend::moe_route(const Tensor& router_logits, const MoeParams& p, Tensor& ids, Tensor& weights) {
  const int n = int(router_logits.rows());
  RF_CHECK(router_logits.type == DType::F32 && router_logits.cols() == p.n_expert && ids.type == DType::I32 &&
               weights.type == DType::F32 && ids.cols() == p.n_used && weights.cols() == p.n_used &&
               ids.rows() >= n && weights.rows() >= n,
           "cuda moe_route: bad inputs");
  OpTimer timer(profiler(), "moe route");
  // One token: the plan comes with the routing (the returned Handoff tells
  // moe_ffn on these ids to skip its own plan launch).
  const bool with_plan = n == 1 && moe_ && tuning_.fusions.moe_route_plan;
  gpu::MoePlanOut plan{};
  if (with_plan)
    plan = {moe_->order, moe_->pos_of, moe_->tiles_gemv, moe_->tiles_mma, moe_->n_tiles};
  gpu::moe_route(router_logits.ptr<float>(), n, route_spec(p), ids.ptr<int32_t>(), weights.ptr<float>(),
                 with_plan ? &plan : nullptr, ctx());
  return with_plan ? planned(ids) : Handoff{};
}

void CudaBackend::moe_scale_weights(const Tensor& ids, const Tensor& scales, Tensor& weights) {
  RF_CHECK(ids.type == DType::I32 && weights.type == DType::F32 && scales.type == DType::F32 &&
               ids.cols() == weights.cols() && weights.rows() >= ids.rows() && scales.numel() >= 1,
           "cuda moe_scale_weights: bad shapes");
  OpTimer timer(profiler(), "moe scale weights");
  // (ids come from moe_route: each within [0, n_expert), the scales' length)
  gpu::moe_scale_weights(ids.ptr<int32_t>(), scales.ptr<float>(), int(ids.numel()), weights.ptr<float>(), ctx());
}

Handoff CudaBackend::planned(const Tensor& ids) {
  MoeScratch& M = *moe_;
  M.plan_ids = ids.data;
  Handoff h;
  h.data = ids.data;
  h.copy = ++M.plan_version;
  return h;
}

Handoff CudaBackend::moe_router_route(const Tensor& x, const Tensor& w_router, const MoeParams& p, Tensor& logits,
                                      Tensor& ids, Tensor& weights) {
  const int n = int(x.rows()), d = int(x.cols());
  // One token, f32 router weights: one launch (routing with the plan).
  if (!tuning_.fusions.moe_router || n != 1 || !moe_ || w_router.type != DType::F32 || x.type != DType::F16 ||
      w_router.cols() != d || w_router.rows() != p.n_expert || !gpu::moe_router_route_fusable(d, p.n_expert, p.n_used))
    return Backend::moe_router_route(x, w_router, p, logits, ids, weights);
  RF_CHECK(logits.type == DType::F32 && logits.cols() == p.n_expert && ids.type == DType::I32 &&
               weights.type == DType::F32 && ids.cols() == p.n_used && weights.cols() == p.n_used,
           "cuda moe_router_route: bad outputs");
  RF_CHECK(!p.router_bias.data || (p.router_bias.type == DType::F32 && p.router_bias.numel() == p.n_expert),
           "cuda moe_router_route: router bias is ", p.router_bias.shape_string(), " ",
           dtype_name(p.router_bias.type), ", expected [", p.n_expert, "] f32");
  OpTimer timer(profiler(), "moe router+route");
  const gpu::MoePlanOut plan{moe_->order, moe_->pos_of, moe_->tiles_gemv, moe_->tiles_mma, moe_->n_tiles};
  gpu::moe_router_route(x.data, w_router.ptr<float>(), p.router_bias.ptr<float>(), d, route_spec(p), logits.ptr<float>(),
                        ids.ptr<int32_t>(), weights.ptr<float>(), plan, moe_->router_ticket, ctx());
  return tuning_.fusions.moe_route_plan ? planned(ids) : Handoff{};
}

ExpertWeights CudaBackend::copy_host_experts(const ExpertWeights& w) {
  MoeScratch& M = *moe_;
  RF_CHECK(w.copy_bytes() <= M.host_copy_bytes, "cuda moe_ffn: host experts of ", w.copy_bytes(),
           " bytes, beyond the ", M.host_copy_bytes, " reserve() was told (BackendLimits::host_expert_bytes)");
  OpTimer timer(profiler(), profiler() ? str("host experts to the device ", w.copy_bytes() >> 20, " MiB") : std::string());
  ExpertWeights d = w;
  uint64_t at = 0;
  for (Tensor* t : d.tensors()) {
    if (!t->data) continue;
    void* dst = static_cast<uint8_t*>(M.host_copy) + at;
    RF_GPU_CHECK(gpuMemcpyAsync(dst, t->data, t->bytes(), gpuMemcpyHostToDevice, as_stream(stream_)));
    t->data = dst;
    t->device = DeviceKind::CUDA;
    at += (t->bytes() + 255) / 256 * 256;
  }
  return d;
}

void CudaBackend::moe_ffn(const Tensor& x, const Tensor& ids, const Tensor& weights, const ExpertWeights& w,
                          const MoeParams& p, Tensor& out, const Handoff& x_in, const Handoff& ids_in) {
  const int n = int(x.rows()), d = int(x.cols()), k = p.n_used, E = p.n_expert, ff = p.n_ff;
  RF_CHECK(moe_ && E <= limits_.n_expert && k <= limits_.n_expert_used && ff <= limits_.expert_ff &&
               d <= limits_.n_embd,
           "cuda moe_ffn: reserve() did not size the expert workspace for this layer");
  RF_CHECK(x.type == DType::F16 && out.type == DType::F16 && out.cols() == d && out.rows() >= n &&
               ids.type == DType::I32 && weights.type == DType::F32 && ids.cols() == k && weights.cols() == k,
           "cuda moe_ffn: bad activations");
  RF_CHECK(w.n_expert == E && w.gate.cols() == d && w.up.cols() == d && w.down.cols() == ff &&
               w.gate.rows() == int64_t(E) * ff && w.up.rows() == int64_t(E) * ff && w.down.rows() == int64_t(E) * d &&
               w.gate.type == w.up.type,
           "cuda moe_ffn: expert weights of the wrong shape");
  RF_CHECK(!w.has_biases() || (w.gate_bias.type == DType::F32 && w.up_bias.type == DType::F32 &&
                                w.down_bias.type == DType::F32 && w.gate_bias.numel() == int64_t(E) * ff &&
                                w.up_bias.numel() == int64_t(E) * ff && w.down_bias.numel() == int64_t(E) * d),
           "cuda moe_ffn: expert biases must be f32 [", ff, ", ", E, "] (gate, up) and [", d, ", ", E, "] (down)");
  // Biases (gpt-oss) go between the gate/up products and the GLU, and onto
  // each expert's down rows: gate and up then run as separate expert
  // matmuls, the biases and the GLU as one kernel after them
  // (moe_bias_glu); the down biases join the weighted sum (moe_combine, or
  // moe_down_combined for one token). The clamped SwiGLU takes the same
  // path (the fused gate*up GEMV computes SwiGLU and GeGLU only).
  const bool biased = w.has_biases() || p.act == Activation::SiLUClampedOai;
  const float* gate_bias = w.has_biases() ? w.gate_bias.ptr<float>() : nullptr;
  const float* up_bias = w.has_biases() ? w.up_bias.ptr<float>() : nullptr;
  const float* down_bias = w.has_biases() ? w.down_bias.ptr<float>() : nullptr;
  MoeScratch& M = *moe_;
  check_handoff(x, x_in, "cuda moe_ffn");
  check_handoff(ids, ids_in, "cuda moe_ffn");
  if (w.gate.device == DeviceKind::CPU) {  // experts in host memory (--cpu-moe)
    RF_CHECK(M.host, "cuda moe_ffn: experts in host memory, but reserve() was not told (BackendLimits::host_experts)");
    // Large batches outside graphs: the layer's experts copied over (bus
    // time, once a step) cost less than the host's cores take for them.
    if (M.host_copy && !capturing_ && n >= tuning_.host_experts_upload_tokens) {
      const ExpertWeights copied = copy_host_experts(w);
      moe_ffn(x, ids, weights, copied, p, out, x_in, ids_in);
      return;
    }
    OpTimer timer(profiler(), profiler() ? str("moe ffn on the host ", dtype_name(w.gate.type), " n", n) : std::string());
    M.host->run(ctx(), capturing_, x, ids, weights, w, p, out);
    return;
  }
  // ids' plan handed over by their routing (one token), checked to be the
  // one in the scratch; x's 8-bit quants by its norm, for the gate*up.
  RF_CHECK(ids_in.copy == 0 || (ids_in.copy == M.plan_version && M.plan_ids == ids.data),
           "cuda moe_ffn: handed an expert plan that was overwritten since");
  const bool handed_plan = ids_in.copy != 0;
  const gpu::LaunchCtx x_ctx = ctx_reading(x, x_in, "cuda moe_ffn");
  const bool gelu = p.act == Activation::GeluTanh;
  const size_t gate_expert_bytes = w.gate.row_bytes() * size_t(ff), down_expert_bytes = w.down.row_bytes() * size_t(d);
  OpTimer timer(profiler(), profiler() ? str("moe ffn ", dtype_name(w.gate.type), "/",
                                                            dtype_name(w.down.type), " n", n, " experts ", E, " used ",
                                                            k, " ff ", ff)
                                                      : std::string());
  for (int t0 = 0; t0 < n; t0 += M.chunk_tokens) {
    const int nt = std::min(M.chunk_tokens, n - t0), P = nt * k;
    // One token: every expert has one row (tiles of 1 use the single-row
    // GEMV kernels).
    const int gemv_rows = nt == 1 ? 1 : kGemvTileRows;
    // Tensor cores where the active experts average more than
    // Tuning::moe_mma_rows rows (at most min(E, P) experts are active).
    const bool many = nt > 1 && P > tuning_.moe_mma_rows * std::min(E, P);
    const auto tensor_cores = [&](DType type, int width) {
      return gpu::mma_experts_supported(type, width) || (tuning_.wgmma && gpu::wgmma_experts_supported(type, width));
    };
    const bool mma_gate = many && tensor_cores(w.gate.type, d);
    const bool mma_down = many && tensor_cores(w.down.type, ff);
    // Tiles of 16 rows where the active experts average at most 8 and the
    // wgmma kernel takes them (its 16-column variant: a quarter of the
    // tensor work and more stages); an expert past 16 rows takes more tiles.
    const bool narrow = tuning_.wgmma && tuning_.wgmma_narrow && P <= 8 * std::min(E, P) &&
                        gpu::wgmma_experts_supported(w.gate.type, d) && gpu::wgmma_experts_supported(w.down.type, ff);
    const int mma_rows = narrow ? 16 : kMmaTileRows;
    const int max_gemv = gpu::moe_max_tiles(P, E, gemv_rows), max_mma = gpu::moe_max_tiles(P, E, mma_rows);
    const int32_t* ids_c = ids.ptr<int32_t>() + size_t(t0) * k;
    const float* w_c = weights.ptr<float>() + size_t(t0) * k;
    if (!(n == 1 && handed_plan)) {  // (one token's routing wrote its plan)
      gpu::moe_plan(ids_c, P, E, gemv_rows, mma_rows, M.order, M.pos_of, M.tiles_gemv, M.tiles_mma, M.n_tiles,
                    ctx());
      ++M.plan_version;
      M.plan_ids = nullptr;
    }
    const uint8_t* x_c = static_cast<const uint8_t*>(x.data) + size_t(t0) * d * 2;
    // One token: the gate/up GEMV reads its row directly (no gather).
    if (nt > 1) gpu::moe_gather(x_c, M.order, P, k, d, M.xs, ctx());
    if (mma_gate) {
      gpu::mma_matmul_experts(w.gate.type, w.gate.data, gate_expert_bytes, w.gate.row_bytes(), ff, d, M.xs, M.h,
                              DType::F16, M.tiles_mma, M.n_tiles + 1, max_mma, mma_rows, ctx());
      gpu::mma_matmul_experts(w.up.type, w.up.data, gate_expert_bytes, w.up.row_bytes(), ff, d, M.xs, M.u, DType::F16,
                              M.tiles_mma, M.n_tiles + 1, max_mma, mma_rows, ctx());
      if (biased) gpu::moe_bias_glu(M.h, M.u, gate_bias, up_bias, ids_c, M.order, P, ff, p.act, ctx());
      else if (gelu) gpu::geglu(M.h, M.u, M.h, int64_t(P) * ff, ctx());
      else gpu::swiglu(M.h, M.u, M.h, int64_t(P) * ff, ctx());
    } else if (biased && nt == 1 && tuning_.fusions.moe_glu_biased &&
               gpu::gemv_experts_glu_biased(w.gate.type, w.gate.data, w.up.data, gate_bias, up_bias, p.act,
                                            gate_expert_bytes, w.gate.row_bytes(), ff, d, x_c, M.h, M.tiles_gemv,
                                            M.n_tiles, max_gemv, t0 == 0 ? x_ctx : ctx())) {
      // (one token: gate, up, their biases and the GLU in one launch)
    } else if (biased) {  // gate and up apart, then biases and the GLU
      const void* xs = nt == 1 ? x_c : M.xs;
      const int rows = nt == 1 ? 1 : P;
      gpu::gemv_experts(w.gate.type, w.gate.data, nullptr, false, gate_expert_bytes, w.gate.row_bytes(), ff, d, xs,
                        nt == 1, rows, M.h, DType::F16, M.tiles_gemv, M.n_tiles, max_gemv, gemv_rows,
                        t0 == 0 ? x_ctx : ctx());
      gpu::gemv_experts(w.up.type, w.up.data, nullptr, false, gate_expert_bytes, w.up.row_bytes(), ff, d, xs, nt == 1,
                        rows, M.u, DType::F16, M.tiles_gemv, M.n_tiles, max_gemv, gemv_rows, t0 == 0 ? x_ctx : ctx());
      gpu::moe_bias_glu(M.h, M.u, gate_bias, up_bias, ids_c, M.order, P, ff, p.act, ctx());
    } else {
      gpu::gemv_experts(w.gate.type, w.gate.data, w.up.data, gelu, gate_expert_bytes, w.gate.row_bytes(), ff, d,
                        nt == 1 ? x_c : M.xs, nt == 1, nt == 1 ? 1 : P, M.h, DType::F16, M.tiles_gemv, M.n_tiles,
                        max_gemv, gemv_rows, t0 == 0 ? x_ctx : ctx());
    }
    void* out_c = static_cast<uint8_t*>(out.data) + size_t(t0) * d * 2;
    // One token: its experts' down rows and their weighted sum in one launch.
    if (nt == 1 && gpu::moe_down_combined(w.down.type, w.down.data, down_expert_bytes, w.down.row_bytes(), d, ff, k,
                                          M.h, ids_c, w_c, M.pos_of, out_c, ctx(), down_bias))
      continue;
    if (mma_down) {
      gpu::mma_matmul_experts(w.down.type, w.down.data, down_expert_bytes, w.down.row_bytes(), d, ff, M.h, M.y,
                              DType::F32, M.tiles_mma, M.n_tiles + 1, max_mma, mma_rows, ctx());
    } else {
      gpu::gemv_experts(w.down.type, w.down.data, nullptr, false, down_expert_bytes, w.down.row_bytes(), d, ff, M.h,
                        false, P, M.y, DType::F32, M.tiles_gemv, M.n_tiles, max_gemv, gemv_rows, ctx());
    }
    gpu::moe_combine(M.y, M.pos_of, w_c, nt, k, d, out_c, ctx(), down_bias, ids_c);
  }
}

}  // namespace rf
