// Row conversions between f32 and every GGUF tensor format this engine
// reads: dequantize (bit-exact with ggml), quantize (search-based scale
// selection, error no worse than llama.cpp's reference quantizers) and the
// dot product of a stored row with an f32 vector (the CPU backend's inner
// loop). Block layouts are in core/quant_blocks.h.
//
// All functions are pure and thread-safe: callers may convert different rows
// from many threads at once. `n` counts elements and must be a multiple of
// the type's block size (rf::Error otherwise). Row pointers of quantized data
// must be aligned to their block struct (2 bytes; 4 for Q8_K).
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace rf {

// Types dequantize_row/dot_row accept: F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, the i-quants (IQ1_S,
// IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS), MXFP4 and
// F8_E4M3_ROW.
bool can_dequantize(DType t);

// Dequantizes n elements of type t at src into dst, reproducing ggml's
// values bit for bit. Throws rf::Error for an unsupported type or partial block.
void dequantize_row(DType t, const void* src, float* dst, size_t n);

// Types quantize_row writes: every type dequantize_row accepts.
bool can_quantize(DType t);

// Quantizes n floats into type t (row_bytes(t, n) bytes at dst). Throws
// rf::Error for unsupported types or a partial block. Non-finite inputs give
// an unspecified (but valid) block. With `importance` (n non-negative
// weights, e.g. an importance matrix's mean squared activations per column)
// the quantizers of the i-quants (IQ1_S .. IQ4_XS) and MXFP4 minimize the
// importance-weighted error; the other types ignore it. The i-quants below
// 4 bits are meant to be made with importances (without, every weight is 1):
// their grids leave too few choices for a plain squared error to spend
// them where the activations need them.
void quantize_row(DType t, const float* src, void* dst, size_t n, const float* importance = nullptr);

// sum_i dequant(w)[i] * x[i] over one row of n elements, accumulated in f32.
float dot_row(DType t, const void* w, const float* x, size_t n);

// The portable scalar paths behind dequantize_row and dot_row (dequantized
// values are identical to dequantize_row's; dot results agree to rounding).
// For tests and builds without AVX2.
void dequantize_row_scalar(DType t, const void* src, float* dst, size_t n);
float dot_row_scalar(DType t, const void* w, const float* x, size_t n);

}  // namespace rf
