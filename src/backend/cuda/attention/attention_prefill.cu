// Prefill attention (several new tokens per sequence) over the paged KV
// cache, causal, with GQA: attention_prefill_kernel and its launcher. A
// block takes a tile of up to kPrefillQ consecutive query tokens of one
// sequence and all query heads of one KV head, four threads per (query,
// head) row each owning HD/4 dims (eight at head size 512, fewer heads a
// block: kRowThreads). K/V tiles of kPrefillK keys (16 at 512) are staged in
// shared memory once for every head of the group; scores of a key tile go
// through one online-softmax update. kExt: with a sliding window (key tiles
// before the tile's first visible key skipped, keys before it never loaded)
// and logit soft-capping. An e4m3 cache (KV = Fp8) is staged as f16 (its
// rows times their scales), so the rest is the same kernel. On CUDA,
// attention_prefill_mma_kernel runs the same tiles on tensor cores
// (prefill_mma_tile.h: its block's code, tested on emulated warps). A tile
// may be one part of a tile split over its keys (query_tiles.h): its block
// leaves unnormalized sums and (max, sum) per row in a partial slot, and
// prefill_combine_kernel weighs a split tile's parts into the output.
// prefill_tiling says which of the two kernels runs and how it takes tiles.
#include <algorithm>

#include "backend/cuda/attention/attention_args.cuh"
#include "backend/cuda/attention/kv_fp8.cuh"
#include "backend/cuda/attention/prefill_mma_tile.h"
#include "backend/cuda/ptx.cuh"

