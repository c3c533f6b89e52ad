// The elementwise family's launchers (elementwise.cu): the embedding
// lookup, the gated activations, bias add, the column split of packed
// outputs, scale, soft-cap, the residual add, the row gather and the
// f32 -> f16 conversion. Each takes device pointers, sizes and the
// LaunchCtx and checks its launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/gpu.h"
#include "core/activation.h"
#include "core/dtype.h"

namespace rf::gpu {

// out[t, :] = table[ids[t], :] as f32 (any weight format).
void embed_rows(DType type, const void* table, size_t row_bytes, int cols, const int32_t* ids, int n, int vocab,
                float* out, const LaunchCtx& ctx);
// The same from the rows of ids [first, first + vocab); with zero_outside,
// other ids give zero rows (a tensor-parallel rank's vocabulary range).
void embed_rows_range(DType type, const void* table, size_t row_bytes, int cols, const int32_t* ids, int n, int first,
                      int vocab, bool zero_outside, float* out, const LaunchCtx& ctx);
// out = silu(gate) * up (f16, n elements).
void swiglu(const void* gate, const void* up, void* out, int64_t n, const LaunchCtx& ctx);
// out = gelu_tanh(gate) * up (f16, n elements), the GELU rounded to f16 as
// ggml's table does (Backend::geglu).
void geglu(const void* gate, const void* up, void* out, int64_t n, const LaunchCtx& ctx);
// out = act(gate, up) (f16, n elements) for any Activation (glu.cuh's
// glu_act: SwiGLU, GeGLU, gpt-oss's clamped SwiGLU).
void glu(const void* gate, const void* up, void* out, int64_t n, Activation act, const LaunchCtx& ctx);
// out[t, i] = act(gate_up[t, i]) * gate_up[t, ff + i] (f16; rows of 2 ff:
// gate's columns, then up's), act as swiglu (SiLU) or geglu (GELU).
void glu_packed(const void* gate_up, int64_t rows, int ff, void* out, bool gelu, const LaunchCtx& ctx);
// x[r, :] += bias for the rows of x (f16 [rows, cols]); bias f32 [cols].
void add_bias_f16(void* x, const float* bias, int64_t rows, int cols, const LaunchCtx& ctx);
// The same for f32 rows (router logits).
void add_bias_f32(float* x, const float* bias, int64_t rows, int cols, const LaunchCtx& ctx);
// Splits the columns of src (f16 [rows, width]) into segments, in order:
// dst[s] (f16 [rows, cols[s]]) = src's next cols[s] columns + bias[s] (f32
// [cols[s]], or null). Widths are multiples of 8 and sum to width.
struct ColumnSegments {
  static constexpr int kMax = 3;
  void* dst[kMax] = {};
  const float* bias[kMax] = {};
  int cols[kMax] = {};
  int count = 0;
};
void split_columns_f16(const void* src, int rows, int width, const ColumnSegments& segs, const LaunchCtx& ctx);
// Folding a norm's gain into the f16 weights that multiply its output (load
// time): *overflow (device) set to 1 if some w[r, c] * gain[c] would not be
// a finite f16; then w[r, c] = f16(w[r, c] * gain[c]) in place.
void check_columns_scale_f16(const void* w, int64_t rows, int64_t cols, const float* gain, int* overflow,
                             const LaunchCtx& ctx);
void scale_columns_f16(void* w, int64_t rows, int64_t cols, const float* gain, const LaunchCtx& ctx);
// x *= s (f32, n elements).
void scale_f32(float* x, float s, int64_t n, const LaunchCtx& ctx);
// x *= s (f16, n elements; the product in f32, rounded once).
void scale_f16(void* x, float s, int64_t n, const LaunchCtx& ctx);
// x = cap * tanh(x / cap) (f32, n elements).
void softcap_f32(float* x, float cap, int64_t n, const LaunchCtx& ctx);
// x (f32) += y (f16), n elements.
void add_f16_to_f32(float* x, const void* y, int64_t n, const LaunchCtx& ctx);
// out = a + b (f16, n elements; out may alias a or b).
void add_f16(const void* a, const void* b, void* out, int64_t n, const LaunchCtx& ctx);
// out[i, :] = x[rows[i], :] for rows of `row_words` 4-byte words (f32, or
// f16 rows of even length).
void gather_rows(const void* x, const int32_t* rows, int n_rows, int row_words, void* out, const LaunchCtx& ctx);
// Converts n f32 values to f16.
void f32_to_f16(const float* x, void* out, int64_t n, const LaunchCtx& ctx);

}  // namespace rf::gpu
