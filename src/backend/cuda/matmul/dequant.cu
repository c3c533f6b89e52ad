// Dequantization of weight rows to f16 (dequant_rows_kernel and its
// launcher): large batches on quantized weights dequantize a chunk of rows
// into scratch and multiply it with BLAS. The per-format decoders are in
// dequant.cuh.
#include "backend/cuda/matmul/dequant.cuh"
#include "backend/cuda/matmul/matmul.cuh"

namespace rf::gpu {
namespace {

constexpr int kDequantThreads = 256;

// A thread per 32-weight sub-block (rows of k % 32 == 0): sub-block
// blockIdx.x * 256 + t of the rows, whose 64 output bytes are also its
// place in dst (rows are contiguous). The block's 16 KB go through shared
// memory (each thread's four 16-byte words at rotated slots, so a quarter
// warp's stores hit at most two ways of a bank) and out in 16-byte words at
// consecutive addresses across the block: a warp stores 512 contiguous
// bytes an instruction, where each thread storing its own 64 bytes spread
// a warp's stores over 2 KB. Other widths: a thread per weight.
template <DType T>
__global__ void __launch_bounds__(kDequantThreads)
    dequant_rows_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int row0, int rows, int k,
                        __half* __restrict__ dst) {
  pdl_wait();
  pdl_trigger();
  const int subs = k / 32;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k % 32 == 0) {
    __shared__ uint4 stage[kDequantThreads * 4];
    const int64_t total = int64_t(rows) * subs, first = int64_t(blockIdx.x) * blockDim.x;
    const int t = int(threadIdx.x);
    if (idx < total) {
      const int r = int(idx / subs), sb = int(idx % subs);
      float v[32];
      WeightFormat<T>::load32(w + size_t(row0 + r) * row_bytes, sb, v);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        uint32_t packed[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const __half2 h = __floats2half2_rn(v[8 * i + 2 * j], v[8 * i + 2 * j + 1]);
          packed[j] = *reinterpret_cast<const uint32_t*>(&h);
        }
        stage[4 * t + ((i + t) & 3)] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
      }
    }
    __syncthreads();
    const int words = int(total - first < kDequantThreads ? total - first : kDequantThreads) * 4;
    uint4* o = reinterpret_cast<uint4*>(dst + first * 32);  // 64-byte aligned
    for (int L = t; L < words; L += kDequantThreads) {
      const int owner = L >> 2, i = L & 3;
      o[L] = stage[4 * owner + ((i + owner) & 3)];
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
  const int threads = kDequantThreads;
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