namespace rf::gpu {
namespace {

constexpr int kPrefillQ = 16, kPrefillK = 32;
static_assert(kPrefillQ == kQueryTileTokens, "a block takes one query tile");
constexpr int kPrefillThreads = 256;  // at most a block

// Threads per (query, head) row and keys per staged tile at head size HD:
// 4 and 32, or past 256 (Gemma 4's 512) 8 threads a row (64 dims each: q
// and the accumulators stay in registers) and 16 keys (the K and V tiles
// in 33 KB of static shared memory), so a block holds two heads' rows.
template <int HD>
constexpr int kRowThreads = HD > 256 ? 8 : 4;
template <int HD>
constexpr int kTileK = HD > 256 ? 16 : kPrefillK;

template <int HD, bool kExt, typename KV>
__global__ void __launch_bounds__(kPrefillThreads) attention_prefill_kernel(AttnArgs a,
                                                                            const QueryTile* __restrict__ tiles,
                                                                            int heads_per_block) {
  constexpr int TPR = kRowThreads<HD>, DPT = HD / TPR, KT = kTileK<HD>;
  __shared__ __align__(16) __half ks[KT][HD + 8];
  __shared__ __align__(16) __half vs[KT][HD + 8];
  pdl_wait();
  pdl_trigger();
  // Grid: one block per (entry, KV head, head chunk), the entry slowest.
  const int group = a.n_heads / a.n_kv, hb = heads_per_block, chunks = group / hb;
  const int per_entry = a.n_kv * chunks;
  const QueryTile tile = tiles[blockIdx.x / per_entry];
  const int kvh = int(blockIdx.x % per_entry) / chunks, chunk = int(blockIdx.x % per_entry) % chunks;
  const int t0 = tile.first, nq = tile.count;
  const int row = threadIdx.x / TPR, part = threadIdx.x % TPR;
  const int qi = row / hb, h = kvh * group + chunk * hb + row % hb;
  const bool active = qi < nq;
  const int tok = t0 + (active ? qi : 0);
  const int pos = active ? a.positions[tok] : -1;
  // The part's keys (key_begin and key_end multiples of KT: a staged tile
  // never holds keys of another part).
  const int max_pos = min(a.positions[t0 + nq - 1], tile.key_end - 1);
  const int32_t* table = a.block_tables + size_t(a.token_seq[t0]) * a.max_blocks_per_seq;
  const int64_t kv_stride = a.kv_stride;

  float q[DPT], acc[DPT];
  const __half* qp = a.q + (size_t(tok) * a.n_heads + h) * HD + part * DPT;
#pragma unroll
  for (int d = 0; d < DPT; ++d) {
    q[d] = active ? __half2float(qp[d]) * a.scale : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  constexpr int kPer = 16 / int(sizeof(KV));  // elements per 16-byte load
  constexpr int kChunks = HD / kPer;         // 16-byte loads per key row
  // The first key any row of this tile sees (its first query's window
  // start), and the key tile holding it. Keys before it are not loaded: in a
  // sliding-window KV group their blocks may be released (table entries
  // -1) or reused by another sequence.
  int k_lo = tile.key_begin;
  if constexpr (kExt)
    if (a.window > 0) k_lo = max(k_lo, a.positions[t0] - a.window + 1);
  const int k_first = k_lo / KT * KT;
  for (int k0 = k_first; k0 <= max_pos; k0 += KT) {
    __syncthreads();
    for (int i = threadIdx.x; i < KT * kChunks; i += blockDim.x) {
      const int j = i / kChunks, c = i % kChunks, p = k0 + j;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
      float k_sc = 0.0f, v_sc = 0.0f;
      if (p >= k_lo && p <= max_pos) {
        const int64_t slot = int64_t(table[p / a.block_size]) * a.block_size + p % a.block_size;
        kv = reinterpret_cast<const uint4*>(static_cast<const KV*>(a.kc) + slot * kv_stride + kvh * HD)[c];
        vv = reinterpret_cast<const uint4*>(static_cast<const KV*>(a.vc) + slot * kv_stride + kvh * HD)[c];
        if constexpr (kIsFp8<KV>) {
          k_sc = a.k_scale[slot * a.scale_stride + kvh];
          v_sc = a.v_scale[slot * a.scale_stride + kvh];
        }
      }
      if constexpr (kIsFp8<KV>) {
        e4m3x16_to_half(kv, k_sc, &ks[j][c * kPer]);
        e4m3x16_to_half(vv, v_sc, &vs[j][c * kPer]);
      } else {
        reinterpret_cast<uint4*>(&ks[j][0])[c] = kv;
        reinterpret_cast<uint4*>(&vs[j][0])[c] = vv;
      }
    }
    __syncthreads();
    float sc[KT];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < KT; ++j) {
      float s = 0.0f;
#pragma unroll
      for (int d = 0; d < DPT; d += 2) {
        const float2 kf = __half22float2(*reinterpret_cast<const __half2*>(&ks[j][part * DPT + d]));
        s = fmaf(q[d], kf.x, fmaf(q[d + 1], kf.y, s));
      }
#pragma unroll
      for (int o = 1; o < TPR; o *= 2) s += RF_SHFL_XOR(s, o);  // the row's threads
      if constexpr (kExt) {
        const bool visible = k0 + j <= pos && (a.window <= 0 || k0 + j > pos - a.window);
        sc[j] = visible ? (a.softcap > 0.0f ? softcap_score(s, a.softcap) : s) : -INFINITY;
      } else {
        sc[j] = (k0 + j <= pos) ? s : -INFINITY;
      }
      tile_max = fmaxf(tile_max, sc[j]);
    }
    if (tile_max == -INFINITY) continue;  // nothing visible to this row in the tile
    const float m_new = fmaxf(m, tile_max);
    const float corr = __expf(m - m_new);
    l *= corr;
#pragma unroll
    for (int d = 0; d < DPT; ++d) acc[d] *= corr;
#pragma unroll
    for (int j = 0; j < KT; ++j) {
      const float p = __expf(sc[j] - m_new);
      l += p;
#pragma unroll
      for (int d = 0; d < DPT; d += 2) {
        const float2 vf = __half22float2(*reinterpret_cast<const __half2*>(&vs[j][part * DPT + d]));
        acc[d] = fmaf(p, vf.x, acc[d]);
        acc[d + 1] = fmaf(p, vf.y, acc[d + 1]);
      }
    }
    m = m_new;
  }
  if (!active) return;
  if (tile.partial >= 0) {  // a part of a split tile: unnormalized sums and (max, sum)
    const size_t slot_row = (size_t(tile.partial) * kQueryTileTokens + size_t(qi)) * a.n_heads + size_t(h);
    float* po = a.part_out + slot_row * HD + part * DPT;
#pragma unroll
    for (int d = 0; d < DPT; ++d) po[d] = acc[d];
    if (part == 0) *reinterpret_cast<float2*>(a.part_ml + slot_row * 2) = make_float2(m, l);
    return;
  }
  const float inv = pos >= 0 ? softmax_out_scale(m, l, sink_logit(a.sinks, h)) : 0.0f;
  __half* o = a.out + (size_t(tok) * a.n_heads + h) * HD + part * DPT;
#pragma unroll
  for (int d = 0; d < DPT; d += 2)
    *reinterpret_cast<__half2*>(&o[d]) = __floats2half2_rn(acc[d] * inv, acc[d + 1] * inv);
}


template <typename KV>
void launch_prefill_kv(const AttnArgs& a, const QueryTile* tiles, int n_tiles, int heads_per_block, bool ext,
                       const LaunchCtx& ctx) {
  const dim3 grid(unsigned(n_tiles) * unsigned(a.n_heads / heads_per_block));
  const int threads = heads_per_block * kPrefillQ * (a.hd > 256 ? kRowThreads<512> : kRowThreads<256>);
  if (a.hd == 512)
    launch(attention_prefill_kernel<512, true, KV>, grid, dim3(threads), 0, ctx, a, tiles, heads_per_block);
  else if (a.hd == 256)
    launch(attention_prefill_kernel<256, true, KV>, grid, dim3(threads), 0, ctx, a, tiles, heads_per_block);
  else if (a.hd == 128 && ext)
    launch(attention_prefill_kernel<128, true, KV>, grid, dim3(threads), 0, ctx, a, tiles, heads_per_block);
  else if (a.hd == 128)
    launch(attention_prefill_kernel<128, false, KV>, grid, dim3(threads), 0, ctx, a, tiles, heads_per_block);
  else if (ext)
    launch(attention_prefill_kernel<64, true, KV>, grid, dim3(threads), 0, ctx, a, tiles, heads_per_block);
  else
    launch(attention_prefill_kernel<64, false, KV>, grid, dim3(threads), 0, ctx, a, tiles, heads_per_block);
}

// The parts of split tiles summed (QuerySplit): a block per (split tile,
// token of it), a thread per 4 dims of a head at a time. Each part weighs
// exp(m_part - max) into the softmax's sum (with the head's sink term,
// softmax_sink.h); parts that saw none of a row's keys (max -inf) weigh
// nothing; padding tokens output 0.
__global__ void prefill_combine_kernel(const QuerySplit* __restrict__ splits, const float* __restrict__ part_out,
                                       const float* __restrict__ part_ml, const int32_t* __restrict__ positions,
                                       const float* __restrict__ sinks, int n_heads, int hd,
                                       __half* __restrict__ out) {
  pdl_wait();
  pdl_trigger();
  const QuerySplit sp = splits[blockIdx.x];
  const int i = int(blockIdx.y);
  if (i >= sp.count) return;
  const int tok = sp.first + i;
  const bool valid = positions[tok] >= 0;
  const size_t slot_rows = size_t(kQueryTileTokens) * size_t(n_heads);
  const int width = n_heads * hd;
  for (int u = 4 * int(threadIdx.x); u < width; u += 4 * int(blockDim.x)) {
    const int h = u / hd;
    const size_t row = size_t(i) * n_heads + size_t(h);
    const float sink = sink_logit(sinks, h);
    float mx = -INFINITY;
    for (int p = 0; p < sp.parts; ++p) mx = fmaxf(mx, part_ml[((sp.partial + p) * slot_rows + row) * 2]);
    mx = sink_max(mx, sink);
    float denom = sink_term(sink, mx);
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int p = 0; p < sp.parts; ++p) {
      const size_t at = (sp.partial + p) * slot_rows + row;
      const float2 ml = *reinterpret_cast<const float2*>(part_ml + at * 2);
      if (ml.x == -INFINITY) continue;
      const float w = __expf(ml.x - mx);
      denom += w * ml.y;
      const float4 v = *reinterpret_cast<const float4*>(part_out + at * hd + size_t(u % hd));
      acc.x += w * v.x;
      acc.y += w * v.y;
      acc.z += w * v.z;
      acc.w += w * v.w;
    }
    const float inv = valid && denom > 0.0f ? 1.0f / denom : 0.0f;
    __half2* o = reinterpret_cast<__half2*>(out + size_t(tok) * width + size_t(u));
    o[0] = __floats2half2_rn(acc.x * inv, acc.y * inv);
    o[1] = __floats2half2_rn(acc.z * inv, acc.w * inv);
  }
}

#if !defined(RF_PORTABLE)
// prefill_mma_tile.h's lane interface on the hardware: shuffles, barriers,
// mma.m16n8k16 and f16 packing.
struct MmaLanes : HwLanes {
  __device__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) const {
    mma_16816(c, a[0], a[1], a[2], a[3], b0, b1);
  }
  __device__ void ldsm_x4(uint32_t (&r)[4], const uint16_t* row) const { ldmatrix_x4(r, row); }
  __device__ void ldsm_x4_trans(uint32_t (&r)[4], const uint16_t* row) const { ldmatrix_x4_trans(r, row); }
  __device__ uint32_t pack2(float lo, float hi) const {
    const __half2 h = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
  }
  __device__ void copy_commit() const { gpu::copy_commit(); }
  __device__ void copy_wait(int n) const {
    if (n > 0) gpu::copy_wait<1>();
    else gpu::copy_wait<0>();
  }
};

