// What every batch-1/few-row GEMV kernel shares (gemv.cu, gemv_stream.cu):
// the launch arguments (GemvArgs: up to three stacked weight matrices with
// their outputs and biases, a gate/up pair, expert tiles), how a block finds
// its expert tile (gemv_tile) and a row its matrix (gemv_row), and the
// finished value's bias and store. The streaming k-quant launcher is declared
// here too.
#pragma once

#include "backend/cuda/elementwise/glu.cuh"
#include "backend/cuda/gpu.h"
#include "core/dtype.h"

namespace rf::gpu {

template <typename T> __device__ __forceinline__ void store_out(T* p, float v) { *p = from_float<T>(v); }

// Up to 3 weight matrices of the same type and width, stacked: global row r
// belongs to the first segment whose row_end exceeds it and writes that
// segment's output (plus the segment's bias, if any). Paired mode: segment 0
// is gate, w_up the matching up rows, and out[0] receives act(gate) * up
// (gelu ? GELU : SiLU); with glu_biased (expert mode, gpt-oss) it receives
// glu_act(gate + gate_bias, up + up_bias, act) of the f16-rounded products
// and expert e's biases (f32 [n_expert, rows]; null: none), what the
// unfused gate and up GEMVs and moe_bias_glu store.
struct GemvArgs {
  const uint8_t* w[3];
  void* out[3];
  const float* bias[3];
  int row_end[3];
  int n_segs;
  const uint8_t* w_up;
  bool gelu;
  bool glu_biased;
  Activation act;
  const float *glu_gate_bias, *glu_up_bias;
  size_t row_bytes;
  int k, n;
  const __half* x;
  bool prefetch;  // bulk L2 prefetch of each row (16-byte aligned rows only)
  bool tma;       // rows may be bulk-copied to shared memory (sm_90 TMA; launchers check the size)
  // Expert mode (tiles != nullptr; one segment): block row blockIdx.y takes
  // tile {expert, first row, rows} of the previous kernel's tiles[] (blocks
  // past *n_tiles exit): weights w[0] and w_up advanced by expert *
  // expert_bytes, x and out by the tile's first row.
  const int4* tiles;
  const int* n_tiles;
  size_t expert_bytes;
  bool x_one_row;  // expert mode: every tile reads x's first row (one token, no gather)
  // The streaming k-quant kernel: x as 8-bit quants with a float2 (d, d * sum
  // of quants) per 32 (the layout of LaunchCtx::act_q8).
  const int8_t* xq;
  const float2* xds;
  bool weights_l1;  // ... and its Q4_K weight loads go through L1
  // A residual add and RMSNorm folded into the f16 bulk-copying kernel (one
  // activation row; GemvNormFusion): with `residual`, each row's value,
  // rounded to f16, is added to residual[r] and the sum written as f16 to
  // residual_f16[r] instead of to out; with x_rms, x is such an un-normed
  // row and each dot product is scaled by 1 / rms(x) (the norm's gain is
  // folded into the weights).
  float* residual;
  __half* residual_f16;
  bool x_rms;
  float rms_eps;
};

// The part of x, of the weights and of out that a block works on: all of
// them, or its expert tile's.
struct GemvTile {
  size_t expert;  // the tile's expert (0 without tiles)
  size_t w_off;
  const __half* x;
  size_t x_row;  // x's row index (0: one shared row, or no tiles)
  int n;
  size_t out_off;  // elements
};
// False when the block has no tile (it exits). In expert mode the tiles are
// the previous kernel's output: wait for it first (no weight prefetch before
// the wait, since the expert is not known yet).
__device__ __forceinline__ bool gemv_tile(const GemvArgs& a, int m, GemvTile& t) {
  t.expert = 0;
  t.w_off = 0;
  t.x = a.x;
  t.x_row = 0;
  t.n = a.n;
  t.out_off = 0;
  if (!a.tiles) return true;
  pdl_wait();
  if (int(blockIdx.y) >= *a.n_tiles) return false;
  const int4 tile = a.tiles[blockIdx.y];
  t.expert = size_t(tile.x);
  t.w_off = size_t(tile.x) * a.expert_bytes;
  t.x_row = a.x_one_row ? 0 : size_t(tile.y);
  t.x = a.x + t.x_row * a.k;
  t.n = tile.z;
  t.out_off = size_t(tile.y) * m;
  return true;
}

// Row r's weights and output: the segment it belongs to. Segment lookups use
// constant indices only: indexing the kernel parameters at run time would
// copy them to local memory in every thread.
struct GemvRow {
  const uint8_t* w;
  void* out;
  const float* bias;
  int local, seg_rows;
};
__device__ __forceinline__ GemvRow gemv_row(const GemvArgs& a, int r) {
  const int seg = (a.n_segs > 1 && r >= a.row_end[0]) + (a.n_segs > 2 && r >= a.row_end[1]);
  const int start = seg == 0 ? 0 : (seg == 1 ? a.row_end[0] : a.row_end[1]);
  GemvRow g;
  g.local = r - start;
  g.seg_rows = (seg == 0 ? a.row_end[0] : (seg == 1 ? a.row_end[1] : a.row_end[2])) - start;
  g.w = (seg == 0 ? a.w[0] : (seg == 1 ? a.w[1] : a.w[2])) + size_t(g.local) * a.row_bytes;
  g.out = seg == 0 ? a.out[0] : (seg == 1 ? a.out[1] : a.out[2]);
  g.bias = seg == 0 ? a.bias[0] : (seg == 1 ? a.bias[1] : a.bias[2]);
  return g;
}

// Paired glu_biased mode's value of gate and up products whose biases sit
// at `at` (expert * rows + row).
__device__ __forceinline__ float glu_biased_f16(float gate, float up, const GemvArgs& a, size_t at) {
  float g = __half2float(__float2half_rn(gate)), u = __half2float(__float2half_rn(up));
  if (a.glu_gate_bias) g += a.glu_gate_bias[at];
  if (a.glu_up_bias) u += a.glu_up_bias[at];
  return glu_act(g, u, a.act);
}

// A finished dot product: plus the row's bias, if its segment has one.
__device__ __forceinline__ float with_bias(const GemvRow& g, float s) { return g.bias ? s + g.bias[g.local] : s; }

// The streaming k-quant kernel (gemv_stream.cu) for one activation row
// (grid_y: 1, or in expert mode with x_one_row the most tiles), or in expert
// mode for tiles of one row each of x's x_rows rows
// (Tuning::kq_stream_expert_rows), when it is on for this format
// (gemv_quantizes_activations) and the alignment suits it; false if it did
// not launch.
bool launch_gemv_kq_stream(DType w_type, const GemvArgs& a, DType out_type, bool paired, int grid_y,
                           const LaunchCtx& ctx, int x_rows = 1);
// The same for two groups of segments in different formats (t0 != t1,
// each Q4_K or Q6_K, f16 outputs, one activation row) in one launch
// (Fusions::gemv_two_formats); false if it did not launch.
bool launch_gemv_kq_stream_two(DType t0, const GemvArgs& a0, DType t1, const GemvArgs& a1, const LaunchCtx& ctx);

// Warps per set of rows of the streaming kernels for rows of `chunks`
// 64-weight chunks in format t: k-quants 1 up to 10 warp widths (14336-wide
// down projections: 7 chunks a lane), else 4; the 32-wide block formats 1
// up to 2 warp widths, 2 up to 4, else 4 (Tuning::kq_stream_split
// overrides).
int stream_split(DType t, int chunks, const LaunchCtx& ctx);
// The grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S) the streaming kernel reads (gemv_stream_grid.cu), and its launch
// for them (two rows per warp; m rows, grid_y as launch_gemv_kq_stream's).
bool stream_grid_format(DType t);
void launch_stream_grid(DType w_type, const GemvArgs& a, DType out_type, bool paired, int m, int grid_y,
                        const LaunchCtx& ctx);
// elems f16 activations (rows end to end, each a multiple of 32 wide) as
// 8-bit quants into ctx.act_q8; the record of a single row there is
// dropped.
void quantize_act_q8_rows(const void* x, int elems, const LaunchCtx& ctx);

}  // namespace rf::gpu
