// Dequantization of weight rows to f16 (dequant_rows_kernel and its
// launcher): large batches on quantized weights dequantize a chunk of rows
// into scratch and multiply it with BLAS. The per-format decoders are in
// dequant.cuh.
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"

namespace rf::gpu {
namespace {

template <DType T>
__global__ void dequant_rows_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int row0, int rows, int k,
                                    __half* __restrict__ dst) {
  pdl_wait();
  pdl_trigger();
  const int subs = k / 32;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k % 32 == 0) {
    if (idx >= int64_t(rows) * subs) return;
    const int r = int(idx / subs), sb = int(idx % subs);
    float v[32];
    WeightFormat<T>::load32(w + size_t(row0 + r) * row_bytes, sb, v);
    uint4* o = reinterpret_cast<uint4*>(dst + size_t(r) * k + size_t(sb) * 32);  // 64-byte aligned
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t packed[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const __half2 h = __floats2half2_rn(v[8 * i + 2 * j], v[8 * i + 2 * j + 1]);
        packed[j] = *reinterpret_cast<const uint32_t*>(&h);
      }
      o[i] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
  } else if constexpr (kPlain<T>) {
    if (idx >= int64_t(rows) * k) return;
    const int r = int(idx / k), i = int(idx % k);
    dst[size_t(r) * k + i] = __float2half_rn(load1<T>(w + size_t(row0 + r) * row_bytes, i));
  }
}

template <DType T>
void launch_dequant(const void* w, size_t row_bytes, int row0, int rows, int k, void* dst, const LaunchCtx& ctx) {
  const int64_t work = k % 32 == 0 ? int64_t(rows) * (k / 32) : int64_t(rows) * k;
  const int threads = 256;
  launch(dequant_rows_kernel<T>, unsigned((work + threads - 1) / threads), threads, 0, ctx,
         static_cast<const uint8_t*>(w), row_bytes, row0, rows, k, static_cast<__half*>(dst));
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace

void dequant_rows_f16(DType w_type, const void* w, size_t row_bytes, int row0, int rows, int k, void* dst,
                      const LaunchCtx& ctx) {
  switch (w_type) {
#define RF_CASE(T) \
  case DType::T: return launch_dequant<DType::T>(w, row_bytes, row0, rows, k, dst, ctx);
    RF_FOR_EACH_WEIGHT_FORMAT(RF_CASE)
#undef RF_CASE
    default: fail("cuda dequant: weight type ", dtype_name(w_type), " is not supported");
  }
}

}  // namespace rf::gpu