// prefill_mma_tile.h's tile data for one block: rows (token, head), head
// fastest, of `hb` query heads from h0; keys from the paged cache.
template <int HD, typename KV>
struct PrefillMmaEnv {
  const AttnArgs& a;
  int t0, nq, hb, h0, kvh;
  const int32_t* table;
  int k_lo, max_pos, window;
  float softcap;

  __device__ int rows() const { return nq * hb; }
  __device__ int pos(int r) const { return a.positions[t0 + r / hb]; }
  __device__ float sink(int r) const { return sink_logit(a.sinks, h0 + r % hb); }
  // Row r (token t0 + r / hb, head h0 + r % hb): its query and output, and
  // with partial() its [token in tile][head] partial slot.
  struct Row {
    const __half2* q = nullptr;
    __half2* out = nullptr;
    float2* part = nullptr;   // unnormalized sums
    float2* stats = nullptr;  // (max, sum)
    float scale = 0.0f;
    __device__ void q_pair(int d, float& v0, float& v1) const {
      const float2 v = __half22float2(q[d / 2]);
      v0 = v.x * scale;
      v1 = v.y * scale;
    }
    __device__ void store(int d, float v0, float v1) const { out[d / 2] = __floats2half2_rn(v0, v1); }
    __device__ void store_partial(int d, float v0, float v1) const { part[d / 2] = make_float2(v0, v1); }
    __device__ void store_stats(float m, float l) const { *stats = make_float2(m, l); }
  };
  __device__ Row row(int r) const {
    const size_t at = (size_t(t0 + r / hb) * a.n_heads + size_t(h0 + r % hb)) * HD;
    Row w;
    w.q = reinterpret_cast<const __half2*>(a.q + at);
    w.out = reinterpret_cast<__half2*>(a.out + at);
    w.scale = a.scale;
    if (part_out) {
      const size_t pr = size_t(r / hb) * a.n_heads + size_t(h0 + r % hb);
      w.part = reinterpret_cast<float2*>(part_out + pr * HD);
      w.stats = reinterpret_cast<float2*>(part_ml + pr * 2);
    }
    return w;
  }
  // Key p's handle: its cache slot (the rows of this KV head there: stage).
  __device__ int64_t key_row(int p) const {
    const int blk = a.block_shift >= 0 ? p >> a.block_shift : p / a.block_size;
    const int off = a.block_shift >= 0 ? p & (a.block_size - 1) : p % a.block_size;
    return int64_t(table[blk]) * a.block_size + off;
  }
  __device__ void stage(int64_t slot, int c, uint16_t* k8, uint16_t* v8) const {
    const int64_t row = slot * a.kv_stride + int64_t(kvh) * HD;  // the KV head's elements in the slot
    if constexpr (kIsFp8<KV>) {
      const uint8_t* kb = static_cast<const uint8_t*>(a.kc) + row + 8 * c;
      const uint8_t* vb = static_cast<const uint8_t*>(a.vc) + row + 8 * c;
      const int64_t scale_at = slot * a.scale_stride + kvh;
      e4m3x8_to_half(*reinterpret_cast<const uint2*>(kb), a.k_scale[scale_at], k8);
      e4m3x8_to_half(*reinterpret_cast<const uint2*>(vb), a.v_scale[scale_at], v8);
    } else {  // in flight until the tile's copy_wait
      copy16_async(k8, static_cast<const __half*>(a.kc) + row + 8 * c);
      copy16_async(v8, static_cast<const __half*>(a.vc) + row + 8 * c);
    }
  }
  float* part_out = nullptr;  // a part of a split tile: its partial slot
  float* part_ml = nullptr;
  __device__ bool partial() const { return part_out != nullptr; }
};

