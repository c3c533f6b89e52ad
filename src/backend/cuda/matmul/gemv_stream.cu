// Streaming GEMV for one activation row (batch-1 decode; Q4_K, Q5_K, Q6_K,
// the 32-wide block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, IQ4_XS,
// MXFP4, and the grid i-quants through gemv_stream_grid.cu): the weights go straight from memory into registers, no shared memory, no
// block barrier (but for long rows, below), so each warp computes as soon
// as its own bytes land and the loads of every warp overlap the others'
// arithmetic.
//
// A warp takes kRows rows (and their up rows when paired: gate/up fused
// with SiLU/GELU) across the whole width; in expert mode (one token's
// mixture-of-experts FFN) block row y takes the rows of tile y's expert
// (gemv_experts_glu_biased, at the end: a biased gate/up pair with its GLU,
// gpt-oss's, which only this kernel runs). Lane l takes the chunks of 64
// weights l, l + W, l + 2W, ... of each row (W: the warp size; the format's
// StreamFormat, gemv_stream_format.cuh and gemv_stream_iq4.cuh, says which bytes a chunk is). Since W is a multiple of 4, a
// lane's chunks always sit at the same place in their super-blocks. The next chunk's loads are issued before the
// current one is computed, and the first ones before the wait for the
// previous kernel (weights are constant). The activations go in as 8-bit
// quants with a scale per 32 (quantize_act_q8_kernel, launched just before
// into LaunchCtx::act_q8, unless the op that wrote the row handed them over:
// Fusions::act_q8), so the nibbles meet them in integer dot products:
// about one instruction per weight, where f16 arithmetic takes over two.
// (Not bit-equal to f16 activations: within llama.cpp's tolerance for this
// op, NMSE 5e-4; tests/gpu/cuda_ops_test.cpp checks both.)
#include <cstddef>
#include <type_traits>

#include "backend/cuda/elementwise/glu.cuh"
#include "backend/cuda/matmul/gemv_args.cuh"
#include "backend/cuda/matmul/gemv_dot.cuh"
#include "backend/cuda/matmul/gemv_stream_format.cuh"
#include "backend/cuda/matmul/gemv_stream_iq4.cuh"
#include "backend/cuda/matmul/gemv_stream_kernel.cuh"
#include "backend/cuda/matmul/matmul.cuh"

namespace rf::gpu {
namespace {

// x (one row of k f16 activations) as 8-bit quants, per 32: d = max |x| /
// 127, quant = round(x / d), and (d, d * sum of quants). A thread per 32.
__global__ void quantize_act_q8_kernel(const __half* x, int k, int8_t* xq, float2* xds) {
  pdl_wait();
  pdl_trigger();
  const int b = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (b >= k / 32) return;
  const uint4* xp = reinterpret_cast<const uint4*>(x) + size_t(b) * 4;
  float v[32];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float f[8];
    half8_to_float(xp[i], f);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      v[8 * i + j] = f[j];
      amax = fmaxf(amax, fabsf(f[j]));
    }
  }
  const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
  uint32_t packed[8];
  int sum = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int q = __float2int_rn(v[4 * i + j] * inv);
      sum += q;
      word |= uint32_t(q & 0xFF) << (8 * j);
    }
    packed[i] = word;
  }
  uint4* out = reinterpret_cast<uint4*>(xq) + size_t(b) * 2;
  out[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  out[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  xds[b] = make_float2(d, d * float(sum));
}

}  // namespace

int stream_split(DType t, int chunks, const LaunchCtx& ctx) {
  if (ctx.tuning.kq_stream_split > 0) return ctx.tuning.kq_stream_split;
  const int w = ctx.warp_size;
  // k-quants: one warp a row set up to 10 warp widths (with Q6_K's bounded
  // kernel past one wave, launch_stream_rows), which covers 18,944-wide
  // rows (296 chunks, where 4 warps would give a lane 2 or 3 chunks of 74 a
  // part). The 32-wide block formats keep the rule below: one warp up to
  // 8 widths is slower on their 13,696-wide rows.
  if (t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K) return chunks <= 10 * w ? 1 : 4;
  return chunks <= 2 * w ? 1 : chunks <= 4 * w ? 2 : 4;
}

void quantize_act_q8_rows(const void* x, int elems, const LaunchCtx& ctx) {
  const int groups = elems / 32;
  launch(quantize_act_q8_kernel, unsigned((groups + 127) / 128), 128u, 0, ctx, static_cast<const __half*>(x), elems,
         act_q8_quants(ctx.act_q8), act_q8_scales(ctx.act_q8));
  act_q8_clobber(ctx);
}

