// Tensor-core GEMM (mma_matmul_kernel, the split-sum kernel, their
// launchers and shared-memory opt-ins): small batches (9..64 activation
// rows per launch) straight from quantized weights. Each warp loads its rows'
// quantized bytes into registers and dequantizes them to f16 directly in the
// mma.sync A-fragment layout, so weights cross memory once in their packed
// form (the batched-decode case: 64 sequences on a Q4_K_M model). Activations
// are staged per 256-wide k chunk in shared memory (double-buffered with
// cp.async). Long k ranges are split over blocks; the splits' f32 partials
// are summed in a fixed order (deterministic results). Expert mode
// (mixture-of-experts FFNs, mma_matmul_experts): blockIdx.y takes one tile
// of up to 64 activation rows routed to one expert, and the block reads that
// expert's weights: all active experts in one launch.
//
// Within each 32-wide k slice the k order is permuted identically for weights
// and activations: lane quad t holds physical elements 8t..8t+7, which keeps
// both operands' loads contiguous (a dot product does not depend on the
// order of its terms).
//
// On Hopper, dense Q4_K / Q6_K batches (and Q5_K, Q8_0) and MXFP4 experts take
// gemm_wgmma.cu instead (Tuning::wgmma); this kernel keeps f16 experts and FP8
// rows there.
// Formats: Q4_K, Q6_K, FP8 rows (k % 256 == 0), and in expert mode f16 and
// MXFP4 (gpt-oss's experts; k % 32 == 0: the last chunk may be partial, its
// slices past k neither loaded nor multiplied). NVIDIA only (mma.sync, cp.async);
// other formats and HIP use dequantization to f16 + BLAS. (F16 weights stay
// with cuBLAS, which is faster on them.)
#include <algorithm>
#include <type_traits>

#include "backend/cuda/matmul/dequant.cuh"
#include "backend/cuda/matmul/e4m3.cuh"
#include "backend/cuda/matmul/gemm_args.cuh"
#include "backend/cuda/matmul/matmul.cuh"
#include "backend/cuda/ptx.cuh"

namespace rf::gpu {

#if !defined(RF_PORTABLE)
namespace {

constexpr int kMmaCols = 64;      // activation rows per launch (8 n-tiles of 8)
// A block's warps each take 16 weight rows and all 64 activation rows. The
// activation chunk staged in shared memory is shared by all 16 warps: per
// weight byte, the staging traffic (L2 -> shared memory) falls with the
// rows per block; with 64 rows per block it would be 3.5x the weight bytes
// and bound the kernel.
constexpr int kMmaWarps = 16;
constexpr int kMmaRows = 16 * kMmaWarps;
constexpr int kMmaThreads = 32 * kMmaWarps;
constexpr int kChunk = kQuantGemmChunk;  // k elements per pipeline stage
constexpr int kXStride = kChunk + 32;  // halves per staged activation row (bank-conflict-free 16-byte reads)
constexpr size_t kSmem = size_t(2) * kMmaCols * kXStride * sizeof(__half);  // two activation chunks

// Four f16 pairs of one weight row for one 32-wide k slice: step 0 uses
// (.x, .y), step 1 (.z, .w) as the a0/a2 (or a1/a3) registers.
using Frag = uint4;

// Bytes b_i, b_j of v (each < 64) -> half2(b_i, b_j), exact.
template <uint32_t kSel>
__device__ __forceinline__ __half2 bytes_to_h2(uint32_t v, __half2 bias) {
  return __hsub2(bits_h2(__byte_perm(v, 0x6464u, kSel)), bias);  // (1024 + b) - bias
}

// ---- per-format register loaders -------------------------------------------------

template <DType T> struct MmaFormat;

template <> struct MmaFormat<DType::Q4_K> {
  struct Raw {
    uint4 head;  // d, dmin, 12 bytes of 6-bit scales and mins
    uint2 qs[4];
  };
  __device__ static void load(const uint8_t* row, int chunk, int t, Raw& r, int /*slices*/) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(row + size_t(chunk) * sizeof(BlockQ4_K));
    r.head = __ldg(reinterpret_cast<const uint4*>(b));  // d, dmin, scales: the first 16 bytes
#pragma unroll
    for (int p = 0; p < 4; ++p) r.qs[p] = __ldg(reinterpret_cast<const uint2*>(b->qs + 32 * p + 8 * t));
  }
  __device__ static Frag frag(const Raw& r, int j, int) {
    const uint8_t* s = reinterpret_cast<const uint8_t*>(&r.head) + 4;
    int sc, mn;
    k4_scale_min_dev(s, j, &sc, &mn);
    const float d = __half2float(__ushort_as_half(uint16_t(r.head.x & 0xffff)));
    const float dmin = __half2float(__ushort_as_half(uint16_t(r.head.x >> 16)));
    const __half2 d1 = __float2half2_rn(d * float(sc)), m1 = __float2half2_rn(-dmin * float(mn));
    const uint2 q = r.qs[j / 2];
    const int shift = (j & 1) * 4;
    const uint32_t lo = (q.x >> shift) & 0x0F0F0F0Fu, hi = (q.y >> shift) & 0x0F0F0F0Fu;
    const __half2 bias = __float2half2_rn(1024.0f);
    Frag f;
    f.x = h2_bits(__hfma2(bytes_to_h2<0x4140>(lo, bias), d1, m1));
    f.y = h2_bits(__hfma2(bytes_to_h2<0x4342>(lo, bias), d1, m1));
    f.z = h2_bits(__hfma2(bytes_to_h2<0x4140>(hi, bias), d1, m1));
    f.w = h2_bits(__hfma2(bytes_to_h2<0x4342>(hi, bias), d1, m1));
    return f;
  }
};

// Q6_K blocks are 210 bytes: only 2-byte alignment, so 16-bit loads.
__device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t* p) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return uint32_t(__ldg(h)) | (uint32_t(__ldg(h + 1)) << 16);
}

