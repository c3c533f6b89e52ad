// One token's mixture-of-experts down projections and their weighted sum in
// one launch (Fusions::moe_down). Output row r is a dot product
// over the k chosen experts' rows r end to end, each expert's part against
// its GLU output and scaled by its routing weight:
//   out[r] = sum_j weights[j] * (down[ids[j]][r, :] . h[pos_of[j], :] + b[ids[j]][r])
// (b: the experts' down biases where they have them, gpt-oss)
// so the per-expert outputs never go to memory and no combine kernel
// follows; and the rows are k times longer than one expert's, which suits
// the streaming loads (Qwen3-MoE's 768-wide expert rows are shorter than a
// warp's lanes have chunks). The weights stream as in gemv_stream.cu
// (gemv_stream_format.cuh), the GLU outputs as 8-bit quants.
#include "backend/cuda/matmul/gemv_args.cuh"
#include "backend/cuda/matmul/gemv_stream_format.cuh"
#include "backend/cuda/moe/moe.cuh"

namespace rf::gpu {
namespace {

constexpr int kMaxUsed = 32;  // experts a token uses (reserve_moe's limit)
constexpr int kDownRows = 2;  // output rows per set of warps

struct MoeDownArgs {
  const uint8_t* w;  // expert e's rows at w + e * expert_bytes
  size_t expert_bytes, row_bytes;
  int m, ff, n_used;  // output rows, expert width, experts used
  const int32_t* ids;
  const float* weights;
  const int32_t* pos_of;  // choice j's GLU output row
  const int8_t* xq;       // the GLU outputs' 8-bit quants, rows end to end (act_q8)
  const float2* xds;
  __half* out;
  const float* bias;  // f32 [n_expert, m] or null: the experts' down biases
  bool weights_l1;
};

// kSplit warps share a set of kDownRows rows, lane l of part p taking the
// chunks p W + l, (p + kSplit) W + l, ... of the joined row (chunk c: expert
// choice c / (ff / 64), its chunk c % (ff / 64), at the same place in its
// super-block as c since ff % 256 == 0).
template <DType T, int kSplit>
__global__ void __launch_bounds__(kStreamWarps* RF_WARP_SIZE) moe_down_combined_kernel(MoeDownArgs a) {
  using F = StreamFormat<T>;
  using Chunk = typename F::Chunk;
  constexpr int W = RF_WARP_SIZE, kSets = kStreamWarps / kSplit, kStride = kSplit * W, R = kDownRows;
  __shared__ const uint8_t* expert_w[kMaxUsed];
  __shared__ float expert_weight[kMaxUsed];
  __shared__ int expert_x[kMaxUsed];
  __shared__ const float* expert_b[kMaxUsed];
  const int lane = threadIdx.x % W, warp = threadIdx.x / W, set = warp / kSplit, part = warp % kSplit;
  const int r0 = (int(blockIdx.x) * kSets + set) * R;
  // The routing is done two kernels back (moe_down_combined's contract):
  // the choices (read through L2) and the first weights come before the
  // wait for the kernels before, which write the GLU outputs' quants.
  if (int(threadIdx.x) < a.n_used) {
    const int j = int(threadIdx.x);
    const int e = load_past_l1(a.ids + j);
    expert_w[j] = a.w + size_t(e) * a.expert_bytes;
    expert_b[j] = a.bias ? a.bias + size_t(e) * a.m : nullptr;
    expert_weight[j] = load_past_l1(a.weights + j);
    expert_x[j] = load_past_l1(a.pos_of + j);
  }
  __syncthreads();
  size_t row_off[R];
#pragma unroll
  for (int i = 0; i < R; ++i) row_off[i] = size_t(min(r0 + i, a.m - 1)) * a.row_bytes;  // past m: not stored
  const int per_expert = a.ff / 64, chunks = per_expert * a.n_used, p = lane % 4, first = part * W + lane;
  const auto load = [&](int c, Chunk(&q)[R]) {
    const int j = c / per_expert;
    const uint8_t* base = expert_w[j];
#pragma unroll
    for (int i = 0; i < R; ++i) q[i] = F::load(base + row_off[i], c - j * per_expert, a.weights_l1);
  };
  float acc[R];
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = 0.0f;
  const auto step = [&](int c, const Chunk(&q)[R]) {
    const int j = c / per_expert;
    const size_t x0 = size_t(expert_x[j]) * size_t(a.ff);
    const typename F::XChunk x = F::load_x(a.xq + x0, a.xds + x0 / 32, c - j * per_expert);
    const float wj = expert_weight[j];
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i] += wj * F::dot(q[i], x, p);
  };
  Chunk cur[R], next[R];
  if (first < chunks) load(first, cur);
  pdl_wait();
  pdl_trigger();
  stream_chunks(first, chunks, kStride, cur, next, load, step);
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = warp_sum(acc[i]);
  if (!sum_split_parts<kSplit>(acc, warp, lane, part)) return;
#pragma unroll
  for (int i = 0; i < R; ++i)
    if (lane == i && r0 + i < a.m) {
      float v = acc[i];
      if (a.bias)  // the experts' down biases, weighted as their rows
        for (int j = 0; j < a.n_used; ++j) v = fmaf(expert_weight[j], expert_b[j][r0 + i], v);
      a.out[r0 + i] = __float2half_rn(v);
    }
}

template <DType T>
void launch_down(const MoeDownArgs& a, const LaunchCtx& ctx) {
  const int split = stream_split(T, a.ff / 64 * a.n_used, ctx);
  const int rows_per_block = kStreamWarps / split * kDownRows;
  const unsigned blocks = unsigned((a.m + rows_per_block - 1) / rows_per_block);
  const unsigned threads = unsigned(kStreamWarps * ctx.warp_size);
  if (split == 1) launch(moe_down_combined_kernel<T, 1>, blocks, threads, 0, ctx, a);
  else if (split == 2) launch(moe_down_combined_kernel<T, 2>, blocks, threads, 0, ctx, a);
  else launch(moe_down_combined_kernel<T, 4>, blocks, threads, 0, ctx, a);
}

}  // namespace

