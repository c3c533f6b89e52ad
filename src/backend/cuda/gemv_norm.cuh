// The residual add + RMSNorm folded into the batch-1 streaming GEMVs around
// it (CudaOptions::fused_norm_gemv), so that it costs no launch of its own:
//
// - The producer, the GEMV whose rows are the residual stream's next
//   addend (an o or down projection), adds each row's value (rounded to
//   f16, as the separate add would read it) to the residual and stages
//   residual * norm weight. The last warp to finish each 32 rows (a ticket
//   per group) quantizes the group's staged values to 8 bits (act_q8's
//   layout, in the deferred-norm buffer) and writes its sum of squares.
//   Quants per 32 carry their own scale, so those of residual * w are those
//   of the normed row, their scale 1 / rms too large.
// - The consumers, the GEMVs of the normed row (q/k/v, gate/up), read those
//   quants and multiply their sums by 1 / rms, from the groups' sums of
//   squares: complete once the producer is, which their PDL wait ensures.
//
// No block waits on another; the group tickets return to 0 as each group
// finishes. Warps of 32 lanes only (the launchers check).
#pragma once

#include "backend/cuda/gemv_args.cuh"

namespace rf::gpu {

// Producer: row r's finished value v into the residual and the stage (the
// lane's residual and norm weight loaded before).
__device__ __forceinline__ void norm_stage_row(const GemvNormOut& n, int r, float v, float residual, float w) {
  const float x = residual + __half2float(__float2half_rn(v));
  n.residual[r] = x;
  n.stage[r] = x * w;
}

// Producer: after a warp stored its kWarpRows consecutive rows from `base`
// (within one group of 32), its ticket; the warp that completes the group
// quantizes it and sums its squares. Every lane of the warp calls it.
template <int kWarpRows>
__device__ __forceinline__ void norm_finish_rows(const GemvNormOut& n, int base, int lane) {
  static_assert(32 % kWarpRows == 0, "gemv norm epilogue: a warp's rows within one group of 32");
  if constexpr (RF_WARP_SIZE == 32) {
    __threadfence();  // this warp's rows, before its ticket
    RF_SYNCWARP();
    const int g = base / 32;
    int arrived = 0;
    if (lane == 0) arrived = atomicAdd(n.tickets + g, kWarpRows) + kWarpRows;
    if (RF_SHFL(arrived, 0) != 32) return;
    __threadfence();  // the other warps' rows, after their tickets
    const int r = g * 32 + lane;
    const float h = load_past_l1(n.stage + r), x = load_past_l1(n.residual + r);
    const float ss = warp_sum(x * x);
    quantize32_q8(h, r, n.xq, n.xds);
    if (lane == 0) {
      n.group_ss[g] = ss;
      n.tickets[g] = 0;
    }
  }
}

// Consumer: this lane's part of the sum of squares of the row (k wide)
// whose quants it reads; after the PDL wait.
__device__ __forceinline__ float deferred_norm_partial(const GemvArgs& a, int lane) {
  float s = 0.0f;
  if (a.x_group_ss)
    for (int j = lane; j < a.k / 32; j += RF_WARP_SIZE) s += a.x_group_ss[j];
  return s;
}

// Consumer: 1 / rms of the row from the warp's partials (every lane calls
// it; 1 when the input is not a deferred norm's).
__device__ __forceinline__ float deferred_norm_scale(const GemvArgs& a, float partial) {
  if (!a.x_group_ss) return 1.0f;
  return rsqrtf(warp_sum(partial) / float(a.k) + a.x_eps);
}

}  // namespace rf::gpu
