// Streaming k-quant GEMV for one activation row (batch-1 decode; Q4_K): the
// weights go straight from memory into registers, no shared memory, no
// block barrier (but for long rows, below), so each warp computes as soon
// as its own bytes land and the loads of every warp overlap the others'
// arithmetic.
//
// A warp takes kRows rows (and their up rows when paired: gate/up fused
// with SiLU/GELU) across the whole width. Lane l takes the 32-byte quant
// chunks l, l + W, l + 2W, ... of each row (W: the warp size). Chunk c lies
// in super-block c / 4 and holds sub-block 2 (c % 4) in its low nibbles and
// 2 (c % 4) + 1 in its high ones (activations 64 c .. 64 c + 63); the lane
// loads it with its super-block's 16-byte header (d, dmin, packed scales).
// Since W is a multiple of 4, a lane's chunks always sit at the same place
// in their super-blocks. The next chunk's loads are issued before the
// current one is computed, and the first ones before the wait for the
// previous kernel (weights are constant). The activations go in as 8-bit
// quants with a scale per 32 (quantize_act_q8_kernel, launched just before
// into LaunchCtx::act_q8), so the nibbles meet them in integer dot products:
// about one instruction per weight, where f16 arithmetic takes over two.
// (Not bit-equal to f16 activations: within llama.cpp's tolerance for this
// op, NMSE 5e-4; tests/gpu/cuda_ops_test.cpp checks both.)
#include "backend/cuda/gemv_args.cuh"
#include "backend/cuda/gemv_dot.cuh"
#include "backend/cuda/glu.cuh"
#include "backend/cuda/kernels.h"