template <> struct MmaFormat<DType::Q6_K> {
  struct Raw {
    uint32_t ql[4][2];  // ql[64n + 32h + 8t .. +8) for n, h in {0, 1}
    uint32_t qh[2][2];  // qh[32n + 8t .. +8)
    uint32_t sc[2];     // scales 2j + (t >= 2) for j = 0..7, as int8
    uint32_t d;
  };
  __device__ static void load(const uint8_t* row, int chunk, int t, Raw& r, int /*slices*/) {
    // Byte offsets of the BlockQ6_K fields (a typed pointer would tell the
    // compiler more about alignment and change the generated loads).
    constexpr int kQl = int(offsetof(BlockQ6_K, ql)), kQh = int(offsetof(BlockQ6_K, qh)),
                  kScales = int(offsetof(BlockQ6_K, scales)), kD = int(offsetof(BlockQ6_K, d));
    const uint8_t* b = row + size_t(chunk) * sizeof(BlockQ6_K);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      r.ql[i][0] = ld_u32_a2(b + kQl + 32 * i + 8 * t);
      r.ql[i][1] = ld_u32_a2(b + kQl + 32 * i + 8 * t + 4);
    }
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      r.qh[n][0] = ld_u32_a2(b + kQh + 32 * n + 8 * t);
      r.qh[n][1] = ld_u32_a2(b + kQh + 32 * n + 8 * t + 4);
    }
    // scales[2j + half] for j = 0..7 (int8, kept as bytes).
    const int half = t >= 2;
    uint32_t s[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < 8; ++j) s[j / 4] |= uint32_t(b[kScales + 2 * j + half]) << (8 * (j % 4));
    r.sc[0] = s[0];
    r.sc[1] = s[1];
    r.d = __ldg(reinterpret_cast<const uint16_t*>(b + kD));
  }
  __device__ static Frag frag(const Raw& r, int j, int) {
    const int n = j / 4, kk = j % 4;
    const int8_t sc = int8_t((r.sc[j / 4] >> (8 * (j % 4))) & 0xff);
    const __half2 dl = __float2half2_rn(__half2float(__ushort_as_half(uint16_t(r.d))) * float(sc));
    const int lshift = kk < 2 ? 0 : 4, hshift = 2 * kk;
    const uint32_t* ql = r.ql[2 * n + (kk & 1)];
    const uint32_t* qh = r.qh[n];
    const uint32_t q0 = ((ql[0] >> lshift) & 0x0F0F0F0Fu) | (((qh[0] >> hshift) & 0x03030303u) << 4);
    const uint32_t q1 = ((ql[1] >> lshift) & 0x0F0F0F0Fu) | (((qh[1] >> hshift) & 0x03030303u) << 4);
    const __half2 bias = __float2half2_rn(1056.0f);  // 1024 + 32: quants are q - 32
    Frag f;
    f.x = h2_bits(__hmul2(bytes_to_h2<0x4140>(q0, bias), dl));
    f.y = h2_bits(__hmul2(bytes_to_h2<0x4342>(q0, bias), dl));
    f.z = h2_bits(__hmul2(bytes_to_h2<0x4140>(q1, bias), dl));
    f.w = h2_bits(__hmul2(bytes_to_h2<0x4342>(q1, bias), dl));
    return f;
  }
};

