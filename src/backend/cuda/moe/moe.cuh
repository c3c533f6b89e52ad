// The mixture-of-experts family's launchers around the expert matmuls
// (moe.cu): routing, the plan that groups (token, expert) pairs into tiles,
// the gather and the weighted combine; and one token's expert down
// projections with their weighted sum in one launch (moe_down.cu). The
// expert matmuls themselves are the matmul family's expert modes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/gpu.h"
#include "core/activation.h"
#include "core/dtype.h"

namespace rf::gpu {

constexpr int kMoeMaxExperts = 256;
constexpr int kMoeMaxGroups = 32;
// How a token's router logits become its choice and weights (backend.h
// moe_route): softmax or sigmoid probabilities; choice scores = the
// probabilities + bias (f32 [n_expert] on the device, or null) — the
// logits themselves for plain routing (softmax, no bias, no groups);
// n_group > 1: only the n_group_used groups (consecutive ids, equal sizes)
// whose two best scores sum highest are chosen from; weights = the chosen
// probabilities, renormalised when norm, times scale.
struct MoeRouteSpec {
  int n_expert = 0, k = 0;
  bool norm = true;
  bool sigmoid = false;
  const float* bias = nullptr;
  float scale = 1.0f;
  int n_group = 0, n_group_used = 0;
};
// Checks a spec against the kernels' limits (an error naming it).
void check_route_spec(const MoeRouteSpec& r);
// Routing: f32 router logits [n, n_expert] -> the k chosen experts of each
// token (ids [n, k], best score first, ties to the lower index) and their
// weights [n, k].
// With `plan` (one token only) the same launch also writes moe_plan's output
// for these ids (each chosen expert its own one-row tile), so the FFN needs
// no plan launch.
struct MoePlanOut {
  int32_t *order, *pos_of, *tiles_a, *tiles_b, *n_tiles;
};
void moe_route(const float* logits, int n, const MoeRouteSpec& r, int32_t* ids, float* weights,
               const MoePlanOut* plan, const LaunchCtx& ctx);
// weights[i] *= scales[ids[i]] for i < n_pairs (ids i32 and weights f32
// [n, k], scales f32 [n_expert]: Gemma 4's per-expert down scale).
void moe_scale_weights(const int32_t* ids, const float* scales, int n_pairs, float* weights, const LaunchCtx& ctx);
// One token's router logits (x f16 [d] . w f32 [n_expert, d]^T, plus
// `bias` f32 [n_expert] where not null, into logits) and their routing as
// moe_route with the plan, in one launch; `ticket` (one zeroed unsigned,
// left zeroed) finds the block that routes.
bool moe_router_route_fusable(int d, int n_expert, int k);
void moe_router_route(const void* x, const float* w, const float* bias, int d, const MoeRouteSpec& r,
                      float* logits, int32_t* ids, float* weights, const MoePlanOut& plan, unsigned* ticket,
                      const LaunchCtx& ctx);
// Groups the n_pairs = n * k (token, expert) pairs of ids by expert:
// order[pos] = pair, pos_of[pair] = pos, and tiles (int4 {expert, first
// pos, rows, 0}) of at most tile_a rows into tiles_a and tile_b rows into
// tiles_b; n_tiles[0], n_tiles[1] their counts (each at most
// moe_max_tiles).
void moe_plan(const int32_t* ids, int n_pairs, int n_expert, int tile_a, int tile_b, int32_t* order, int32_t* pos_of,
              int32_t* tiles_a, int32_t* tiles_b, int32_t* n_tiles, const LaunchCtx& ctx);
int moe_max_tiles(int n_pairs, int n_expert, int tile_rows);
// xs[pos, :] = x[order[pos] / k, :] (f16 rows of cols).
void moe_gather(const void* x, const int32_t* order, int n_pairs, int k, int cols, void* xs, const LaunchCtx& ctx);
// out[t, :] = sum_j weights[t, j] * (y[pos_of[t * k + j], :] + down_bias[e, :])
// with e = ids[t * k + j] (y f32, out f16; down_bias f32 [n_expert, cols]
// or null: no bias, ids unread).
void moe_combine(const float* y, const int32_t* pos_of, const float* weights, int n, int k, int cols, void* out,
                 const LaunchCtx& ctx, const float* down_bias = nullptr, const int32_t* ids = nullptr);
// The experts' gate/up biases and the GLU between the gate/up and the down
// matmuls (gpt-oss): h[pos, :] = act(h[pos, :] + gate_bias[e, :], u[pos, :] +
// up_bias[e, :]) in place, e = ids[order[pos]], for the n_pairs rows (f16,
// ff wide) in expert order; biases f32 [n_expert, ff] or null.
void moe_bias_glu(void* h, const void* u, const float* gate_bias, const float* up_bias, const int32_t* ids,
                  const int32_t* order, int n_pairs, int ff, Activation act, const LaunchCtx& ctx);

// ---- moe_down.cu
// One token's expert down projections and their weighted sum in one launch
// (Fusions::moe_down): out[r] = sum_j weights[j] * (row r of
// expert ids[j]'s m x ff down matrix at w + ids[j] * expert_bytes) .
// h[pos_of[j], :] for r < m (out f16), h's k_used rows of ff (f16) read as
// 8-bit quants (written into ctx.act_q8 first). ids, weights and pos_of
// must come from the host or from a kernel before the one writing h (the
// kernel reads them before waiting for its predecessors: they are done two
// launches back). Supported: Q4_K or Q6_K, ff % 256 == 0; false if it did
// not launch (the caller runs the down GEMV and moe_combine).
bool moe_down_combined_supported(const Tuning& tuning, DType w_type, int ff, int k_used);
// down_bias (f32 [n_expert, m], or null): each expert's down bias, added
// to its row before the weighting (out[r] += sum_j weights[j] *
// down_bias[ids[j], r]).
bool moe_down_combined(DType w_type, const void* w, size_t expert_bytes, size_t row_bytes, int m, int ff, int k_used,
                       const void* h, const int32_t* ids, const float* weights, const int32_t* pos_of, void* out,
                       const LaunchCtx& ctx, const float* down_bias = nullptr);

}  // namespace rf::gpu