// Grid: one block per (entry, KV head, head chunk), the entry slowest, so
// blocks start in the entries' order (longest first: query_tiles.h).
template <int HD, typename KV>
__global__ void __maxnreg__(prefill_mma::kMaxRegisters<HD>)
    attention_prefill_mma_kernel(AttnArgs a, const QueryTile* __restrict__ tiles, int heads_per_block) {
  extern __shared__ __align__(16) uint16_t prefill_smem[];  // prefill_mma::kSmemBytes<HD>
  pdl_wait();
  pdl_trigger();
  const int group = a.n_heads / a.n_kv, chunks = group / heads_per_block;
  const int per_entry = a.n_kv * chunks;
  const QueryTile tile = tiles[blockIdx.x / per_entry];
  const int kvh = int(blockIdx.x % per_entry) / chunks, chunk = int(blockIdx.x % per_entry) % chunks;
  const int t0 = tile.first, nq = tile.count;
  PrefillMmaEnv<HD, KV> e{a, t0, nq, heads_per_block, kvh * group + chunk * heads_per_block, kvh,
                          a.block_tables + size_t(a.token_seq[t0]) * a.max_blocks_per_seq, 0,
                          min(a.positions[t0 + nq - 1], tile.key_end - 1), a.window, a.softcap};
  // The first key any row sees: the first query's window start, or the
  // part's first key. Keys before it are never loaded (a sliding-window
  // group may have released them).
  e.k_lo = tile.key_begin;
  if (a.window > 0) e.k_lo = max(e.k_lo, a.positions[t0] - a.window + 1);
  if (tile.partial >= 0) {
    const size_t rows = size_t(kQueryTileTokens) * size_t(a.n_heads);
    e.part_out = a.part_out + size_t(tile.partial) * rows * HD;
    e.part_ml = a.part_ml + size_t(tile.partial) * rows * 2;
  }
  MmaLanes x;
  prefill_mma::attend<HD>(e, prefill_smem, x);
}