bool moe_down_combined_supported(const Tuning& tuning, DType w_type, int ff, int k_used) {
  return tuning.fusions.moe_down && (w_type == DType::Q4_K || w_type == DType::Q6_K) && ff > 0 && ff % 256 == 0 &&
         k_used >= 1 && k_used <= kMaxUsed && int64_t(ff) * k_used <= kActQ8MaxK;
}

bool moe_down_combined(DType w_type, const void* w, size_t expert_bytes, size_t row_bytes, int m, int ff, int k_used,
                       const void* h, const int32_t* ids, const float* weights, const int32_t* pos_of, void* out,
                       const LaunchCtx& ctx, const float* down_bias) {
  if (!ctx.act_q8 || m <= 0 || !moe_down_combined_supported(ctx.tuning, w_type, ff, k_used)) return false;
  // Q4_K rows are read in 16-byte pieces, Q6_K ones in 4-byte words from
  // 2-aligned super-blocks.
  const uintptr_t align = w_type == DType::Q6_K ? 2 : 16;
  if (reinterpret_cast<uintptr_t>(w) % align != 0 || row_bytes % align != 0 || expert_bytes % align != 0 ||
      reinterpret_cast<uintptr_t>(h) % 16 != 0)
    return false;
  quantize_act_q8_rows(h, k_used * ff, ctx);
  MoeDownArgs a{};
  a.w = static_cast<const uint8_t*>(w);
  a.expert_bytes = expert_bytes;
  a.row_bytes = row_bytes;
  a.m = m;
  a.ff = ff;
  a.n_used = k_used;
  a.ids = ids;
  a.weights = weights;
  a.pos_of = pos_of;
  a.xq = act_q8_quants(ctx.act_q8);
  a.xds = act_q8_scales(ctx.act_q8);
  a.out = static_cast<__half*>(out);
  a.bias = down_bias;
  a.weights_l1 = ctx.tuning.kq_stream_l1;
  if (w_type == DType::Q4_K) launch_down<DType::Q4_K>(a, ctx);
  else launch_down<DType::Q6_K>(a, ctx);
  RF_GPU_CHECK_LAUNCH();
  return true;
}

}  // namespace rf::gpu
