// Tensor element types with GGUF's numeric ids, and their block layouts.
// A quantized type stores `block_size` elements in `type_size` bytes; the
// block structs in core/quant_blocks.h are bit-exact with GGUF files. A
// row-scaled type (F8_E4M3_ROW) also starts every row with a `row_header`
// of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rf {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  MXFP4 = 39,
  // Engine-internal types, never in a file (dtype_info() does not know them):
  F8_E4M3 = 0x10000,  // the 8-bit KV cache's element (core/fp8.h)
  // ROCmForge's own weight type (an id outside ggml's range, so other GGUF
  // readers refuse the file by name): FP8 weights with one scale per row. A
  // row of n elements is a 16-byte header (its f32 scale s, then 12 zero
  // bytes) and n OCP e4m3 codes of x / s, s = max|x| / 448 (core/fp8.h);
  // n must be a multiple of 32 (the GPU kernels' sub-block), so every row's
  // codes stay 16-byte aligned.
  F8_E4M3_ROW = 0x10001,
};

struct DTypeInfo {
  const char* name;   // as llama.cpp prints it: "f32", "q4_K", ...
  uint32_t block_size;  // elements per block (1 for plain types)
  uint32_t type_size;   // bytes per block
  bool quantized;
  uint32_t row_header = 0;  // bytes before each row's blocks (row-scaled types)
};

// Info for a GGUF type id; nullopt for ids this engine does not know (and
// for the engine-internal types).
std::optional<DTypeInfo> dtype_info(uint32_t id);
const DTypeInfo& info(DType t);
inline const char* dtype_name(DType t) { return info(t).name; }
std::optional<DType> dtype_from_name(std::string_view name);  // case-insensitive

// Bytes of a row of `n` elements (n must be a multiple of the block size),
// its header included. Throws on overflow or a partial block.
size_t row_bytes(DType t, uint64_t n);

// Overflow-checked arithmetic for sizes read from untrusted files.
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out);
bool add_overflows(uint64_t a, uint64_t b, uint64_t* out);

}  // namespace rf
