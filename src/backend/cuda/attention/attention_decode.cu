// Decode attention (one query per sequence, the hot path) over the paged KV
// cache (f16, or e4m3 with row scales: kv_fp8.cuh), and the sum of its
// split-K slices (flash-decoding): on CUDA by the slices' blocks as one
// thread-block cluster (decode_cluster_combine, through distributed shared
// memory; Tuning::attention_cluster), else by a kernel that combines
// them. Either may also write one token's row as 8-bit quants for the GEMV
// after it (Fusions::act_q8).
// Owns attention_decode_kernel (head_dim 64/96/128, and 256 on CUDA; up to 8
// query heads per block), the cluster sum of its splits, its launchers and
// its one-time shared-memory opt-ins; the kernel's steps (q, scores and the
// online softmax, P.V, the merge of its four groups) are device functions
// in attention_decode_steps.cuh, the combine kernel is attention_combine.cu's.
// attention.cu chooses between the kernels. The kExt instantiations add a sliding window (the block's keys
// start at the window), logit soft-capping and head chunks (a KV head with
// more than 8 query heads gets a block per 8: blockIdx.y = kvh * chunks +
// chunk); the others are the plain causal kernel.
//
// A block of 128 threads per (token, KV head, split) holds every query head
// of the GQA group (<= 8), so K and V are read from memory once. The block's
// keys go through tiles of kDecTile keys staged as f16 in shared memory
// (padded rows: no bank conflicts), kDecStages deep: the loads of the next
// tiles are in flight while a tile is computed. The block works as four
// groups of 32 lanes ("warps"; two of them per wavefront on 64-wide HIP
// hardware), each taking 8 keys of every tile with its own online softmax
// per head; the groups are merged at the end. Head size 256 with an f16
// cache on CUDA: each group bulk-copies its own 8 K and V rows of a tile (a
// row a lane) and waits on its own mbarriers, no block barrier per tile
// (decode_keys_bulk); otherwise every thread copies 16-byte pieces of the
// tile (cp.async on CUDA) and the block meets at a barrier per tile.
//  - scores, CUDA: one mma.sync m16n8k16 (f16 in, f32 accumulation) per 16
//    dims gives [heads (rows 0-7 of 16)] x [the group's 8 keys]; lane
//    (head = lane / 4) holds keys 2 * (lane % 4) + {0, 1};
//  - scores, RF_PORTABLE (HIP): lane (key jl = lane % 8, part = lane / 8) sums q . k in
//    f32 over the 16-byte chunks part, part + 4, ... of its key for every
//    head (q scaled, f32 in shared memory), then two shuffles add the parts;
//  - P.V, CUDA: on tensor cores, O^T (dims x heads) += V^T . P^T by mma
//    m16n8k8: the probabilities stay in the registers the scores left them
//    in, V^T's fragments come by ldmatrix.trans (decode_tile_mma); an e4m3
//    group first writes its 8 V rows as f16 to its own shared slice;
//  - P.V, RF_PORTABLE: lane (chunk c = lane % (HD / 8), key subgroup) owns
//    8 output dims of every head for its keys; acc in f32 registers.
// The kernel reads as its steps: start the copies of the first tiles (those
// of keys before this token's even before waiting for the kernels before:
// earlier steps stored them), load q, then per tile: issue the copies of
// a later tile, score the group's keys, update the online softmax,
// accumulate V; at the end merge the four groups and store the output (or
// this split's partial result for the combine kernel, or for the cluster's
// sum in its own shared memory).
//  - e4m3 caches (KV = Fp8): tiles staged as stored (half the bytes) with
//    their rows' scales; elements become f16 (kv_fp8.cuh) as the fragments
//    and V rows are read; a key's K scale multiplies its score, its V scale
//    the probability that weighs its row (the softmax sum keeps the
//    unscaled one).
#include <algorithm>