namespace rf::gpu {
namespace {

constexpr int kStreamWarps = 4;  // warps per block

// 16 bytes of weights, read once: past L1 on NVIDIA (it keeps the
// activations, which every warp reads).
__device__ __forceinline__ uint4 load_weights16(const uint8_t* p) {
#if !defined(RF_PORTABLE) && defined(__CUDA_ARCH__)
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
#else
  return *reinterpret_cast<const uint4*>(p);
#endif
}

// Sum of the four 8-bit products of a and b, plus c.
__device__ __forceinline__ int dot4_i8(int a, int b, int c) {
#if defined(RF_HIP)
  // (gfx90a and gfx1030 have a dot instruction; its builtin needs per-target
  // features, so the plain form for now.)
#pragma unroll
  for (int j = 0; j < 4; ++j) c += int(int8_t(a >> (8 * j))) * int(int8_t(b >> (8 * j)));
  return c;
#else
  return __dp4a(a, b, c);
#endif
}

// A weight format's streaming parts (Q4_K; a Q6_K version, whose 210-byte
// super-blocks allow only 4-byte word loads, measured slower than gemv.cu's
// kernel: docs/PERFORMANCE.md): Chunk, a lane's bytes of one row for
// chunk c (64 weights), loaded as raw words (Chunk load(row, c), which must
// not wait for them); XChunk, the chunk's activations (load_x, shared by all
// rows); dot(chunk, x, p): their product, p = c % 4 (the same for all of a
// lane's chunks).
template <DType T> struct StreamFormat;

// Q4_K: chunk c = 32 quant bytes of super-block c / 4 (sub-block 2p in the
// low nibbles, 2p + 1 in the high ones; activations 64c .. 64c + 63) and the
// super-block's 16-byte header (d, dmin, packed 6-bit scales and mins).
template <> struct StreamFormat<DType::Q4_K> {
  struct Chunk {
    uint4 head, q0, q1;
  };
  struct XChunk {
    uint4 xl[2], xh[2];  // 8-bit quants of the two sub-blocks
    float4 ds;           // (d, d * sum of quants) of each
  };
  __device__ static Chunk load(const uint8_t* row, int c) {
    const uint8_t* sb = row + size_t(c / 4) * sizeof(BlockQ4_K);
    Chunk q;
    q.head = load_weights16(sb);
    q.q0 = load_weights16(sb + 16 + 32 * (c % 4));
    q.q1 = load_weights16(sb + 32 + 32 * (c % 4));
    return q;
  }
  __device__ static XChunk load_x(const GemvArgs& a, int c) {
    const uint4* xp = reinterpret_cast<const uint4*>(a.xq) + size_t(c) * 4;
    return {{__ldg(xp), __ldg(xp + 1)}, {__ldg(xp + 2), __ldg(xp + 3)},
            __ldg(reinterpret_cast<const float4*>(a.xds) + c)};
  }
  // The 6-bit scales and mins of the pair come out of the header in two
  // 16-bit lanes (core/quant_blocks.h has the layout); the nibbles go four
  // at a time into integer dot products.
  __device__ static float dot(const Chunk& q, const XChunk& x, int p) {
    const float2 dm = __half22float2(*reinterpret_cast<const __half2*>(&q.head.x));
    const int shift = (p & 1) * 16;
    const uint32_t s0 = q.head.y >> shift, s1 = q.head.z >> shift, s2 = q.head.w >> shift;
    const uint32_t sc = p < 2 ? (s0 & 0x3F3Fu) : ((s2 & 0x0F0Fu) | ((s0 >> 2) & 0x3030u));
    const uint32_t mn = p < 2 ? (s1 & 0x3F3Fu) : (((s2 >> 4) & 0x0F0Fu) | ((s1 >> 2) & 0x3030u));
    const uint32_t w[8] = {q.q0.x, q.q0.y, q.q0.z, q.q0.w, q.q1.x, q.q1.y, q.q1.z, q.q1.w};
    const uint32_t xa[8] = {x.xl[0].x, x.xl[0].y, x.xl[0].z, x.xl[0].w, x.xl[1].x, x.xl[1].y, x.xl[1].z, x.xl[1].w};
    const uint32_t xb[8] = {x.xh[0].x, x.xh[0].y, x.xh[0].z, x.xh[0].w, x.xh[1].x, x.xh[1].y, x.xh[1].z, x.xh[1].w};
    int lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // word i: elements 4i .. 4i + 3 of each sub-block
      lo = dot4_i8(int(w[i] & 0x0F0F0F0Fu), int(xa[i]), lo);
      hi = dot4_i8(int((w[i] >> 4) & 0x0F0F0F0Fu), int(xb[i]), hi);
    }
    // Element = d * sc * q - dmin * m; activation = scale * quant.
    return dm.x * (small_uint_to_float(sc & 0xFFu) * x.ds.x * float(lo) +
                   small_uint_to_float(sc >> 8) * x.ds.z * float(hi)) -
           dm.y * (small_uint_to_float(mn & 0xFFu) * x.ds.y + small_uint_to_float(mn >> 8) * x.ds.w);
  }
};

// x (one row of k f16 activations) as 8-bit quants, per 32: d = max |x| /
// 127, quant = round(x / d), and (d, d * sum of quants). A thread per 32.
__global__ void quantize_act_q8_kernel(const __half* x, int k, int8_t* xq, float2* xds) {
  pdl_wait();
  pdl_trigger();
  const int b = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (b >= k / 32) return;
  const uint4* xp = reinterpret_cast<const uint4*>(x) + size_t(b) * 4;
  float v[32];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float f[8];
    half8_to_float(xp[i], f);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      v[8 * i + j] = f[j];
      amax = fmaxf(amax, fabsf(f[j]));
    }
  }
  const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
  uint32_t packed[8];
  int sum = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int q = __float2int_rn(v[4 * i + j] * inv);
      sum += q;
      word |= uint32_t(q & 0xFF) << (8 * j);
    }
    packed[i] = word;
  }
  uint4* out = reinterpret_cast<uint4*>(xq) + size_t(b) * 2;
  out[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  out[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  xds[b] = make_float2(d, d * float(sum));
}

// kSplit warps share a set of rows, splitting its chunks (lane l of part
// p: chunks p W + l, (p + kSplit) W + l, ...) and adding their sums through
// shared memory: long rows (the 14336-wide down projections) otherwise
// leave each warp a chain of dependent loads.
template <DType T, typename OutT, bool kPaired, int kRows, int kSplit>
__global__ void __launch_bounds__(kStreamWarps* RF_WARP_SIZE) gemv_stream_kernel(GemvArgs a) {
  using F = StreamFormat<T>;
  constexpr int S = kRows * (kPaired ? 2 : 1);  // rows a warp reads: gate (or plain) rows, then up rows
  constexpr int W = RF_WARP_SIZE, kSets = kStreamWarps / kSplit;
  static_assert(kStreamWarps % kSplit == 0, "gemv_stream_kernel: warps per block split evenly");
  const int lane = threadIdx.x % W, warp = threadIdx.x / W, set = warp / kSplit, part = warp % kSplit;
  const int m = a.n_segs == 1 ? a.row_end[0] : (a.n_segs == 2 ? a.row_end[1] : a.row_end[2]);
  const int r0 = (int(blockIdx.x) * kSets + set) * kRows;
  const uint8_t* rows[S];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const GemvRow g = gemv_row(a, min(r0 + i, m - 1));  // rows past m repeat the last (not stored)
    rows[i] = g.w;
    if constexpr (kPaired) rows[kRows + i] = a.w_up + size_t(g.local) * a.row_bytes;
  }
  const int chunks = a.k / 64, p = lane % 4, first = part * W + lane;
  constexpr int kStride = kSplit * W;
  typename F::Chunk cur[S], next[S];
  if (first < chunks) {
#pragma unroll
    for (int s = 0; s < S; ++s) cur[s] = F::load(rows[s], first);
  }
  pdl_wait();
  pdl_trigger();
  float acc[S];
#pragma unroll
  for (int s = 0; s < S; ++s) acc[s] = 0.0f;
  // Chunk c against every row's loaded chunk (its activations loaded once
  // for all rows).
  const auto step = [&](int c, const typename F::Chunk(&q)[S]) {
    const typename F::XChunk x = F::load_x(a, c);
#pragma unroll
    for (int s = 0; s < S; ++s) acc[s] += F::dot(q[s], x, p);
  };
  // Two chunks per trip, their buffers alternating: the next chunk's loads
  // are in flight while one is computed.
  for (int c = first; c < chunks; c += 2 * kStride) {
    if (c + kStride < chunks) {
#pragma unroll
      for (int s = 0; s < S; ++s) next[s] = F::load(rows[s], c + kStride);
    }
    step(c, cur);
    if (c + kStride >= chunks) break;
    if (c + 2 * kStride < chunks) {
#pragma unroll
      for (int s = 0; s < S; ++s) cur[s] = F::load(rows[s], c + 2 * kStride);
    }
    step(c + kStride, next);
  }
#pragma unroll
  for (int s = 0; s < S; ++s) acc[s] = warp_sum(acc[s]);
  if constexpr (kSplit > 1) {
    __shared__ float partial[kStreamWarps][S];
    if (lane == 0) {
#pragma unroll
      for (int s = 0; s < S; ++s) partial[warp][s] = acc[s];
    }
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int s = 0; s < S; ++s) {
      acc[s] = partial[warp][s];  // the parts in a fixed order
#pragma unroll
      for (int q = 1; q < kSplit; ++q) acc[s] += partial[warp + q][s];
    }
  }
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    if (lane == i && r0 + i < m) {
      float v = acc[i];
      if constexpr (kPaired) v = glu_f16_rounded(v, acc[kRows + i], a.gelu);
      const GemvRow g = gemv_row(a, r0 + i);
      store_out(static_cast<OutT*>(g.out) + g.local, with_bias(g, v));
    }
  }
}

