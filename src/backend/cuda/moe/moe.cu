// Mixture-of-experts kernels around the expert matmuls (which gemv.cu and
// gemm_mma.cu run in expert mode): routing (softmax or sigmoid, a choice
// bias, group-limited choice, top-k per token, weights scaled), the
// plan that groups the step's (token, expert) pairs by expert and cuts them
// into tiles, the gather of activation rows into that order, the experts'
// gate/up biases with the GLU (gpt-oss), the per-expert scale of the
// routing weights (Gemma 4), and the weighted combine of the experts'
// outputs (with their down biases). Everything stays on the device:
// sizes come from the host-known token count, so a captured graph replays
// for any routing.
#include <algorithm>

#include "backend/cuda/elementwise/glu.cuh"
#include "backend/cuda/moe/moe.cuh"

namespace rf::gpu {
namespace {

constexpr int kRoutePerLane = kMoeMaxExperts / RF_WARP_SIZE;  // router logits per lane
constexpr int kPlanThreads = 1024;

// The best two of (a1 >= a2) and (b1 >= b2), into a.
__device__ __forceinline__ void top2_merge(float& a1, float& a2, float b1, float b2) {
  if (b1 > a1) {
    a2 = fmaxf(a1, b2);
    a1 = b1;
  } else {
    a2 = fmaxf(a2, b1);
  }
}

// The warp's best (value, index) over every lane's, ties to the lower index.
__device__ __forceinline__ void warp_argmax(float& best, int& best_i) {
#pragma unroll
  for (int m = RF_WARP_SIZE / 2; m > 0; m >>= 1) {
    const float ob = RF_SHFL_XOR(best, m);
    const int oi = RF_SHFL_XOR(best_i, m);
    if (ob > best || (ob == best && oi < best_i)) {
      best = ob;
      best_i = oi;
    }
  }
}

// Group-limited choice: the scores of experts outside the r.n_group_used
// groups of the highest sums of their two best scores become -inf. Lane g
// holds group g's sum (n_group <= kMoeMaxGroups <= the warp width).
__device__ void limit_to_groups(float (&sc)[kRoutePerLane], const MoeRouteSpec& r) {
  const int lane = threadIdx.x % RF_WARP_SIZE, per_group = r.n_expert / r.n_group;
  float gscore = -INFINITY;
  for (int g = 0; g < r.n_group; ++g) {
    float a1 = -INFINITY, a2 = -INFINITY;
#pragma unroll
    for (int i = 0; i < kRoutePerLane; ++i) {
      const int e = lane + RF_WARP_SIZE * i;
      if (e < r.n_expert && e / per_group == g) top2_merge(a1, a2, sc[i], -INFINITY);
    }
#pragma unroll
    for (int m = RF_WARP_SIZE / 2; m > 0; m >>= 1) {
      const float b1 = RF_SHFL_XOR(a1, m), b2 = RF_SHFL_XOR(a2, m);
      top2_merge(a1, a2, b1, b2);
    }
    if (lane == g) gscore = a1 + a2;
  }
  unsigned chosen = 0u;
  for (int j = 0; j < r.n_group_used; ++j) {
    const bool open = lane < r.n_group && !(chosen >> lane & 1u);
    float best = open ? gscore : -INFINITY;
    int best_g = open ? lane : kMoeMaxGroups;
    warp_argmax(best, best_g);
    if (best_g < kMoeMaxGroups) chosen |= 1u << best_g;
  }
#pragma unroll
  for (int i = 0; i < kRoutePerLane; ++i) {
    const int e = lane + RF_WARP_SIZE * i;
    if (e < r.n_expert && !(chosen >> (e / per_group) & 1u)) sc[i] = -INFINITY;
  }
}

// One warp routes one token's row of logits `l` (MoeRouteSpec): the
// probabilities, the choice scores (the logits for plain routing), the
// group limit, then k picks of the best remaining score, largest first,
// ties to the lower index; weights are the chosen probabilities
// [renormalised] times the scale. With plan.order set (one token), lane
// j < k also writes pair j's plan: its own position and a one-row tile of
// its expert (the experts are distinct). The logits are read through
// volatile loads: the fused router kernel's last block reads what other
// blocks wrote.
__device__ void route_token(const float* l, int token, const MoeRouteSpec& r, int32_t* __restrict__ ids,
                            float* __restrict__ weights, const MoePlanOut& plan) {
  const int lane = threadIdx.x % RF_WARP_SIZE, n_expert = r.n_expert, k = r.k;
  const bool plain = !r.sigmoid && !r.bias && r.n_group <= 1;
  const volatile float* lv = l;
  float v[kRoutePerLane], pr[kRoutePerLane];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kRoutePerLane; ++i) {
    const int e = lane + RF_WARP_SIZE * i;
    v[i] = e < n_expert ? lv[e] : -INFINITY;
    mx = fmaxf(mx, v[i]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
  if (!r.sigmoid) {
#pragma unroll
    for (int i = 0; i < kRoutePerLane; ++i) sum += lane + RF_WARP_SIZE * i < n_expert ? expf(v[i] - mx) : 0.0f;
    sum = warp_sum(sum);
  }
#pragma unroll
  for (int i = 0; i < kRoutePerLane; ++i) {  // probabilities; v becomes the choice scores
    const int e = lane + RF_WARP_SIZE * i;
    pr[i] = e >= n_expert ? 0.0f : r.sigmoid ? 1.0f / (1.0f + expf(-v[i])) : expf(v[i] - mx) / sum;
    if (!plain && e < n_expert) v[i] = pr[i] + (r.bias ? r.bias[e] : 0.0f);
  }
  if (r.n_group > 1) limit_to_groups(v, r);
  float mine = 0.0f, chosen = 0.0f;  // lane j keeps the j-th chosen probability
  int mine_id = 0;
  for (int j = 0; j < k; ++j) {
    float best = -INFINITY;
    int best_e = n_expert;
#pragma unroll
    for (int i = 0; i < kRoutePerLane; ++i) {
      const int e = lane + RF_WARP_SIZE * i;
      if (e < n_expert && (v[i] > best || (v[i] == best && e < best_e))) {
        best = v[i];
        best_e = e;
      }
    }
    warp_argmax(best, best_e);
    float p = 0.0f;  // the chosen expert's probability, from its lane
#pragma unroll
    for (int i = 0; i < kRoutePerLane; ++i)
      if (lane + RF_WARP_SIZE * i == best_e) {
        v[i] = -INFINITY;  // taken
        p = pr[i];
      }
    p = warp_sum(p);
    chosen += p;
    if (lane == j) {
      mine = p;
      mine_id = best_e;
    }
  }
  if (lane < k) {
    ids[size_t(token) * k + lane] = mine_id;
    weights[size_t(token) * k + lane] = (r.norm ? mine / chosen : mine) * r.scale;
    if (plan.order) {
      plan.order[lane] = lane;
      plan.pos_of[lane] = lane;
      reinterpret_cast<int4*>(plan.tiles_a)[lane] = make_int4(mine_id, lane, 1, 0);
      reinterpret_cast<int4*>(plan.tiles_b)[lane] = make_int4(mine_id, lane, 1, 0);
    }
  }
  if (plan.order && lane == 0) {
    plan.n_tiles[0] = k;
    plan.n_tiles[1] = k;
  }
}

// One warp per token (route_token).
__global__ void moe_route_kernel(const float* __restrict__ logits, int n, MoeRouteSpec r,
                                 int32_t* __restrict__ ids, float* __restrict__ weights, MoePlanOut plan) {
  pdl_wait();
  pdl_trigger();
  const int token = int((blockIdx.x * blockDim.x + threadIdx.x) / RF_WARP_SIZE);
  if (token >= n) return;
  route_token(logits + size_t(token) * r.n_expert, token, r, ids, weights, plan);
}

constexpr int kRouterThreads = 128;
constexpr int kRouterPrefetch = 4;  // float4 of weights per thread loaded before the PDL wait

// One token's router logits (plus their bias, where the router has one) and
// its routing in one launch: a block per
// expert row (f32 weights, float4 loads, the f16 activations widened), its
// threads splitting the row. The row's first kRouterPrefetch float4 per
// thread (all of a 2048-wide row) load before the PDL wait — the weights do
// not depend on the kernel before — so only the activations' load remains
// after it. The logits are stored; the block that finishes last (a ticket
// taken after a fence) routes them (route_token) and puts the ticket back
// to 0 for the next launch or graph replay.
__global__ void __launch_bounds__(kRouterThreads)
    moe_router_route_kernel(const __half* __restrict__ x, const float* __restrict__ w,
                            const float* __restrict__ bias, int d, MoeRouteSpec r,
                            float* __restrict__ logits, int32_t* __restrict__ ids,
                            float* __restrict__ weights, MoePlanOut plan, unsigned* __restrict__ ticket) {
  __shared__ float partial[kRouterThreads / 32];
  __shared__ bool last;
  const int tid = int(threadIdx.x), e = int(blockIdx.x), n4 = d / 4;
  const float4* wr = reinterpret_cast<const float4*>(w + size_t(e) * d);
  float4 wv[kRouterPrefetch];
#pragma unroll
  for (int j = 0; j < kRouterPrefetch; ++j) {
    const int i = tid + j * kRouterThreads;
    wv[j] = i < n4 ? __ldg(wr + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  pdl_wait();
  pdl_trigger();
  const uint2* xr = reinterpret_cast<const uint2*>(x);
  const auto dot4 = [&](const float4& wq, int i) {
    const uint2 xv = xr[i];
    const float2 x01 = __half22float2(*reinterpret_cast<const __half2*>(&xv.x));
    const float2 x23 = __half22float2(*reinterpret_cast<const __half2*>(&xv.y));
    return wq.x * x01.x + wq.y * x01.y + wq.z * x23.x + wq.w * x23.y;
  };
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < kRouterPrefetch; ++j) {
    const int i = tid + j * kRouterThreads;
    if (i < n4) acc += dot4(wv[j], i);
  }
  for (int i = tid + kRouterPrefetch * kRouterThreads; i < n4; i += kRouterThreads) acc += dot4(__ldg(wr + i), i);
  acc = block_sum(acc, partial);
  if (tid == 0) logits[e] = bias ? acc + bias[e] : acc;
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (tid < RF_WARP_SIZE) route_token(logits, 0, r, ids, weights, plan);
  if (tid == 0) *ticket = 0u;
}

// Exclusive prefix sum over v[0..n) in shared memory, n <= kPlanThreads;
// returns the total. All threads of the block call it.
__device__ int block_exclusive_scan(int* v, int n, int* warp_totals) {
  constexpr int kWarps = kPlanThreads / RF_WARP_SIZE;
  const int tid = threadIdx.x, lane = tid % RF_WARP_SIZE, warp = tid / RF_WARP_SIZE;
  const int x = tid < n ? v[tid] : 0;
  int incl = x;
#pragma unroll
  for (int d = 1; d < RF_WARP_SIZE; d <<= 1) {
    const int y = RF_SHFL_UP(incl, d);
    if (lane >= d) incl += y;
  }
  if (lane == RF_WARP_SIZE - 1) warp_totals[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const int t = lane < kWarps ? warp_totals[lane] : 0;
    int ti = t;
#pragma unroll
    for (int d = 1; d < RF_WARP_SIZE; d <<= 1) {
      const int y = RF_SHFL_UP(ti, d);
      if (lane >= d) ti += y;
    }
    if (lane < kWarps) warp_totals[lane] = ti - t;  // exclusive over warps
    if (lane == kWarps - 1) warp_totals[kWarps] = ti;
  }
  __syncthreads();
  if (tid < n) v[tid] = warp_totals[warp] + incl - x;
  const int total = warp_totals[kWarps];
  __syncthreads();
  return total;
}

// One block: counts the pairs of each expert, orders the pairs by expert
// (order[pos] = pair, pos_of[pair] = pos; the order within an expert does not
// change any result), and cuts each expert's run into tiles of at most
// tile_a and tile_b rows: {expert, first position, rows, 0}.
__global__ void __launch_bounds__(kPlanThreads) moe_plan_kernel(const int32_t* __restrict__ ids, int n_pairs,
                                                                int n_expert, int tile_a, int tile_b,
                                                                int32_t* __restrict__ order, int32_t* __restrict__ pos_of,
                                                                int4* __restrict__ tiles_a, int4* __restrict__ tiles_b,
                                                                int32_t* __restrict__ n_tiles) {
  __shared__ int count[kMoeMaxExperts], start[kMoeMaxExperts], cursor[kMoeMaxExperts];
  __shared__ int first_a[kMoeMaxExperts], first_b[kMoeMaxExperts];
  __shared__ int warp_totals[kPlanThreads / RF_WARP_SIZE + 1];
  pdl_wait();
  pdl_trigger();
  const int tid = threadIdx.x;
  for (int e = tid; e < n_expert; e += blockDim.x) count[e] = cursor[e] = 0;
  __syncthreads();
  for (int p = tid; p < n_pairs; p += blockDim.x) atomicAdd(&count[min(max(ids[p], 0), n_expert - 1)], 1);
  __syncthreads();
  for (int e = tid; e < n_expert; e += blockDim.x) {
    start[e] = count[e];
    first_a[e] = (count[e] + tile_a - 1) / tile_a;
    first_b[e] = (count[e] + tile_b - 1) / tile_b;
  }
  __syncthreads();
  block_exclusive_scan(start, n_expert, warp_totals);
  const int total_a = block_exclusive_scan(first_a, n_expert, warp_totals);
  const int total_b = block_exclusive_scan(first_b, n_expert, warp_totals);
  for (int p = tid; p < n_pairs; p += blockDim.x) {
    const int e = min(max(ids[p], 0), n_expert - 1);
    const int pos = start[e] + atomicAdd(&cursor[e], 1);
    order[pos] = p;
    pos_of[p] = pos;
  }
  for (int e = tid; e < n_expert; e += blockDim.x) {
    const int c = count[e];
    for (int i = 0; i * tile_a < c; ++i)
      tiles_a[first_a[e] + i] = make_int4(e, start[e] + i * tile_a, min(tile_a, c - i * tile_a), 0);
    for (int i = 0; i * tile_b < c; ++i)
      tiles_b[first_b[e] + i] = make_int4(e, start[e] + i * tile_b, min(tile_b, c - i * tile_b), 0);
  }
  if (tid == 0) {
    n_tiles[0] = total_a;
    n_tiles[1] = total_b;
  }
}

// xs[pos, :] = x[order[pos] / k, :] (f16 rows of `cols`, cols % 8 == 0).
__global__ void moe_gather_kernel(const __half* __restrict__ x, const int32_t* __restrict__ order, int k, int cols,
                                  __half* __restrict__ xs) {
  pdl_wait();
  pdl_trigger();
  const int pos = blockIdx.x;
  const uint4* src = reinterpret_cast<const uint4*>(x + size_t(order[pos] / k) * cols);
  uint4* dst = reinterpret_cast<uint4*>(xs + size_t(pos) * cols);
  for (int i = threadIdx.x; i < cols / 8; i += blockDim.x) dst[i] = src[i];
}

// h[pos, :] = act(h[pos, :] + gate_bias[e, :], u[pos, :] + up_bias[e, :])
// for the pairs in expert order (e = ids[order[pos]]; a null bias adds
// nothing): gpt-oss's biased experts and clamped SwiGLU between the expert
// gate/up matmuls and the down ones. Block (pos, slice), a value a thread.
__global__ void moe_bias_glu_kernel(__half* __restrict__ h, const __half* __restrict__ u,
                                    const float* __restrict__ gate_bias, const float* __restrict__ up_bias,
                                    const int32_t* __restrict__ ids, const int32_t* __restrict__ order, int ff,
                                    Activation act) {
  pdl_wait();
  pdl_trigger();
  const int pos = blockIdx.x, i = int(blockIdx.y * blockDim.x + threadIdx.x);
  if (i >= ff) return;
  const size_t e = size_t(ids[order[pos]]), at = size_t(pos) * ff + i;
  float g = __half2float(h[at]), v = __half2float(u[at]);
  if (gate_bias) g += gate_bias[e * ff + i];
  if (up_bias) v += up_bias[e * ff + i];
  h[at] = __float2half_rn(glu_act(g, v, act));
}

// out[t, :] = sum_j weights[t, j] * (y[pos_of[t * k + j], :] + bias[e_j, :])
// in j order, e_j = ids[t * k + j] (bias null: none). Block (t, slice): 4
// columns per thread (cols % 4 == 0).
constexpr int kCombineThreads = 128;
__global__ void __launch_bounds__(kCombineThreads) moe_combine_kernel(const float* __restrict__ y,
                                                                       const int32_t* __restrict__ pos_of,
                                                                       const float* __restrict__ weights, int k,
                                                                       int cols, const float* __restrict__ bias,
                                                                       const int32_t* __restrict__ ids,
                                                                       __half* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const int t = blockIdx.x;
  const int c = (int(blockIdx.y) * kCombineThreads + int(threadIdx.x)) * 4;
  if (c >= cols) return;
  // The loads of eight choices go out before their multiply-adds: one wait
  // for the positions and one for the rows per eight, not two per choice.
  constexpr int kBatch = 8;
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  for (int j0 = 0; j0 < k; j0 += kBatch) {
    float w[kBatch];
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const bool in = j0 + u < k;
      const size_t pair = size_t(t) * k + j0 + u;
      w[u] = in ? weights[pair] : 0.0f;
      v[u] = in ? *reinterpret_cast<const float4*>(y + size_t(pos_of[pair]) * cols + c) : make_float4(0, 0, 0, 0);
      if (bias && in) {
        const float4 b = *reinterpret_cast<const float4*>(bias + size_t(ids[pair]) * cols + c);
        v[u] = make_float4(v[u].x + b.x, v[u].y + b.y, v[u].z + b.z, v[u].w + b.w);
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      if (j0 + u >= k) continue;
      s0 = fmaf(w[u], v[u].x, s0);
      s1 = fmaf(w[u], v[u].y, s1);
      s2 = fmaf(w[u], v[u].z, s2);
      s3 = fmaf(w[u], v[u].w, s3);
    }
  }
  __half2* o = reinterpret_cast<__half2*>(out + size_t(t) * cols + c);
  o[0] = __floats2half2_rn(s0, s1);
  o[1] = __floats2half2_rn(s2, s3);
}

// weights[i] *= scales[ids[i]] for the n_pairs (token, expert) pairs.
__global__ void moe_scale_weights_kernel(const int32_t* __restrict__ ids, const float* __restrict__ scales,
                                         int n_pairs, float* __restrict__ weights) {
  pdl_wait();
  pdl_trigger();
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n_pairs) weights[i] *= scales[ids[i]];
}

}  // namespace

void moe_scale_weights(const int32_t* ids, const float* scales, int n_pairs, float* weights, const LaunchCtx& ctx) {
  if (n_pairs <= 0) return;
  constexpr int kThreads = 256;
  launch(moe_scale_weights_kernel, dim3(unsigned((n_pairs + kThreads - 1) / kThreads)), dim3(kThreads), 0, ctx, ids,
         scales, n_pairs, weights);
}

void check_route_spec(const MoeRouteSpec& r) {
  RF_CHECK(r.n_expert >= 1 && r.n_expert <= kMoeMaxExperts && r.k >= 1 && r.k <= 32 && r.k <= r.n_expert,
           "cuda moe_route: ", r.n_expert, " experts, ", r.k, " used (at most ", kMoeMaxExperts, " and 32)");
  if (r.n_group > 1) {
    const int per_group = r.n_expert / r.n_group;
    RF_CHECK(r.n_group <= kMoeMaxGroups && r.n_expert % r.n_group == 0 && per_group >= 2 && r.n_group_used >= 1 &&
                 r.n_group_used <= r.n_group && r.k <= r.n_group_used * per_group,
             "cuda moe_route: ", r.n_expert, " experts in ", r.n_group, " groups (", r.n_group_used, " used, at most ",
             kMoeMaxGroups, " groups of 2 or more) for ", r.k, " choices");
  }
}

void moe_route(const float* logits, int n, const MoeRouteSpec& r, int32_t* ids, float* weights,
               const MoePlanOut* plan, const LaunchCtx& ctx) {
  check_route_spec(r);
  RF_CHECK(!plan || n == 1, "cuda moe_route: the plan comes with routing for one token only");
  if (n <= 0) return;
  constexpr int kWarps = 4;
  const MoePlanOut p = plan ? *plan : MoePlanOut{};
  launch(moe_route_kernel, dim3(unsigned((n + kWarps - 1) / kWarps)), dim3(ctx.warp_size * kWarps), 0, ctx, logits, n,
         r, ids, weights, p);
}

bool moe_router_route_fusable(int d, int n_expert, int k) {
  return d % 4 == 0 && n_expert >= 1 && n_expert <= kMoeMaxExperts && k >= 1 && k <= 32 && k <= n_expert;
}

void moe_router_route(const void* x, const float* w, const float* bias, int d, const MoeRouteSpec& r, float* logits,
                      int32_t* ids,
                      float* weights, const MoePlanOut& plan, unsigned* ticket, const LaunchCtx& ctx) {
  check_route_spec(r);
  RF_CHECK(moe_router_route_fusable(d, r.n_expert, r.k), "cuda moe_router_route: ", r.n_expert, " experts, ", r.k,
           " used, width ", d);
  launch(moe_router_route_kernel, dim3(unsigned(r.n_expert)), dim3(kRouterThreads), 0, ctx,
         static_cast<const __half*>(x), w, bias, d, r, logits, ids, weights, plan, ticket);
}

void moe_plan(const int32_t* ids, int n_pairs, int n_expert, int tile_a, int tile_b, int32_t* order, int32_t* pos_of,
              int32_t* tiles_a, int32_t* tiles_b, int32_t* n_tiles, const LaunchCtx& ctx) {
  RF_CHECK(n_expert >= 1 && n_expert <= kMoeMaxExperts && tile_a >= 1 && tile_b >= 1, "cuda moe_plan: bad sizes");
  launch(moe_plan_kernel, dim3(1), dim3(kPlanThreads), 0, ctx, ids, n_pairs, n_expert, tile_a, tile_b, order, pos_of,
         reinterpret_cast<int4*>(tiles_a), reinterpret_cast<int4*>(tiles_b), n_tiles);
}

void moe_gather(const void* x, const int32_t* order, int n_pairs, int k, int cols, void* xs, const LaunchCtx& ctx) {
  RF_CHECK(cols % 8 == 0, "cuda moe: width ", cols, " is not a multiple of 8");
  if (n_pairs <= 0) return;
  launch(moe_gather_kernel, dim3(unsigned(n_pairs)), dim3(128), 0, ctx, static_cast<const __half*>(x), order, k, cols,
         static_cast<__half*>(xs));
}

void moe_combine(const float* y, const int32_t* pos_of, const float* weights, int n, int k, int cols, void* out,
                 const LaunchCtx& ctx, const float* down_bias, const int32_t* ids) {
  RF_CHECK(cols % 4 == 0, "cuda moe: width ", cols, " is not a multiple of 4");
  RF_CHECK(!down_bias || ids, "cuda moe_combine: a down bias needs the ids");
  if (n <= 0) return;
  const unsigned slices = unsigned((cols / 4 + kCombineThreads - 1) / kCombineThreads);
  launch(moe_combine_kernel, dim3(unsigned(n), slices), dim3(kCombineThreads), 0, ctx, y, pos_of, weights, k, cols,
         down_bias, ids, static_cast<__half*>(out));
}

void moe_bias_glu(void* h, const void* u, const float* gate_bias, const float* up_bias, const int32_t* ids,
                  const int32_t* order, int n_pairs, int ff, Activation act, const LaunchCtx& ctx) {
  if (n_pairs <= 0 || ff <= 0) return;
  constexpr int kThreads = 256;
  launch(moe_bias_glu_kernel, dim3(unsigned(n_pairs), unsigned((ff + kThreads - 1) / kThreads)), dim3(kThreads), 0,
         ctx, static_cast<__half*>(h), static_cast<const __half*>(u), gate_bias, up_bias, ids, order, ff, act);
}

int moe_max_tiles(int n_pairs, int n_expert, int tile_rows) {
  return n_pairs / tile_rows + std::min(n_pairs, n_expert);
}

}  // namespace rf::gpu