template <typename KV>
void launch_prefill_mma_kv(const AttnArgs& a, const QueryTile* tiles, int n_tiles, int heads_per_block,
                           const LaunchCtx& ctx) {
  const unsigned blocks = unsigned(n_tiles) * unsigned(a.n_heads / heads_per_block);
  const dim3 block(unsigned(32 * heads_per_block));
  const auto go = [&](auto* kernel, int smem) { launch(kernel, dim3(blocks), block, size_t(smem), ctx, a, tiles, heads_per_block); };
  switch (a.hd) {
    case 256: return go(attention_prefill_mma_kernel<256, KV>, prefill_mma::kSmemBytes<256>);
    case 128: return go(attention_prefill_mma_kernel<128, KV>, prefill_mma::kSmemBytes<128>);
    case 96: return go(attention_prefill_mma_kernel<96, KV>, prefill_mma::kSmemBytes<96>);
    default: return go(attention_prefill_mma_kernel<64, KV>, prefill_mma::kSmemBytes<64>);
  }
}

template <int HD>
void opt_in_prefill_mma() {
  for (auto* kernel : {attention_prefill_mma_kernel<HD, __half>, attention_prefill_mma_kernel<HD, Fp8>}) {
    RF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, prefill_mma::kSmemBytes<HD>));
    // Three 4-warp blocks an SM need the largest shared-memory carveout.
    RF_GPU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      int(cudaSharedmemCarveoutMaxShared)));
  }
}
#endif

}  // namespace

#if !defined(RF_PORTABLE)
static int prefill_mma_key_tile(int head_dim) {
  switch (head_dim) {
    case 256: return prefill_mma::kKeys<256>;
    case 128: return prefill_mma::kKeys<128>;
    case 96: return prefill_mma::kKeys<96>;
    default: return prefill_mma::kKeys<64>;
  }
}
#endif

PrefillTiling prefill_tiling(const Tuning& tuning, int head_dim, int group) {
  PrefillTiling t;
#if !defined(RF_PORTABLE)
  if (tuning.prefill_mma && attention_prefill_mma_supported(head_dim)) {
    t.tensor_cores = true;
    t.key_tile = prefill_mma_key_tile(head_dim);
    t.heads_per_block = std::min(group, prefill_mma::kMaxWarps);  // one warp (16 rows) per head of the block
    while (group % t.heads_per_block) --t.heads_per_block;
    return t;
  }
#else
  (void)tuning;
#endif
  if (!attention_prefill_supported(head_dim)) return t;
  const int row_threads = head_dim > 256 ? kRowThreads<512> : kRowThreads<256>;
  t.key_tile = head_dim > 256 ? kTileK<512> : kTileK<256>;
  // <= 256 threads: 16 queries x 4 heads x 4 threads (2 heads x 8 past 256)
  t.heads_per_block = std::min(group, kPrefillThreads / (kPrefillQ * row_threads));
  while (group % t.heads_per_block) --t.heads_per_block;
  return t;
}

