// The CPU matmul's dot-product kernels: weight rows in their stored format
// against activations quantized to 8 bits once per matmul (or kept f32 for
// float weights), integer products inside each block.
//
// Activation formats (one per weight format, see ActFormat):
//   Q8_32: blocks of 32, {f32 d, f32 s = d * sum(q), int8 q[32]}, for the
//          32-element weight formats (q4_0 .. q8_0, iq4_nl, mxfp4);
//   Q8_K:  BlockQ8_K (f32 d, int8 q[256], int16 sums of each 16), for the
//          256-element formats (the k-quants and most i-quants);
//   F32:   the f32 row itself, for f32, f16 and bf16 weights.
// Activations are quantized round-to-nearest with d = max|x| / 127.
//
// A kernel computes one weight row against up to kMaxRows activation rows
// at once, decoding each weight block once for all of them (the prefill
// tile). Kernel sets exist per instruction set: plain C++ (any CPU), AVX2
// (+FMA, F16C) and AVX-512 VNNI (256-bit VL forms); the fastest one the CPU
// supports is chosen at run time (__builtin_cpu_supports) and the x86
// kernels carry their own target attributes, so every set is compiled into
// any build. Tests select a set explicitly through kernel_set().
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace rf::cpu {

enum class ActFormat : uint8_t { None, F32, Q8_32, Q8_K };

struct BlockQ8_32 {
  float d;   // value = d * q
  float s;   // d * sum(q)
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_32) == 40);

constexpr int kMaxRows = 4;  // activation rows per kernel call

// out[j * out_stride] = dot(w, x_j) for j < nr (1..kMaxRows), where x_j
// starts x_stride bytes after x_{j-1}; k elements (whole blocks of w).
using DotKernel = void (*)(const void* w, const void* x, size_t x_stride, int nr, size_t k, float* out,
                           size_t out_stride);

// The same for two weight rows, ws bytes apart: out[j * out_stride + r]
// for weight row r (0, 1); each the bits DotKernel gives that row.
using DotKernel2 = void (*)(const void* w, size_t ws, const void* x, size_t x_stride, int nr, size_t k, float* out,
                            size_t out_stride);

struct WeightKernel {
  ActFormat act = ActFormat::None;  // None: no kernel for this format
  DotKernel dot = nullptr;
  DotKernel2 dot2 = nullptr;        // null: dot row by row
};

enum class KernelIsa : uint8_t { Scalar, Avx2, Avx512Vnni, Reference };
const char* isa_name(KernelIsa isa);

struct KernelSet {
  KernelIsa isa;
  WeightKernel (*lookup)(DType t);
  // Quantizes n floats (a whole number of blocks) into dst.
  void (*quantize_q8_32)(const float* x, BlockQ8_32* dst, size_t n);
  void (*quantize_q8_k)(const float* x, void* dst, size_t n);
};

// Whether this CPU can run a set (Scalar always).
bool isa_supported(KernelIsa isa);
// A set by name; throws rf::Error when the CPU cannot run it.
const KernelSet& kernel_set(KernelIsa isa);
// The fastest set this CPU runs (decided once).
const KernelSet& best_kernels();
// The exact set: best_kernels()' float-weight kernels (f32 activations) and
// no kernel for quantized weights, which the matmul then reads with
// dot_row over f32 activations (CpuMatmul::Reference).
const KernelSet& reference_kernels();

// Bytes of one activation row of k elements in a format (0 for None).
size_t act_row_bytes(ActFormat f, size_t k);
// Quantizes (or copies) one row of k elements into the format.
void quantize_act_row(const KernelSet& ks, ActFormat f, const float* x, void* dst, size_t k);

// The per-set tables (cpu_qdot_scalar.cpp, cpu_qdot_avx2.cpp, cpu_qdot_vnni.cpp).
namespace qdot {
WeightKernel scalar_lookup(DType t);
WeightKernel avx2_lookup(DType t);
WeightKernel vnni_lookup(DType t);
void quantize_q8_32_scalar(const float* x, BlockQ8_32* dst, size_t n);
void quantize_q8_k_scalar(const float* x, void* dst, size_t n);
void quantize_q8_32_avx2(const float* x, BlockQ8_32* dst, size_t n);
void quantize_q8_k_avx2(const float* x, void* dst, size_t n);
}  // namespace qdot

}  // namespace rf::cpu
