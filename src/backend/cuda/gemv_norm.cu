// The deferred norm's host side (gemv_norm.cuh has the kernels' part): its
// record in act_q8's state, the producer's launch (gemv_add_rms_norm) and
// the kernel that writes a deferred norm's row out in f16 for a reader
// that is not a streaming GEMV.
#include "backend/cuda/gemv_norm.cuh"
#include "backend/cuda/kernels.h"

namespace rf::gpu {
namespace {

// out (k f16) = stage / rms, the rms from the groups' sums of squares. One
// block.
__global__ void settle_deferred_norm_kernel(const float* __restrict__ stage, const float* __restrict__ group_ss, int k,
                                            float eps, __half* __restrict__ out) {
  __shared__ float scratch[32];
  pdl_wait();
  pdl_trigger();
  float s = 0.0f;
  for (int j = int(threadIdx.x); j < k / 32; j += int(blockDim.x)) s += group_ss[j];
  s = block_sum(s, scratch);
  const float inv = rsqrtf(s / float(k) + eps);
  for (int i = int(threadIdx.x); i < k; i += int(blockDim.x)) out[i] = __float2half_rn(stage[i] * inv);
}

}  // namespace

void deferred_norm_record(const LaunchCtx& ctx, const void* src, int k, float eps) {
  RF_CHECK(ctx.act_q8_state, "deferred norm: no act_q8 state to record it in");
  ctx.act_q8_state->deferred = {src, k, eps, false};
}

bool deferred_norm_pending(const LaunchCtx& ctx, const void* src) {
  return ctx.act_q8_state && ctx.act_q8_state->deferred.src && ctx.act_q8_state->deferred.src == src;
}

void settle_deferred_norm(const LaunchCtx& ctx, const void* src, bool even_if_read) {
  if (!deferred_norm_pending(ctx, src)) return;
  DeferredNormState& d = ctx.act_q8_state->deferred;
  if (even_if_read || !d.read) {
    launch(settle_deferred_norm_kernel, 1u, 1024u, 0, ctx, deferred_norm_stage(ctx.act_q8_norm),
           deferred_norm_group_ss(ctx.act_q8_norm), d.k, d.eps, static_cast<__half*>(const_cast<void*>(src)));
  }
  d = {};
}

void deferred_norm_overwritten(const LaunchCtx& ctx, const void* src) {
  if (deferred_norm_pending(ctx, src)) ctx.act_q8_state->deferred = {};
}

bool deferred_norm_supported(const LaunchCtx& ctx, DType w_type, int m, int k) {
  return ctx.options.fused_norm_gemv && ctx.act_q8 && ctx.act_q8_norm && ctx.act_q8_state && ctx.warp_size == 32 &&
         m % 32 == 0 && m > 0 && m <= kActQ8MaxK && gemv_quantizes_activations(ctx.options, ctx.warp_size, w_type, 1, k);
}

bool gemv_add_rms_norm(DType w_type, const void* w, size_t row_bytes, int m, int k, const void* x, float* residual,
                       const float* norm_w, float eps, const void* next, const LaunchCtx& ctx) {
  if (!deferred_norm_supported(ctx, w_type, m, k)) return false;
  GemvArgs a = gemv_one_row_args(w_type, w, row_bytes, m, k, x, nullptr, ctx);
  void* buf = ctx.act_q8_norm;
  a.norm = {residual,          norm_w, deferred_norm_stage(buf), deferred_norm_tickets(buf), deferred_norm_group_ss(buf),
            act_q8_quants(buf), act_q8_scales(buf)};
  if (!launch_gemv_kq_stream(w_type, a, DType::F16, false, 1, ctx)) return false;
  deferred_norm_record(ctx, next, m, eps);
  return true;
}

}  // namespace rf::gpu
