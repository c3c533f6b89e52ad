// Kernel-set selection for the CPU matmul (cpu_qdot.h): which sets this CPU
// runs, the fastest of them, and the activation-row formats.
#include "backend/cpu/cpu_qdot.h"

#include <cstring>

#include "core/error.h"
#include "core/quant_blocks.h"

namespace rf::cpu {
namespace {

constexpr KernelSet kScalar{KernelIsa::Scalar, qdot::scalar_lookup, qdot::quantize_q8_32_scalar,
                            qdot::quantize_q8_k_scalar};
constexpr KernelSet kAvx2{KernelIsa::Avx2, qdot::avx2_lookup, qdot::quantize_q8_32_avx2, qdot::quantize_q8_k_avx2};
constexpr KernelSet kVnni{KernelIsa::Avx512Vnni, qdot::vnni_lookup, qdot::quantize_q8_32_avx2,
                          qdot::quantize_q8_k_avx2};

WeightKernel reference_lookup(DType t) {
  const bool f32_act = t == DType::F32 || t == DType::F16 || t == DType::BF16;
  return f32_act ? best_kernels().lookup(t) : WeightKernel{};
}
constexpr KernelSet kReference{KernelIsa::Reference, reference_lookup, qdot::quantize_q8_32_scalar,
                               qdot::quantize_q8_k_scalar};

}  // namespace

const KernelSet& reference_kernels() { return kReference; }

const char* isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::Scalar: return "scalar";
    case KernelIsa::Avx2: return "avx2";
    case KernelIsa::Avx512Vnni: return "avx512-vnni";
    case KernelIsa::Reference: return "reference";
  }
  return "?";
}

bool isa_supported(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::Scalar: case KernelIsa::Reference: return true;
#if defined(__x86_64__)
    case KernelIsa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case KernelIsa::Avx512Vnni:
      return isa_supported(KernelIsa::Avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512vnni");
#endif
    default: return false;
  }
}

const KernelSet& kernel_set(KernelIsa isa) {
  RF_CHECK(isa_supported(isa), "cpu kernels: this CPU cannot run the ", isa_name(isa), " kernel set");
  switch (isa) {
    case KernelIsa::Avx2: return kAvx2;
    case KernelIsa::Avx512Vnni: return kVnni;
    case KernelIsa::Reference: return kReference;
    default: return kScalar;
  }
}

const KernelSet& best_kernels() {
  static const KernelSet& best = isa_supported(KernelIsa::Avx512Vnni) ? kVnni
                                 : isa_supported(KernelIsa::Avx2)     ? kAvx2
                                                                      : kScalar;
  return best;
}

size_t act_row_bytes(ActFormat f, size_t k) {
  switch (f) {
    case ActFormat::F32: return k * sizeof(float);
    case ActFormat::Q8_32: return k / 32 * sizeof(BlockQ8_32);
    case ActFormat::Q8_K: return k / 256 * sizeof(BlockQ8_K);
    default: return 0;
  }
}

void quantize_act_row(const KernelSet& ks, ActFormat f, const float* x, void* dst, size_t k) {
  switch (f) {
    case ActFormat::F32: std::memcpy(dst, x, k * sizeof(float)); return;
    case ActFormat::Q8_32: ks.quantize_q8_32(x, static_cast<BlockQ8_32*>(dst), k); return;
    case ActFormat::Q8_K: ks.quantize_q8_k(x, dst, k); return;
    default: RF_CHECK(false, "quantize_act_row: no activation format");
  }
}

}  // namespace rf::cpu
