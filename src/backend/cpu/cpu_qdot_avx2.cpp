// The AVX2 (+FMA, F16C) kernel set and activation quantizers: the bodies of
// cpu_qdot_x86.inc with vpmaddubsw + vpmaddwd integer sums.
#include <algorithm>
#include <type_traits>

#include "backend/cpu/cpu_qdot.h"

#if defined(__x86_64__)
#define RF_QDOT_TARGET "avx2,fma,f16c"
#define RF_QDOT_VNNI 0
#include "backend/cpu/cpu_qdot_x86.inc"

namespace rf::cpu::qdot {
WeightKernel avx2_lookup(DType t) { return lookup_impl(t); }
void quantize_q8_32_avx2(const float* x, BlockQ8_32* dst, size_t n) { quantize_q8_32_impl(x, dst, n); }
void quantize_q8_k_avx2(const float* x, void* dst, size_t n) { quantize_q8_k_impl(x, dst, n); }
}  // namespace rf::cpu::qdot
#else
namespace rf::cpu::qdot {
WeightKernel avx2_lookup(DType) { return {}; }
void quantize_q8_32_avx2(const float* x, BlockQ8_32* dst, size_t n) { quantize_q8_32_scalar(x, dst, n); }
void quantize_q8_k_avx2(const float* x, void* dst, size_t n) { quantize_q8_k_scalar(x, dst, n); }
}  // namespace rf::cpu::qdot
#endif