int prefill_blocks_per_sm(const PrefillTiling& t, int head_dim) {
  int blocks = 0;
  const auto occupancy = [&](auto* kernel, int threads, int smem) {
    RF_GPU_CHECK(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem));
  };
  if (t.key_tile == 0) return 0;
#if !defined(RF_PORTABLE)
  if (t.tensor_cores) {
    const int threads = 32 * t.heads_per_block;
    switch (head_dim) {
      case 256: occupancy(attention_prefill_mma_kernel<256, __half>, threads, prefill_mma::kSmemBytes<256>); break;
      case 128: occupancy(attention_prefill_mma_kernel<128, __half>, threads, prefill_mma::kSmemBytes<128>); break;
      case 96: occupancy(attention_prefill_mma_kernel<96, __half>, threads, prefill_mma::kSmemBytes<96>); break;
      default: occupancy(attention_prefill_mma_kernel<64, __half>, threads, prefill_mma::kSmemBytes<64>);
    }
    return blocks;
  }
#endif
  const int threads = t.heads_per_block * kPrefillQ * (head_dim > 256 ? kRowThreads<512> : kRowThreads<256>);
  switch (head_dim) {
    case 512: occupancy(attention_prefill_kernel<512, true, __half>, threads, 0); break;
    case 256: occupancy(attention_prefill_kernel<256, true, __half>, threads, 0); break;
    case 128: occupancy(attention_prefill_kernel<128, false, __half>, threads, 0); break;
    default: occupancy(attention_prefill_kernel<64, false, __half>, threads, 0);
  }
  return blocks;
}

void launch_prefill_combine(const AttentionScratch& scratch, const QuerySplit* splits, int n_splits,
                            const int32_t* positions, const float* sinks, int n_heads, int head_dim, void* out,
                            const LaunchCtx& ctx) {
  RF_CHECK(head_dim % 4 == 0, "prefill combine: head size ", head_dim, " not a multiple of 4");
  launch(prefill_combine_kernel, dim3(unsigned(n_splits), unsigned(kQueryTileTokens)), dim3(256), 0, ctx, splits,
         scratch.tile_out, scratch.tile_ml, positions, sinks, n_heads, head_dim, static_cast<__half*>(out));
}

bool attention_prefill_supported(int head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256 || head_dim == 512;
}

void attention_prefill_device_setup() {
#if !defined(RF_PORTABLE)
  opt_in_prefill_mma<64>();
  opt_in_prefill_mma<96>();
  opt_in_prefill_mma<128>();
  opt_in_prefill_mma<256>();
#endif
}

bool attention_prefill_mma_supported(int head_dim) {
#if defined(RF_PORTABLE)
  return false;
#else
  return head_dim == 64 || head_dim == 96 || head_dim == 128 || head_dim == 256;
#endif
}

void launch_attention_prefill_mma(const AttnArgs& a, const QueryTile* tiles, int n_tiles, int heads_per_block, bool fp8,
                                  const LaunchCtx& ctx) {
#if defined(RF_PORTABLE)
  fail("prefill attention on tensor cores: not in portable builds");
#else
  RF_CHECK(attention_prefill_mma_supported(a.hd) && heads_per_block >= 1 &&
               heads_per_block <= prefill_mma::kMaxWarps && (a.n_heads / a.n_kv) % heads_per_block == 0,
           "prefill attention on tensor cores: head size ", a.hd, ", ", heads_per_block, " heads per block");
  if (fp8) launch_prefill_mma_kv<Fp8>(a, tiles, n_tiles, heads_per_block, ctx);
  else launch_prefill_mma_kv<__half>(a, tiles, n_tiles, heads_per_block, ctx);
#endif
}

void launch_attention_prefill(const AttnArgs& a, const QueryTile* tiles, int n_tiles, int heads_per_block, bool ext,
                              bool fp8, const LaunchCtx& ctx) {
  if (fp8)
    launch_prefill_kv<Fp8>(a, tiles, n_tiles, heads_per_block, ext, ctx);
  else
    launch_prefill_kv<__half>(a, tiles, n_tiles, heads_per_block, ext, ctx);
}

}  // namespace rf::gpu