// f16 rows (expert mode only: dense f16 matrices go to cuBLAS): a lane's
// eight halves of each 32-wide slice are one 16-byte load, already in
// fragment order.
template <> struct MmaFormat<DType::F16> {
  struct Raw {
    uint4 v[kChunk / 32];
  };
  __device__ static void load(const uint8_t* row, int chunk, int t, Raw& r, int /*slices*/) {
    const uint4* p = reinterpret_cast<const uint4*>(row) + size_t(chunk) * (kChunk / 8);
#pragma unroll
    for (int j = 0; j < kChunk / 32; ++j) r.v[j] = __ldg(p + 4 * j + t);
  }
  __device__ static Frag frag(const Raw& r, int j, int) { return r.v[j]; }
};

// FP8 rows (F8_E4M3_ROW): a lane's eight codes of each 32-wide slice are one
// 8-byte load, converted to f16 pairs exactly; the row's scale multiplies
// the sums as they are stored.
template <> struct MmaFormat<DType::F8_E4M3_ROW> {
  struct Raw {
    uint2 q[kChunk / 32];
  };
  __device__ static void load(const uint8_t* row, int chunk, int t, Raw& r, int /*slices*/) {
    const uint2* p = reinterpret_cast<const uint2*>(row + 16) + size_t(chunk) * (kChunk / 8);
#pragma unroll
    for (int j = 0; j < kChunk / 32; ++j) r.q[j] = __ldg(p + 4 * j + t);
  }
  __device__ static Frag frag(const Raw& r, int j, int) {
    Frag f;
    f.x = e4m3x2_to_half2_bits(r.q[j].x);
    f.y = e4m3x2_to_half2_bits(r.q[j].x >> 16);
    f.z = e4m3x2_to_half2_bits(r.q[j].y);
    f.w = e4m3x2_to_half2_bits(r.q[j].y >> 16);
    return f;
  }
  __device__ static float row_scale(const uint8_t* row) {
    return __ldg(reinterpret_cast<const float*>(row)) * kFp8HalfScale;
  }
};

// 8 bytes at any alignment: the aligned words that hold them, funnel-shifted
// (the third word only where the bytes reach into it: nothing past p + 8 is read).
__device__ __forceinline__ uint2 ld8_any(const uint8_t* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint32_t* w = reinterpret_cast<const uint32_t*>(a & ~uintptr_t(3));
  const uint32_t sh = uint32_t(a & 3) * 8;
  const uint32_t w0 = __ldg(w), w1 = __ldg(w + 1), w2 = sh ? __ldg(w + 2) : 0u;
  return make_uint2(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh));
}

