// The matmul family's launchers: the GEMVs of a few activation rows
// (gemv.cu, gemv_stream.cu), the tensor-core GEMMs straight from quantized
// weights (gemm_mma.cu, gemm_wgmma.cu), the tiled f16 GEMM (gemm_tiled.cu),
// weight-row dequantization (dequant.cu) and the pieces around the FP8
// tensor-core matmul (matmul_fp8.cu). Each takes device pointers, sizes and
// the LaunchCtx, checks its launch, and throws rf::Error for an unsupported
// type. Activations are f16; out_type arguments choose f16 or f32 output.
// Which of them a Backend matmul runs is decided in matmul_dispatch.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/gpu.h"
#include "core/activation.h"
#include "core/dtype.h"

namespace rf::gpu {

// One-time setup of the current device (shared-memory opt-ins above 48 KB):
// the backend's constructor calls these once per device, before any launch.
void gemv_device_setup();       // gemv.cu
void mma_device_setup();        // gemm_mma.cu
void wgmma_device_setup();      // gemm_wgmma.cu

// ---- gemv.cu
// Whether a GEMV of this weight format and shape reads its activations as
// 8-bit quants (the streaming kernel, gemv_stream.cu: Q4_K, Q5_K, Q6_K,
// IQ4_XS, and the 32-wide Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4 as
// the tuning enables them; one row, k a multiple of 256 (32-wide formats:
// 64) of at least 64 warp widths, up to kActQ8MaxK).
bool gemv_quantizes_activations(const Tuning& tuning, int warp_size, DType w_type, int n, int k);
// ... and one token's expert GEMVs whose tiles read rows of their own (the
// down projections; Tuning::kq_stream_expert_rows, and for rows of
// fewer chunks than a warp's lanes kq_stream_short_expert_rows).
bool gemv_expert_rows_quantize_activations(const Tuning& tuning, int warp_size, DType w_type, int k);
// out[n, m] = x[n, k] (f16) . w[m, k]^T for w of any weight format, n <= 8
// per launch (the launcher loops). out_type F16 or F32.
void gemv(DType w_type, const void* w, size_t w_row_bytes, int m, int k, const void* x, int n, void* out,
          DType out_type, const LaunchCtx& ctx);
// Several weight matrices of one type and width in one launch (each row
// writes its own output [n, rows], plus its f32 bias [rows] if given); with
// w_up (one segment: the gate weights) the output is act(x . gate^T) *
// (x . up^T), act = GELU (tanh, as geglu) if gelu, else SiLU. n <= 8 per launch.
struct GemvSegment {
  const void* w;
  void* out;
  int rows;
  const float* bias = nullptr;
};
// A residual add and RMSNorm folded into batch-1 f16 GEMVs (one activation
// row, weights f16; gemv_fuses_norm says where it applies):
//  - residual (an o or down projection): each output, rounded to f16 as the
//    projection's output would be, is added to residual (f32) and the new
//    residual written as f16 to residual_f16; out is not written;
//  - x_rms (the GEMVs of the next norm's row, x = residual_f16): each dot
//    product is scaled by 1 / sqrt(mean(x^2) + eps) before bias and GLU.
//    The norm's gain must already be folded into their weights
//    (scale_columns_f16).
struct GemvNormFusion {
  float* residual = nullptr;
  void* residual_f16 = nullptr;
  bool x_rms = false;
  float eps = 0.0f;
};
// Whether gemv_segments takes a GemvNormFusion for one activation row of
// these weights (k columns; paired: a gate/up pair).
bool gemv_fuses_norm(const Tuning& tuning, DType w_type, size_t row_bytes, bool paired);
void gemv_segments(DType w_type, const GemvSegment* segs, int n_segs, const void* w_up, bool gelu, size_t row_bytes,
                   int k, const void* x, int n, DType out_type, const LaunchCtx& ctx,
                   const GemvNormFusion* fusion = nullptr);
// One activation row (f16) by segments of two formats in one launch (f16
// outputs): segs0 in t0, then segs1 in t1 (Q4_K and Q6_K, the streaming
// GEMV; q4_k_m's q/k/v with V in Q6_K). False (nothing launched) where it
// does not apply.
bool gemv_segments_two_formats(DType t0, const GemvSegment* segs0, int n0, size_t row_bytes0, DType t1,
                               const GemvSegment* segs1, int n1, size_t row_bytes1, int k, const void* x,
                               const LaunchCtx& ctx);
// Expert mode (mixture of experts): one launch over the tiles {expert, first
// row, rows <= max_tile_rows <= 8} that moe_plan wrote (int4 each; *n_tiles
// of them, at most max_tiles): out[first + i, :] = x[first + i, :] . W_e^T
// for expert e's m rows (W_e = w + e * expert_bytes; with w_up, the GLU of
// gate and up as gemv_segments computes it). With x_one_row (tiles of one
// row: a single token) every tile reads x's first row instead, so the
// token's row needs no gather. x_rows: x's rows (the pairs).
void gemv_experts(DType w_type, const void* w, const void* w_up, bool gelu, size_t expert_bytes, size_t row_bytes,
                  int m, int k, const void* x, bool x_one_row, int x_rows, void* out, DType out_type,
                  const int32_t* tiles, const int32_t* n_tiles, int max_tiles, int max_tile_rows, const LaunchCtx& ctx);
// One token's gate and up expert GEMVs (x_one_row tiles) with their biases
// and the GLU `act` (gpt-oss's clamped SwiGLU) in one launch of the
// streaming kernel: out = glu_act(gate + gate_bias, up + up_bias) as
// GemvArgs' glu_biased mode computes it. False (nothing launched) where
// the streaming kernel does not take the format or alignment.
bool gemv_experts_glu_biased(DType w_type, const void* w_gate, const void* w_up, const float* gate_bias,
                             const float* up_bias, Activation act, size_t expert_bytes, size_t row_bytes, int m, int k,
                             const void* x, void* out, const int32_t* tiles, const int32_t* n_tiles, int max_tiles,
                             const LaunchCtx& ctx);

// ---- gemm_mma.cu
// Tensor-core matmul for 1..64 activation rows straight from Q4_K or Q6_K
// weights (k % 256 == 0; NVIDIA only — supported() is false elsewhere).
// With splits > 1 the k range is split over blocks and `partials` must hold
// splits * n * m floats. mma_matmul_splits() picks the split count.
bool mma_matmul_supported(DType w_type, int k);
int mma_matmul_splits(int m, int k, int n_sms);
void mma_matmul(DType w_type, const void* w, size_t w_row_bytes, int m, int k, const void* x, int n, void* out,
                DType out_type, int splits, float* partials, const LaunchCtx& ctx);
// out = the sum of `splits` partials (each `count` floats), in split order.
void mma_sum_splits(const float* partials, int splits, int64_t count, void* out, DType out_type, const LaunchCtx& ctx);
// Expert mode: gemv_experts' contract with tiles of up to 64 rows, on
// tensor cores (mma_experts_supported: those of mma_matmul and f16).
bool mma_experts_supported(DType w_type, int k);
// tile_rows: the most rows a tile of the plan has (moe_plan's mma tiles).
void mma_matmul_experts(DType w_type, const void* w, size_t expert_bytes, size_t row_bytes, int m, int k, const void* x,
                        void* out, DType out_type, const int32_t* tiles, const int32_t* n_tiles, int max_tiles,
                        int tile_rows, const LaunchCtx& ctx);

// ---- gemm_wgmma.cu
// mma_matmul's contract on Hopper's asynchronous warpgroup tensor-core
// instructions (Q4_K, Q5_K and Q6_K with k % 256 == 0, the 32-wide block
// formats with k % 128 == 0: more than mma_matmul takes; supported() false elsewhere;
// the weights must lie in an allocation of whole 16-byte units).
// wgmma_matmul_splits() picks the split count for n activation rows,
// charging split_cost stage-times and the partials' bytes for splitting.
bool wgmma_matmul_supported(DType w_type, int k);
int wgmma_matmul_splits(DType w_type, int m, int k, int n, int n_sms, int split_cost);
void wgmma_matmul(DType w_type, const void* w, size_t w_row_bytes, int m, int k, const void* x, int n, void* out,
                  DType out_type, int splits, float* partials, const LaunchCtx& ctx);
// Launches of up to 16 rows (tiles of up to 16 in expert mode) take a
// 16-column variant where Tuning::wgmma_narrow.
// Expert mode: mma_matmul_experts' contract (tiles of up to 64 rows) on the
// same kernel; mma_matmul_experts hands its calls here where Tuning::wgmma
// is on and this kernel takes the format (Q5_K and the 32-wide formats only
// here).
bool wgmma_experts_supported(DType w_type, int k);
void wgmma_matmul_experts(DType w_type, const void* w, size_t expert_bytes, size_t row_bytes, int m, int k,
                          const void* x, void* out, DType out_type, const int32_t* tiles, const int32_t* n_tiles,
                          int max_tiles, int tile_rows, const LaunchCtx& ctx);

// ---- dequant.cu
// dst[r, :] = dequant(w[r, :]) as f16, for rows [row0, row0 + rows).
void dequant_rows_f16(DType w_type, const void* w, size_t w_row_bytes, int row0, int rows, int k, void* dst,
                      const LaunchCtx& ctx);

// ---- matmul_fp8.cu
// xq[r, :] = e4m3 codes of x[r, :] / scale[r] (x f16 [n, k]), scale[r] =
// max|x[r, :]| / 448 (core/fp8.h).
void quantize_act_e4m3(const void* x, int n, int k, void* xq, float* scale, const LaunchCtx& ctx);
// out[r] = the scale in the header of FP8 weight row r (F8_E4M3_ROW).
void gather_f8_row_scales(const void* w, size_t row_bytes, int m, float* out, const LaunchCtx& ctx);

// ---- gemm_tiled.cu
// Tiled f16 GEMM (f32 accumulation), out[n, m] = x[n, k] . w[m, k]^T, with
// out row stride ldo; the BLAS fallback where no vendor BLAS exists.
void gemm_f16_tiled(const void* x, const void* w, void* out, DType out_type, int n, int m, int k, int ldo,
                    const LaunchCtx& ctx);

}  // namespace rf::gpu