namespace {
// The 32-wide block formats (rows of whole 64-weight chunks).
bool block32(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0 ||
         t == DType::IQ4_NL || t == DType::MXFP4;
}
// The formats whose expert tiles may read rows of their own (the down
// projections' kernels; few kernels to build: q4_k_m's and gpt-oss's).
bool own_rows_format(DType t) { return t == DType::Q4_K || t == DType::Q6_K || t == DType::MXFP4; }
// Rows per warp of the streaming kernel for this format (0: not streamed).
// (Q5_K, IQ4_XS and the 32-wide block formats: two, where Q4_K streams at
// all; fewer kernels to build.)
int stream_rows(const Tuning& tuning, DType w_type) {
  switch (w_type) {
    case DType::Q4_K: return tuning.kq_stream_rows;
    case DType::Q5_K:
    case DType::IQ4_XS: return tuning.kq_stream_rows > 0 ? 2 : 0;
    case DType::IQ4_NL:
    case DType::MXFP4:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0: return tuning.kq_stream_rows > 0 && tuning.block32_stream ? 2 : 0;
    case DType::Q6_K: return tuning.kq_stream_q6k_rows;
    default: return stream_grid_format(w_type) && tuning.kq_stream_rows > 0 ? 2 : 0;
  }
}
}  // namespace

bool gemv_quantizes_activations(const Tuning& tuning, int warp_size, DType w_type, int n, int k) {
  // Whole super-blocks (32-wide blocks: whole chunks of 64; glm4-9b's 13,696-wide rows).
  const int unit = block32(w_type) ? 64 : 256;
  return stream_rows(tuning, w_type) > 0 && n == 1 && k % unit == 0 && k <= kActQ8MaxK && k / 64 >= warp_size;
}

bool gemv_expert_rows_quantize_activations(const Tuning& tuning, int warp_size, DType w_type, int k) {
  if (!tuning.kq_stream_expert_rows || stream_rows(tuning, w_type) != 2 || !own_rows_format(w_type)) return false;
  if (gemv_quantizes_activations(tuning, warp_size, w_type, 1, k)) return true;
  // Lane groups: the k-quants' short rows (MXFP4's only as wide as gpt-oss's).
  return tuning.kq_stream_short_expert_rows && k % 256 == 0 && k >= 256 && w_type != DType::MXFP4;
}

bool act_q8_fusable(const LaunchCtx& ctx, int rows, int k) {
  return ctx.tuning.fusions.act_q8 && ctx.act_q8 && ctx.act_q8_record && ctx.act_q8_produce && rows == 1 &&
         k % 32 == 0 && k > 0 && k <= kActQ8MaxK;
}

void act_q8_record(const LaunchCtx& ctx, const void* src, int k) {
  if (!ctx.act_q8_record) return;
  ActQ8Record& r = *ctx.act_q8_record;
  // (Without fused_act_q8 no op reads another's quants: nothing to hand over.)
  r = {ctx.tuning.fusions.act_q8 ? src : nullptr, k, r.version + 1};
}

void act_q8_clobber(const LaunchCtx& ctx) {
  if (ctx.act_q8_record) *ctx.act_q8_record = {nullptr, 0, ctx.act_q8_record->version + 1};
}

bool act_q8_ready(const LaunchCtx& ctx, const void* src, int k) {
  if (!ctx.tuning.fusions.act_q8 || !ctx.act_q8_record || !src || ctx.act_q8_handed != src) return false;
  const ActQ8Record& r = *ctx.act_q8_record;
  return r.src == src && r.k == k;
}