// MXFP4 (17-byte blocks of 32, byte-aligned): slice j of a chunk is block
// j; lane quad t's elements 8t..8t+7 are the low (t < 2) or high nibbles of
// qs[8 (t & 1) ..+8). A nibble's magnitude (E2M1 doubled: 0, 1, 2, 3, 4, 6,
// 8, 12) comes from a byte permute of that table, its bit 3 is the sign;
// the small integers convert to f16 exactly and the block scale 2^(e - 128)
// multiplies them (exact where the product is an f16). Slices past
// `slices` (a partial last chunk) are zero and not read.
template <> struct MmaFormat<DType::MXFP4> {
  struct Raw {
    uint2 q[kChunk / 32];
    uint32_t e[2];  // the eight blocks' exponents, four to a word
  };
  __device__ static void load(const uint8_t* row, int chunk, int t, Raw& r, int slices) {
    const uint8_t* b = row + size_t(chunk) * (kChunk / 32) * sizeof(BlockMXFP4);
    r.e[0] = r.e[1] = 0;
#pragma unroll
    for (int j = 0; j < kChunk / 32; ++j) {
      if (j < slices) {
        const uint8_t* blk = b + j * sizeof(BlockMXFP4);
        r.q[j] = ld8_any(blk + 1 + 8 * (t & 1));
        r.e[j / 4] |= uint32_t(__ldg(blk)) << (8 * (j % 4));
      } else {
        r.q[j] = make_uint2(0, 0);
      }
    }
  }
  // Four nibbles (the low ones of q's bytes) -> two f16 pairs times d.
  __device__ static void pairs(uint32_t q, __half2 d, uint32_t& lo, uint32_t& hi) {
    const uint32_t nb = q & 0x0F0F0F0Fu;
    const uint32_t y = nb | (nb >> 4);
    const uint32_t sel = ((y & 0xFFu) | ((y >> 8) & 0xFF00u)) & 0x7777u;
    const uint32_t mag = __byte_perm(0x03020100u, 0x0C080604u, sel);
    const uint32_t s = nb & 0x08080808u;
    const uint32_t s01 = ((s & 0x08u) << 12) | ((s & 0x0800u) << 20);
    const uint32_t s23 = ((s & 0x080000u) >> 4) | ((s & 0x08000000u) << 4);
    const __half2 bias = __float2half2_rn(1024.0f);
    lo = h2_bits(__hmul2(bits_h2(h2_bits(bytes_to_h2<0x4140>(mag, bias)) ^ s01), d));
    hi = h2_bits(__hmul2(bits_h2(h2_bits(bytes_to_h2<0x4342>(mag, bias)) ^ s23), d));
  }
  __device__ static Frag frag(const Raw& r, int j, int t) {
    const int shift = (t >> 1) * 4;
    const uint8_t e = uint8_t(r.e[j / 4] >> (8 * (j % 4)));
    const __half2 d = __float2half2_rn(__uint_as_float(e8m0_half_bits(e)));
    Frag f;
    pairs(r.q[j].x >> shift, d, f.x, f.y);
    pairs(r.q[j].y >> shift, d, f.z, f.w);
    return f;
  }
};

// ---- the kernel ---------------------------------------------------------------------

using MmaArgs = QuantGemmArgs;

// Stages activation chunk `c` (columns [256c, 256c + 256) of all n rows of
// x; columns past k, in a partial last chunk, as zeros).
__device__ __forceinline__ void stage_x(const __half* x, int n, int k, int c, __half* xs) {
  constexpr int kVecs = kChunk / 8;  // 16-byte pieces per row
  for (int i = threadIdx.x; i < kMmaCols * kVecs; i += kMmaThreads) {
    const int row = i / kVecs, v = i % kVecs;
    const int col = c * kChunk + 8 * v;
    const bool valid = row < n && col < k;
    const __half* src = x + (valid ? size_t(row) * k + col : 0);
    copy16_async_or_zero(xs + row * kXStride + 8 * v, src, valid);
  }
  copy_commit();
}

