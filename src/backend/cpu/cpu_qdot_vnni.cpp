// The AVX-512 VNNI kernel set: the bodies of cpu_qdot_x86.inc with
// vpdpbusd / vpdpwssd on 256-bit registers (AVX512VL). Activations are
// quantized by the AVX2 quantizers (the same values).
#include <algorithm>
#include <type_traits>

#include "backend/cpu/cpu_qdot.h"

#if defined(__x86_64__)
#define RF_QDOT_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"
#define RF_QDOT_VNNI 1
#include "backend/cpu/cpu_qdot_x86.inc"

namespace rf::cpu::qdot {
WeightKernel vnni_lookup(DType t) { return lookup_impl(t); }
}  // namespace rf::cpu::qdot
#else
namespace rf::cpu::qdot {
WeightKernel vnni_lookup(DType) { return {}; }
}  // namespace rf::cpu::qdot
#endif