// Warps per set of rows: 1 for rows of up to 2 warp widths of chunks, 2 up
// to 4, else 4 (CudaOptions::kq_stream_split overrides).
int stream_split(int chunks, const LaunchCtx& ctx) {
  if (ctx.options.kq_stream_split > 0) return ctx.options.kq_stream_split;
  return chunks <= 2 * ctx.warp_size ? 1 : chunks <= 4 * ctx.warp_size ? 2 : 4;
}

template <DType T, typename OutT, bool kPaired, int kRows>
void launch_stream_rows(const GemvArgs& a, int split, int m, const LaunchCtx& ctx) {
  const int rows_per_block = kStreamWarps / split * kRows;
  const unsigned blocks = unsigned((m + rows_per_block - 1) / rows_per_block);
  const unsigned threads = unsigned(kStreamWarps * ctx.warp_size);
  if (split == 1) launch(gemv_stream_kernel<T, OutT, kPaired, kRows, 1>, blocks, threads, 0, ctx, a);
  else if (split == 2) launch(gemv_stream_kernel<T, OutT, kPaired, kRows, 2>, blocks, threads, 0, ctx, a);
  else launch(gemv_stream_kernel<T, OutT, kPaired, kRows, 4>, blocks, threads, 0, ctx, a);
}

template <DType T, typename OutT, bool kPaired>
void launch_stream(const GemvArgs& a, int rows_per_warp, int m, const LaunchCtx& ctx) {
  const int split = stream_split(a.k / 64, ctx);
  if (rows_per_warp == 1) launch_stream_rows<T, OutT, kPaired, 1>(a, split, m, ctx);
  else if (rows_per_warp == 2) launch_stream_rows<T, OutT, kPaired, 2>(a, split, m, ctx);
  else launch_stream_rows<T, OutT, kPaired, 4>(a, split, m, ctx);
}