template <DType T, typename OutT>
__global__ void __launch_bounds__(kMmaThreads, 1) mma_matmul_kernel(MmaArgs a) {
  using F = MmaFormat<T>;
  extern __shared__ __align__(16) __half xs_all[];  // [2][kMmaCols][kXStride]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int row_g = blockIdx.x * kMmaRows + warp * 16 + g, row_g8 = row_g + 8;
  const uint8_t* w = a.w;
  const __half* x = a.x;
  int n = a.n;
  void* out = a.out;
  if (a.tiles) {  // the tiles are the previous kernel's output
    pdl_wait();
    if (int(blockIdx.y) >= *a.n_tiles) return;
    const int4 tile = a.tiles[blockIdx.y];
    w += size_t(tile.x) * a.expert_bytes;
    x += size_t(tile.y) * a.k;
    n = tile.z;
    out = static_cast<OutT*>(out) + size_t(tile.y) * a.m;
  }
  const uint8_t* wg = w + size_t(min(row_g, a.m - 1)) * a.row_bytes;
  const uint8_t* wg8 = w + size_t(min(row_g8, a.m - 1)) * a.row_bytes;
  const int n_chunks = (a.k + kChunk - 1) / kChunk;  // (MXFP4: the last may be partial)
  const bool split = !a.tiles && gridDim.y > 1;
  const int c_begin = split ? blockIdx.y * a.chunks_per_split : 0;
  const int c_end = min(n_chunks, c_begin + a.chunks_per_split);
  const int n_tiles = (n + 7) / 8;

  // The 32-wide slices of chunk c within k (8 but in MXFP4's partial last chunk).
  const auto slices_of = [&](int c) {
    return T == DType::MXFP4 ? min(kChunk / 32, (a.k - c * kChunk) / 32) : kChunk / 32;
  };
  typename F::Raw raw_g, raw_g8;
  F::load(wg, c_begin, t, raw_g, slices_of(c_begin));  // weights are constant: load before waiting on the previous kernel
  F::load(wg8, c_begin, t, raw_g8, slices_of(c_begin));
  pdl_wait();
  pdl_trigger();

  float acc[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
  // Row-scaled formats: the two rows' scales, applied as the sums are stored.
  float scale_g = 1.0f, scale_g8 = 1.0f;
  if constexpr (T == DType::F8_E4M3_ROW) {
    scale_g = F::row_scale(wg);
    scale_g8 = F::row_scale(wg8);
  }

  stage_x(x, n, a.k, c_begin, xs_all);
  for (int c = c_begin; c < c_end; ++c) {
    const int buf = (c - c_begin) & 1;
    const int slices = slices_of(c);
    if (c != c_begin) {  // issue this chunk's weight loads before the barrier wait
      F::load(wg, c, t, raw_g, slices);
      F::load(wg8, c, t, raw_g8, slices);
    }
    copy_wait<0>();
    __syncthreads();  // chunk c staged; everyone is done with the other buffer
    if (c + 1 < c_end) stage_x(x, n, a.k, c + 1, xs_all + (buf ^ 1) * kMmaCols * kXStride);
    const __half* xs = xs_all + buf * kMmaCols * kXStride + g * kXStride + 8 * t;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (j >= slices) break;
      const Frag ag = F::frag(raw_g, j, t), ag8 = F::frag(raw_g8, j, t);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if (nt < n_tiles) {
          const uint4 xb = *reinterpret_cast<const uint4*>(xs + 8 * nt * kXStride + 32 * j);
          mma_16816(acc[nt], ag.x, ag8.x, ag.y, ag8.y, xb.x, xb.y);
          mma_16816(acc[nt], ag.z, ag8.z, ag.w, ag8.w, xb.z, xb.w);
        }
      }
    }
  }

  // C fragment: acc[nt] = out^T rows (g, g, g+8, g+8), columns (2t, 2t+1, 2t, 2t+1).
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    if (nt >= n_tiles) continue;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = 8 * nt + 2 * t + (i & 1), row = i < 2 ? row_g : row_g8;
      if (col >= n || row >= a.m) continue;
      const size_t o = size_t(col) * a.m + row;
      const float v = acc[nt][i] * (i < 2 ? scale_g : scale_g8);
      if (split)
        a.partials[size_t(blockIdx.y) * a.n * a.m + o] = v;
      else
        static_cast<OutT*>(out)[o] = from_float<OutT>(v);
    }
  }
}