namespace {

// Whether a's weights (and up rows when paired) and activations suit the
// streaming loads of format w_type: Q4_K / Q5_K rows are read in 16-byte
// pieces; Q4_1, Q5_1 and IQ4_XS in 8-byte ones; the other 32-wide block
// formats in 8-byte pieces and words from 4-aligned chunks; IQ1_M in
// 4-byte words; Q6_K in 4-byte words from 2-aligned super-blocks; MXFP4
// and the other grid i-quants in 4-byte words from 2-aligned chunks
// (super-blocks) of a 4-aligned matrix (row_align: what row and expert
// strides keep; base_align: the matrices' starts).
bool stream_aligned(DType w_type, const GemvArgs& a, bool paired) {
  const bool two_aligned = w_type == DType::Q6_K || w_type == DType::MXFP4 ||
                           (stream_grid_format(w_type) && w_type != DType::IQ1_M);
  const bool eight = w_type == DType::Q4_1 || w_type == DType::Q5_1 || w_type == DType::IQ4_XS;
  const uintptr_t row_align = two_aligned ? 2 : eight ? 8 : block32(w_type) || w_type == DType::IQ1_M ? 4 : 16;
  const uintptr_t base_align = two_aligned && w_type != DType::Q6_K ? 4 : row_align;
  bool aligned = reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.row_bytes % row_align == 0 &&
                 a.expert_bytes % row_align == 0 && (!paired || reinterpret_cast<uintptr_t>(a.w_up) % base_align == 0);
  for (int i = 0; i < a.n_segs; ++i) aligned = aligned && reinterpret_cast<uintptr_t>(a.w[i]) % base_align == 0;
  return aligned;
}

// a's activation row as 8-bit quants in ctx.act_q8: handed over by the op
// that wrote the row (fused_act_q8), or written now and recorded, so that
// the op hands them on to another GEMV of the same row.
void act_q8_row(const GemvArgs& a, const LaunchCtx& ctx) {
  if (act_q8_ready(ctx, a.x, a.k)) return;
  const int groups = a.k / 32;
  launch(quantize_act_q8_kernel, unsigned((groups + 127) / 128), 128u, 0, ctx, a.x, a.k, act_q8_quants(ctx.act_q8),
         act_q8_scales(ctx.act_q8));
  act_q8_record(ctx, a.x, a.k);
}

// a reading its activations from ctx.act_q8 (the streaming kernel's).
GemvArgs with_act_q8(const GemvArgs& a, const LaunchCtx& ctx) {
  GemvArgs b = a;
  b.xq = act_q8_quants(ctx.act_q8);
  b.xds = act_q8_scales(ctx.act_q8);
  b.weights_l1 = ctx.tuning.kq_stream_l1;
  return b;
}

}  // namespace