template <DType T>
void launch_stream_type(const GemvArgs& a, DType out_type, bool paired, int rows_per_warp, int m,
                        const LaunchCtx& ctx) {
  if (out_type == DType::F32) {
    if (paired) launch_stream<T, float, true>(a, rows_per_warp, m, ctx);
    else launch_stream<T, float, false>(a, rows_per_warp, m, ctx);
  } else {
    if (paired) launch_stream<T, __half, true>(a, rows_per_warp, m, ctx);
    else launch_stream<T, __half, false>(a, rows_per_warp, m, ctx);
  }
}

}  // namespace

bool gemv_quantizes_activations(const CudaOptions& options, int warp_size, DType w_type, int n, int k) {
  return w_type == DType::Q4_K && options.kq_stream_rows > 0 && n == 1 && k % 256 == 0 && k <= kActQ8MaxK &&
         k / 64 >= warp_size;
}

bool launch_gemv_kq_stream(DType w_type, const GemvArgs& args, DType out_type, bool paired, const LaunchCtx& ctx) {
  if (!ctx.act_q8 || args.tiles || !gemv_quantizes_activations(ctx.options, ctx.warp_size, w_type, args.n, args.k))
    return false;
  // Rows are read in 16-byte pieces.
  bool aligned = reinterpret_cast<uintptr_t>(args.x) % 16 == 0 && args.row_bytes % 16 == 0 &&
                 (!paired || reinterpret_cast<uintptr_t>(args.w_up) % 16 == 0);
  for (int i = 0; i < args.n_segs; ++i) aligned = aligned && reinterpret_cast<uintptr_t>(args.w[i]) % 16 == 0;
  if (!aligned) return false;
  float2* xds = static_cast<float2*>(ctx.act_q8);
  int8_t* xq = reinterpret_cast<int8_t*>(static_cast<uint8_t*>(ctx.act_q8) + size_t(kActQ8MaxK) / 32 * 8);
  const int groups = args.k / 32;
  launch(quantize_act_q8_kernel, unsigned((groups + 127) / 128), 128u, 0, ctx, args.x, args.k, xq, xds);
  GemvArgs a = args;
  a.xq = xq;
  a.xds = xds;
  launch_stream_type<DType::Q4_K>(a, out_type, paired, ctx.options.kq_stream_rows, a.row_end[a.n_segs - 1], ctx);
  return true;
}

}  // namespace rf::gpu