// out = sum over splits of the partials, in split order.
template <typename OutT>
__global__ void sum_splits_kernel(const float* __restrict__ partials, int splits, int64_t count, OutT* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  float s = 0.0f;
  for (int p = 0; p < splits; ++p) s += partials[p * count + i];
  out[i] = from_float<OutT>(s);
}

template <DType T, typename OutT>
void launch_mma(const MmaArgs& a, int splits, const LaunchCtx& ctx) {
  const dim3 grid(unsigned((a.m + kMmaRows - 1) / kMmaRows), unsigned(splits));
  launch(mma_matmul_kernel<T, OutT>, grid, dim3(kMmaThreads), kSmem, ctx, a);
  if (splits > 1)
    mma_sum_splits(a.partials, splits, int64_t(a.n) * a.m, a.out, std::is_same_v<OutT, float> ? DType::F32 : DType::F16,
                   ctx);
}

template <DType T>
void dispatch_out(const MmaArgs& a, int splits, DType out_type, const LaunchCtx& ctx) {
  if (out_type == DType::F32) launch_mma<T, float>(a, splits, ctx);
  else launch_mma<T, __half>(a, splits, ctx);
}

template <DType T, typename OutT>
void opt_in_smem() {
  auto* kernel = mma_matmul_kernel<T, OutT>;
  RF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
}

}  // namespace

void mma_sum_splits(const float* partials, int splits, int64_t count, void* out, DType out_type, const LaunchCtx& ctx) {
  const dim3 grid(unsigned((count + 255) / 256));
  if (out_type == DType::F32)
    launch(sum_splits_kernel<float>, grid, dim3(256), 0, ctx, partials, splits, count, static_cast<float*>(out));
  else
    launch(sum_splits_kernel<__half>, grid, dim3(256), 0, ctx, partials, splits, count, static_cast<__half*>(out));
}

void mma_device_setup() {
  opt_in_smem<DType::F16, float>();
  opt_in_smem<DType::F16, __half>();
  opt_in_smem<DType::Q4_K, float>();
  opt_in_smem<DType::Q4_K, __half>();
  opt_in_smem<DType::Q6_K, float>();
  opt_in_smem<DType::Q6_K, __half>();
  opt_in_smem<DType::F8_E4M3_ROW, float>();
  opt_in_smem<DType::F8_E4M3_ROW, __half>();
  opt_in_smem<DType::MXFP4, float>();
  opt_in_smem<DType::MXFP4, __half>();
}

bool mma_matmul_supported(DType w_type, int k) {
  return (w_type == DType::Q4_K || w_type == DType::Q6_K || w_type == DType::F8_E4M3_ROW) && k % kChunk == 0;
}

bool mma_experts_supported(DType w_type, int k) {
  if (w_type == DType::MXFP4) return k % 32 == 0;
  return (w_type == DType::F16 || mma_matmul_supported(w_type, k)) && k % kChunk == 0;
}

int mma_matmul_splits(int m, int k, int n_sms) {
  // About two blocks per SM (one runs at a time), each keeping >= 2 chunks
  // (512 k) so that the partials stay small next to the weights.
  const int row_blocks = (m + kMmaRows - 1) / kMmaRows;
  const int want = (2 * n_sms + row_blocks - 1) / row_blocks;
  return std::max(1, std::min(want, k / (2 * kChunk)));
}

void mma_matmul(DType w_type, const void* w, size_t row_bytes, int m, int k, const void* x, int n, void* out,
                DType out_type, int splits, float* partials, const LaunchCtx& ctx) {
  RF_CHECK(mma_matmul_supported(w_type, k), "mma matmul: unsupported weight type ", dtype_name(w_type), " or width ",
           k);
  const MmaArgs a = quant_gemm_args("mma matmul", w, row_bytes, m, k, x, n, kMmaCols, out, out_type, splits, partials);
  switch (w_type) {
    case DType::Q4_K: return dispatch_out<DType::Q4_K>(a, splits, out_type, ctx);
    case DType::Q6_K: return dispatch_out<DType::Q6_K>(a, splits, out_type, ctx);
    case DType::F8_E4M3_ROW: return dispatch_out<DType::F8_E4M3_ROW>(a, splits, out_type, ctx);
    default: fail("mma matmul: unsupported weight type ", dtype_name(w_type));
  }
}