#include "backend/cuda/attention/attention_decode_steps.cuh"
#ifndef RF_PORTABLE  // (gpu.h, above, says)
#include <cooperative_groups.h>
#endif

namespace rf::gpu {
namespace {

using namespace decode_attn;  // attention_decode.cuh

#ifndef RF_PORTABLE
// The splits of one (token, KV head [chunk]) summed inside their thread-block
// cluster (AttnArgs::cluster; the cluster is the grid's z extent, a block's
// rank its split): every block has left its split's result in its own
// cpart (decode_merge_store); after the cluster's barrier, block r takes the
// group's 32-dim output chunks r, r + C, r + 2C, ... (a chunk per warp),
// each lane one dim, and reads the splits' (m, l) and sums from the other
// blocks' shared memory. The splits are weighed and summed with the
// operations of combine_splits in the same order (bit-identical to the
// combine kernel over the same splits), the head's sink included the same
// way. A second barrier keeps every
// block's shared memory alive until the others have read it.
template <int HD>
__device__ __forceinline__ void decode_cluster_combine(const AttnArgs& a, float* cpart, int t, int head0, int pos,
                                                       int group) {
  using L = DecodeDims<HD>;
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const DecodeThread th = decode_thread<HD>();
  const int n_splits = a.n_splits, rank = int(cluster.block_rank());
  constexpr int kChunksPerHead = HD / 32;
  const float* ml = cpart + kDecMaxHeads * L::kWidth;  // m [head], then l [head]
  for (int c = rank + n_splits * th.grp; c < group * kChunksPerHead; c += n_splits * kDecGroups) {
    const int h = c / kChunksPerHead, d = (c % kChunksPerHead) * 32 + th.lane;
    float ms = -INFINITY, ls = 0.0f;
    if (th.lane < n_splits) {
      const float* remote = cluster.map_shared_rank(ml, unsigned(th.lane));
      ms = remote[h];
      ls = remote[kDecMaxHeads + h];
    }
    const float sink = sink_logit(a.sinks, head0 + h);
    const float mx = sink_max(warp_max(ms), sink);
    const float e = ms > -INFINITY ? __expf(ms - mx) : 0.0f;
    float denom = 0.0f;
    if (th.lane < n_splits) denom += e * ls;
    denom = warp_sum(denom) + sink_term(sink, mx);
    const bool valid = pos >= 0 && denom > 0.0f;
    const float w = valid ? e / denom : 0.0f;
    // Every split's value first (every block wrote its own, zeros for no
    // keys): the remote loads in flight together, not one per weight test.
    float part[kMaxDecodeCluster];
#pragma unroll
    for (int sp = 0; sp < kMaxDecodeCluster; ++sp)
      part[sp] = sp < n_splits ? cluster.map_shared_rank(cpart, unsigned(sp))[h * L::kWidth + d] : 0.0f;
    float v = 0.0f;
#pragma unroll
    for (int sp = 0; sp < kMaxDecodeCluster; ++sp) {
      const float ws = __shfl_sync(0xffffffffu, w, sp % RF_WARP_SIZE);
      if (sp < n_splits && ws != 0.0f) v += ws * part[sp];
    }
    const int hq = head0 + h;
    const __half hv = __float2half_rn(v);
    a.out[(size_t(t) * a.n_heads + hq) * HD + d] = hv;
    if (a.xq) quantize32_q8(__half2float(hv), hq * HD + d, a.xq, a.xds);
  }
  cluster.sync();
}
#endif

// ---- the first tiles -----------------------------------------------------------

// How many of the first kDecStages - 1 tiles hold only keys before this
// token's: their K/V were stored by earlier steps, so their copies start
// before the wait for the kernels before (the one just before stores this
// token's K/V, and q).
__device__ __forceinline__ int decode_early_tiles(int k_begin, int k_end, int pos, int n_tiles) {
  int early = 0;
  while (early < kDecStages - 1 && early < n_tiles && min(k_begin + (early + 1) * kDecTile, k_end) <= pos) ++early;
  return early;
}

// ---- the keys of a block, f16 caches on CUDA ------------------------------------

#ifndef RF_PORTABLE
// The block's keys through DecodeGroupTiles (kDecBulk<HD, KV>): the barriers set
// up, the first tiles' copies started (those of keys before this token's
// even before the wait for the kernels before), q loaded, then per tile:
// wait for the group's rows, start the copies of the tile kDecStages - 1
// on (into the stage this group has just finished with), score, softmax and
// P.V for the group's 8 keys. No block barrier inside the loop.
template <int HD, bool kExt>
__device__ __forceinline__ void decode_keys_bulk(const AttnArgs& a, const DecodeSmem<__half>& sm, int t, int kvh,
                                                 int head0, int group, int pos, int k_begin, int k_end, int n_tiles,
                                                 float& m_h, float& l_h, float (&o)[kPvTiles<HD>][4]) {
  using L = DecodeLayout<HD, __half>;
  const DecodeThread th = decode_thread<HD>();
  // A group's barriers are its own: its first lane sets them up.
  if (th.lane == 0) {
#pragma unroll
    for (int st = 0; st < kDecStages; ++st) mbar_init(sm.bars + th.grp * kDecStages + st, 1);
    mbar_init_fence();
  }
  __syncwarp();

  DecodeGroupTiles<HD, __half> tiles;
  tiles.table = a.block_tables + size_t(a.token_seq[t]) * a.max_blocks_per_seq;
  tiles.lane = th.lane;
  tiles.row = th.lane % kDecKeysPerGroup;
  const bool v_lane = th.lane >= kDecKeysPerGroup;
  tiles.src = static_cast<const __half*>(v_lane ? a.vc : a.kc) + size_t(kvh) * HD;
  tiles.dst = (v_lane ? sm.vs : sm.ks) + size_t(th.grp * kDecKeysPerGroup + tiles.row) * L::kRow;
  tiles.bars = sm.bars + th.grp * kDecStages;
  tiles.first = k_begin + th.grp * kDecKeysPerGroup;
  tiles.k_end = k_end;
  tiles.n_tiles = n_tiles;
  tiles.bs = a.block_size;
  tiles.block_shift = a.block_shift;
  tiles.kv_dim = a.kv_stride;

  int first[kDecStages - 1] = {};
#pragma unroll
  for (int st = 0; st < kDecStages - 1; ++st) tiles.fetch(st, first[st]);
  const int early = decode_early_tiles(k_begin, k_end, pos, n_tiles);
#pragma unroll
  for (int st = 0; st < kDecStages - 1; ++st)
    if (st < early) tiles.issue(st, first[st]);
  pdl_wait();
  pdl_trigger();
#pragma unroll
  for (int st = 0; st < kDecStages - 1; ++st)
    if (st >= early && st < n_tiles) tiles.issue(st, first[st]);
  uint4* qf = reinterpret_cast<uint4*>(sm.q);
  decode_load_q<HD>(a.q, a.n_heads, t, head0, group, qf);
  __syncthreads();  // q's fragments (written by the first group) and the first tiles' zeroed rows
  int blk = 0;
  tiles.fetch(kDecStages - 1, blk);
  for (int it = 0; it < n_tiles; ++it) {
    mbar_wait(tiles.bars + it % kDecStages, uint32_t(it / kDecStages) & 1u);
    __syncwarp();  // every lane is done with tile it - 1, whose stage is refilled next
    if (it + kDecStages - 1 < n_tiles) {
      tiles.issue(it + kDecStages - 1, blk);
      tiles.fetch(it + kDecStages, blk);
    }
    const int st = it % kDecStages;
    const int k0 = tiles.first + it * kDecTile;  // this group's first key
    const __half* kt = sm.ks + size_t(st * kDecTile + th.grp * kDecKeysPerGroup) * L::kRow;
    const __half* vt = kt + size_t(kDecStages) * kDecTile * L::kRow;
    decode_tile_mma<HD, kExt, __half>(m_h, l_h, qf, kt, vt, nullptr, nullptr, nullptr, a.scale, a.softcap, k0, k_end,
                                      o);
  }
}
#endif

// ---- the kernels ---------------------------------------------------------------

// Head size 256 stages 107 KB of K/V per block: two blocks per SM.
template <int HD>
constexpr int kDecBlocksPerSM = HD == 256 ? 2 : kDecMinBlocks;

template <int HD, bool kExt, typename KV>
__global__ void __launch_bounds__(kDecThreads, kDecBlocksPerSM<HD>) attention_decode_kernel(AttnArgs a) {
  using L = DecodeLayout<HD, KV>;
  extern __shared__ __align__(16) unsigned char dsmem[];
  const DecodeSmem<KV> sm = decode_smem<HD, KV>(dsmem);

  // Until the wait for the kernels before, only the step's metadata and the
  // K/V of earlier tokens are read (below).
  const int row = blockIdx.x, t = a.tokens ? a.tokens[row] : row, split = blockIdx.z;
  const DecodeThread th = decode_thread<HD>();
  int kvh = blockIdx.y, group = a.n_heads / a.n_kv, head0 = kvh * group;  // this block's query heads
  if constexpr (kExt) {
    kvh = blockIdx.y / a.head_chunks;
    const int chunk = blockIdx.y % a.head_chunks;
    head0 = kvh * group + chunk * kDecMaxHeads;
    group = min(kDecMaxHeads, group - chunk * kDecMaxHeads);
  }
  const int pos = a.positions[t];
  const int split_len = a.split_len_dev ? *a.split_len_dev : a.split_len;
  int k_begin = split * split_len;
  const int k_end = min(pos + 1, k_begin + split_len);
  if constexpr (kExt)
    if (a.window > 0) k_begin = max(k_begin, pos - a.window + 1);
  const int n_tiles = k_end > k_begin ? (k_end - k_begin + kDecTile - 1) / kDecTile : 0;

#ifndef RF_PORTABLE
  float m_h = -INFINITY, l_h = 0.0f;  // softmax state of head gid over this lane's keys
#else
  float m[kDecMaxHeads], l[kDecMaxHeads];  // softmax state of every head over this lane's key
#pragma unroll
  for (int h = 0; h < kDecMaxHeads; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.0f;
  }
#endif
#ifndef RF_PORTABLE
  float o[kPvTiles<HD>][4];  // P.V on tensor cores
#pragma unroll
  for (int i = 0; i < kPvTiles<HD>; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[i][e] = 0.0f;
#else
  float acc[kDecMaxHeads][8];  // P.V on CUDA cores
#pragma unroll
  for (int h = 0; h < kDecMaxHeads; ++h)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[h][e] = 0.0f;
#endif

#ifndef RF_PORTABLE
  if constexpr (kDecBulk<HD, KV>) {
    decode_keys_bulk<HD, kExt>(a, sm, t, kvh, head0, group, pos, k_begin, k_end, n_tiles, m_h, l_h, o);
  } else
#endif
  {
    DecodeTiles<HD, KV> tiles;
    tiles.cc = th.tid % L::kCopyChunks;
    tiles.r0 = th.tid / L::kCopyChunks;
    tiles.table = a.block_tables + size_t(a.token_seq[t]) * a.max_blocks_per_seq;
    tiles.kbase = static_cast<const KV*>(a.kc) + size_t(kvh) * HD + tiles.cc * L::kPerCopy;
    tiles.vbase = static_cast<const KV*>(a.vc) + size_t(kvh) * HD + tiles.cc * L::kPerCopy;
    tiles.ks = sm.ks;
    tiles.vs = sm.vs;
    tiles.kscale = kIsFp8<KV> ? a.k_scale + kvh : nullptr;
    tiles.vscale = kIsFp8<KV> ? a.v_scale + kvh : nullptr;
    tiles.ksc = sm.ksc;
    tiles.vsc = sm.vsc;
    tiles.n_kv = a.scale_stride;
    tiles.k_begin = k_begin;
    tiles.k_end = k_end;
    tiles.n_tiles = n_tiles;
    tiles.bs = a.block_size;
    tiles.block_shift = a.block_shift;
    tiles.kv_dim = a.kv_stride;

    int blk[L::kPasses];  // block-table entries of the next tile to issue
    {
      int first[kDecStages - 1][L::kPasses];
#pragma unroll
      for (int st = 0; st < kDecStages - 1; ++st) tiles.fetch(st, first[st]);
      const int early = decode_early_tiles(k_begin, k_end, pos, n_tiles);
#pragma unroll
      for (int st = 0; st < kDecStages - 1; ++st) {
        if (st < early) {
          tiles.issue(st, first[st]);
          copy_commit();
        }
      }
      pdl_wait();
      pdl_trigger();
#pragma unroll
      for (int st = 0; st < kDecStages - 1; ++st) {
        if (st < early) continue;
        if (st < n_tiles) tiles.issue(st, first[st]);
        copy_commit();
      }
    }
#ifndef RF_PORTABLE
    uint4* qf = reinterpret_cast<uint4*>(sm.q);
    decode_load_q<HD>(a.q, a.n_heads, t, head0, group, qf);
#else
    float* qs = reinterpret_cast<float*>(sm.q);
    decode_load_q<HD>(a.q, a.n_heads, a.scale, t, head0, group, qs);
#endif
    tiles.fetch(kDecStages - 1, blk);
    for (int it = 0; it < n_tiles; ++it) {
      copy_wait<kDecStages - 2>();
      __syncthreads();  // tile `it` visible to all; tile it - 1 done with (its stage is refilled next)
      if (it + kDecStages - 1 < n_tiles) {
        tiles.issue(it + kDecStages - 1, blk);
        tiles.fetch(it + kDecStages, blk);
      }
      copy_commit();

      const int st = it % kDecStages;
      const int k0 = k_begin + it * kDecTile + th.grp * kDecKeysPerGroup;  // this group's first key
      const int tile_row = st * kDecTile + th.grp * kDecKeysPerGroup;  // the group's first staged row
      const KV* kt = sm.ks + size_t(tile_row) * L::kRow;
      const float* ksc = kIsFp8<KV> ? sm.ksc + tile_row : nullptr;
      const float* vsc = kIsFp8<KV> ? sm.vsc + tile_row : nullptr;
      const KV* vt = kt + size_t(kDecStages) * kDecTile * L::kRow;  // the group's V rows
#ifndef RF_PORTABLE
      __half* vh = sm.vh ? sm.vh + size_t(th.grp) * kDecKeysPerGroup * L::kVhRow : nullptr;
      decode_tile_mma<HD, kExt>(m_h, l_h, qf, kt, vt, ksc, vsc, vh, a.scale, a.softcap, k0, k_end, o);
#else
      float corr[kDecMaxHeads];
      bool rescale = false;
      decode_tile_softmax<HD, kExt>(m, l, qs, kt, ksc, vsc, a.softcap, k0, k_end, group, sm.ps, corr, rescale);
      decode_accumulate_v<HD>(acc, corr, rescale, vt, sm.ps, group);
#endif
    }
  }

  // Merge the four groups through shared memory (the stage buffers, now free).
#ifndef RF_PORTABLE
  decode_publish_ml<HD>(m_h, l_h, group, sm.mls);
#else
  decode_publish_ml<HD>(m, l, group, sm.mls);
#endif
  copy_wait<0>();
  __syncthreads();
#ifndef RF_PORTABLE
  decode_stash_mma<HD>(o, group, sm.merge);
  __syncthreads();
  decode_merge_store<HD, 1>(a, sm.mls, sm.merge, sm.cpart, t, row, head0, split, pos, group);
  if (a.cluster) decode_cluster_combine<HD>(a, sm.cpart, t, head0, pos, group);
#else
  decode_stash_acc<HD>(acc, group, sm.merge);
  __syncthreads();
  decode_merge_store<HD, L::kSub>(a, sm.mls, sm.merge, sm.cpart, t, row, head0, split, pos, group);
#endif
}

template <int HD, bool kExt, typename KV>
void opt_in_decode() {
  constexpr size_t bytes = DecodeLayout<HD, KV>::kBytes;
  const auto kernel = attention_decode_kernel<HD, kExt, KV>;
  if constexpr (bytes > 48 * 1024) {
    RF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
#ifndef RF_PORTABLE
    // Several blocks per SM need the largest shared-memory carveout.
    RF_GPU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      int(cudaSharedmemCarveoutMaxShared)));
#endif
  }
#ifndef RF_PORTABLE
  // Clusters of splits past the portable 8 blocks (kMaxDecodeCluster).
  RF_GPU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
#endif
}

// Head size 256 fits the decode kernel's shared memory on CUDA only (107 KB).
#ifdef RF_PORTABLE
constexpr bool kDecode256 = false;
#else
constexpr bool kDecode256 = true;
#endif

template <typename KV>
void opt_in_decode_all() {
  opt_in_decode<128, false, KV>();
  opt_in_decode<96, false, KV>();
  opt_in_decode<64, false, KV>();
  opt_in_decode<128, true, KV>();
  opt_in_decode<96, true, KV>();
  opt_in_decode<64, true, KV>();
  if constexpr (kDecode256) opt_in_decode<256, true, KV>();
}

template <int HD, bool kExt, typename KV>
void launch_decode(dim3 grid, const AttnArgs& a, const LaunchCtx& ctx) {
  constexpr size_t bytes = DecodeLayout<HD, KV>::kBytes;
  // With a.cluster, a cluster per (token, KV head [chunk]): its splits along z.
  launch_in_clusters(attention_decode_kernel<HD, kExt, KV>, grid, dim3(kDecThreads), bytes, ctx,
                     dim3(1, 1, a.cluster ? grid.z : 1), a);
}

template <typename KV>
void launch_decode_kv(dim3 grid, const AttnArgs& a, bool ext, const LaunchCtx& ctx) {
  if (ext) {
    grid.y *= unsigned(a.head_chunks);
    if (a.hd == 256) {
      if constexpr (kDecode256) launch_decode<256, true, KV>(grid, a, ctx);
    } else if (a.hd == 128) {
      launch_decode<128, true, KV>(grid, a, ctx);
    } else if (a.hd == 96) {
      launch_decode<96, true, KV>(grid, a, ctx);
    } else {
      launch_decode<64, true, KV>(grid, a, ctx);
    }
  } else if (a.hd == 128) {
    launch_decode<128, false, KV>(grid, a, ctx);
  } else if (a.hd == 96) {
    launch_decode<96, false, KV>(grid, a, ctx);
  } else {
    launch_decode<64, false, KV>(grid, a, ctx);
  }
}

}  // namespace

void attention_decode_device_setup() {
  opt_in_decode_all<__half>();
  opt_in_decode_all<Fp8>();
}

bool attention_decode_supported(int head_dim) {
  return head_dim == 64 || head_dim == 96 || head_dim == 128 || (kDecode256 && head_dim == 256);
}

void launch_attention_decode(dim3 grid, const AttnArgs& a, bool ext, bool fp8, const LaunchCtx& ctx) {
  if (fp8)
    launch_decode_kv<Fp8>(grid, a, ext, ctx);
  else
    launch_decode_kv<__half>(grid, a, ext, ctx);
}

}  // namespace rf::gpu