bool launch_gemv_kq_stream(DType w_type, const GemvArgs& args, DType out_type, bool paired, int grid_y,
                           const LaunchCtx& ctx, int x_rows) {
  // Expert tiles of one shared token (x_one_row: quantized once), or of one
  // row each of x's x_rows (kq_stream_expert_rows: quantized together).
  const bool own_rows = args.tiles && !args.x_one_row;
  if (own_rows && (!ctx.tuning.kq_stream_expert_rows || !own_rows_format(w_type) ||
                   size_t(x_rows) * args.k > kActQ8MaxK ||
                   out_type != DType::F32 || paired || stream_rows(ctx.tuning, w_type) != 2))
    return false;
  if (!ctx.act_q8) return false;
  if (own_rows ? !gemv_expert_rows_quantize_activations(ctx.tuning, ctx.warp_size, w_type, args.k)
               : !gemv_quantizes_activations(ctx.tuning, ctx.warp_size, w_type, args.n, args.k))
    return false;
  if (!stream_aligned(w_type, args, paired)) return false;
  if (own_rows) {
    // x_rows rows end to end, quantized as one (groups of 32 never cross a
    // row).
    quantize_act_q8_rows(args.x, x_rows * args.k, ctx);
  } else {
    act_q8_row(args, ctx);
  }
  GemvArgs a = with_act_q8(args, ctx);
  const int m = a.row_end[a.n_segs - 1];
  int rows = stream_rows(ctx.tuning, w_type);
  // Rows of fewer than two chunks a lane that fill a warp unevenly (3072,
  // 3584, 3840 wide): one a warp (Tuning::kq_stream_uneven_one_row).
  const int chunks = a.k / 64;
  if ((w_type == DType::Q4_K || w_type == DType::Q5_K) && rows == 2 && !a.tiles &&
      ctx.tuning.kq_stream_uneven_one_row && chunks < 2 * ctx.warp_size && chunks % ctx.warp_size != 0)
    rows = 1;
  if (own_rows) {
    if (w_type == DType::Q4_K) launch_stream_own_rows<DType::Q4_K>(a, m, grid_y, ctx);
    else if (w_type == DType::MXFP4) launch_stream_own_rows<DType::MXFP4>(a, m, grid_y, ctx);
    else launch_stream_own_rows<DType::Q6_K>(a, m, grid_y, ctx);
  } else if (w_type == DType::Q4_K) {
    launch_stream_type<DType::Q4_K>(a, out_type, paired, rows, m, grid_y, ctx);
  } else if (w_type == DType::Q5_K) {
    if (rows == 1) launch_stream_rows_n<DType::Q5_K, 1>(a, out_type, paired, m, grid_y, ctx);
    else launch_stream_rows_n<DType::Q5_K, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::Q8_0) {
    launch_stream_rows_n<DType::Q8_0, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::Q5_0) {
    launch_stream_rows_n<DType::Q5_0, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::Q4_0) {
    launch_stream_rows_n<DType::Q4_0, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::Q4_1) {
    launch_stream_rows_n<DType::Q4_1, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::Q5_1) {
    launch_stream_rows_n<DType::Q5_1, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::IQ4_NL) {
    launch_stream_rows_n<DType::IQ4_NL, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::IQ4_XS) {
    launch_stream_rows_n<DType::IQ4_XS, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (w_type == DType::MXFP4) {
    launch_stream_rows_n<DType::MXFP4, 2>(a, out_type, paired, m, grid_y, ctx);
  } else if (stream_grid_format(w_type)) {
    launch_stream_grid(w_type, a, out_type, paired, m, grid_y, ctx);
  } else {
    launch_stream_type<DType::Q6_K>(a, out_type, paired, rows, m, grid_y, ctx);
  }
  return true;
}

bool launch_gemv_kq_stream_two(DType t0, const GemvArgs& a0, DType t1, const GemvArgs& a1, const LaunchCtx& ctx) {
  const auto streams_two_rows = [&](DType t) {
    return (t == DType::Q4_K || t == DType::Q6_K) && stream_rows(ctx.tuning, t) == 2;
  };
  if (!ctx.tuning.fusions.gemv_two_formats || !ctx.act_q8 || t0 == t1 || !streams_two_rows(t0) || !streams_two_rows(t1) ||
      a0.k != a1.k || a0.n != 1 || a1.n != 1 || a0.x != a1.x || a0.tiles || a1.tiles ||
      !gemv_quantizes_activations(ctx.tuning, ctx.warp_size, t0, 1, a0.k) ||
      !gemv_quantizes_activations(ctx.tuning, ctx.warp_size, t1, 1, a1.k) ||
      stream_group(a0.k / 64, 2, false, ctx) != 0)
    return false;
  if (!stream_aligned(t0, a0, false) || !stream_aligned(t1, a1, false)) return false;
  act_q8_row(a0, ctx);
  const GemvArgs b0 = with_act_q8(a0, ctx), b1 = with_act_q8(a1, ctx);
  const int split = stream_split(t0, a0.k / 64, ctx);
  const int rows_per_block = kStreamWarps / split * 2;
  const int m0 = a0.row_end[a0.n_segs - 1], m1 = a1.row_end[a1.n_segs - 1];
  const int blocks0 = (m0 + rows_per_block - 1) / rows_per_block;
  const unsigned blocks = unsigned(blocks0 + (m1 + rows_per_block - 1) / rows_per_block);
  const unsigned threads = unsigned(kStreamWarps * ctx.warp_size);
  const auto go = [&](auto t0c, auto t1c) {
    constexpr DType A = decltype(t0c)::value, B = decltype(t1c)::value;
    if (split == 1 && stream_early_two(a0.k / 64, ctx))
      launch(gemv_stream_two_kernel<A, B, 1, true>, blocks, threads, 0, ctx, b0, b1, blocks0);
    else if (split == 1) launch(gemv_stream_two_kernel<A, B, 1>, blocks, threads, 0, ctx, b0, b1, blocks0);
    else if (split == 2) launch(gemv_stream_two_kernel<A, B, 2>, blocks, threads, 0, ctx, b0, b1, blocks0);
    else launch(gemv_stream_two_kernel<A, B, 4>, blocks, threads, 0, ctx, b0, b1, blocks0);
  };
  using Q4 = std::integral_constant<DType, DType::Q4_K>;
  using Q6 = std::integral_constant<DType, DType::Q6_K>;
  if (t0 == DType::Q4_K) go(Q4{}, Q6{});
  else go(Q6{}, Q4{});
  return true;
}

bool gemv_experts_glu_biased(DType w_type, const void* w_gate, const void* w_up, const float* gate_bias,
                             const float* up_bias, Activation act, size_t expert_bytes, size_t row_bytes, int m, int k,
                             const void* x, void* out, const int32_t* tiles, const int32_t* n_tiles, int max_tiles,
                             const LaunchCtx& ctx) {
  if (max_tiles <= 0) return true;
  GemvArgs a{};
  a.w[0] = static_cast<const uint8_t*>(w_gate);
  a.out[0] = out;
  a.row_end[0] = m;
  a.n_segs = 1;
  a.w_up = static_cast<const uint8_t*>(w_up);
  a.glu_biased = true;
  a.act = act;
  a.glu_gate_bias = gate_bias;
  a.glu_up_bias = up_bias;
  a.row_bytes = row_bytes;
  a.k = k;
  a.n = 1;
  a.x = static_cast<const __half*>(x);
  a.x_one_row = true;
  a.tiles = reinterpret_cast<const int4*>(tiles);
  a.n_tiles = n_tiles;
  a.expert_bytes = expert_bytes;
  const bool launched = launch_gemv_kq_stream(w_type, a, DType::F16, true, max_tiles, ctx);
  if (launched) RF_GPU_CHECK_LAUNCH();
  return launched;
}

}  // namespace rf::gpu