void mma_matmul_experts(DType w_type, const void* w, size_t expert_bytes, size_t row_bytes, int m, int k, const void* x,
                        void* out, DType out_type, const int32_t* tiles, const int32_t* n_tiles, int max_tiles,
                        int tile_rows, const LaunchCtx& ctx) {
  if (ctx.tuning.wgmma && wgmma_experts_supported(w_type, k))
    return wgmma_matmul_experts(w_type, w, expert_bytes, row_bytes, m, k, x, out, out_type, tiles, n_tiles, max_tiles,
                                tile_rows, ctx);
  RF_CHECK(tile_rows >= 1 && tile_rows <= kMmaCols, "mma matmul: expert tiles of ", tile_rows, " rows");
  RF_CHECK(mma_experts_supported(w_type, k), "mma matmul: unsupported shape");
  int splits = 1;  // expert mode: every tile takes the whole k range
  MmaArgs a = quant_gemm_args("mma matmul", w, row_bytes, m, k, x, kMmaCols, kMmaCols, out, out_type, splits, nullptr,
                              w_type == DType::MXFP4 ? 32 : kChunk);
  if (max_tiles <= 0) return;
  a.tiles = reinterpret_cast<const int4*>(tiles);
  a.n_tiles = n_tiles;
  a.expert_bytes = expert_bytes;
  const dim3 grid(unsigned((m + kMmaRows - 1) / kMmaRows), unsigned(max_tiles));
  const auto go = [&](auto* kernel) { launch(kernel, grid, dim3(kMmaThreads), kSmem, ctx, a); };
  const bool f32 = out_type == DType::F32;
  switch (w_type) {
    case DType::F16: return f32 ? go(mma_matmul_kernel<DType::F16, float>) : go(mma_matmul_kernel<DType::F16, __half>);
    case DType::Q4_K:
      return f32 ? go(mma_matmul_kernel<DType::Q4_K, float>) : go(mma_matmul_kernel<DType::Q4_K, __half>);
    case DType::Q6_K:
      return f32 ? go(mma_matmul_kernel<DType::Q6_K, float>) : go(mma_matmul_kernel<DType::Q6_K, __half>);
    case DType::F8_E4M3_ROW:
      return f32 ? go(mma_matmul_kernel<DType::F8_E4M3_ROW, float>)
                 : go(mma_matmul_kernel<DType::F8_E4M3_ROW, __half>);
    case DType::MXFP4:
      return f32 ? go(mma_matmul_kernel<DType::MXFP4, float>) : go(mma_matmul_kernel<DType::MXFP4, __half>);
    default: fail("mma matmul: unsupported expert weight type ", dtype_name(w_type));
  }
}

#else  // RF_PORTABLE (HIP, cuda-portable): no mma.sync; large batches go through dequantization + BLAS.

void mma_device_setup() {}
bool mma_matmul_supported(DType, int) { return false; }
bool mma_experts_supported(DType, int) { return false; }
int mma_matmul_splits(int, int, int) { return 1; }
void mma_matmul(DType, const void*, size_t, int, int, const void*, int, void*, DType, int, float*, const LaunchCtx&) {
  fail("mma matmul: not available on this GPU vendor");
}
void mma_matmul_experts(DType, const void*, size_t, size_t, int, int, const void*, void*, DType, const int32_t*,
                        const int32_t*, int, int, const LaunchCtx&) {
  fail("mma matmul: not available on this GPU vendor");
}
void mma_sum_splits(const float*, int, int64_t, void*, DType, const LaunchCtx&) {
  fail("mma matmul: not available on this GPU vendor");
}

#endif

}  // namespace rf::gpu
