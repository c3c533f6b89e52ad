// Paged attention over the KV cache (f16, or e4m3 rows with scales:
// --kv-cache-dtype fp8), causal, with GQA: the entry point gpu::attention(),
// which picks a kernel, and the generic fallback kernel.
// One pass over the keys with an online softmax; with several splits
// (flash-decoding for long contexts) each block covers a slice of the keys
// and the slices are summed (attention_decode.cu) by a second kernel or, on
// CUDA with up to Tuning::attention_cluster slices, by the decode
// kernel's own blocks as one thread-block cluster.
//  - prefill batches with head_dim 64/128/256/512: attention_prefill.cu;
//  - everything else with head_dim 64/128 (and 256 on CUDA), decode steps
//    above all: attention_decode.cu;
//  - other head sizes (up to 512: Gemma 4's full-attention layers decode
//    here, split-K and combined): attention_kernel below.
// A layer narrower than the cache's widest (Gemma 4) reads its K/V rows
// the widest layer's stride apart (KVLayer::slot_stride: AttnArgs::kv_stride).
// Every kernel honours a sliding window and logit soft-capping (Gemma) and
// attention sinks (gpt-oss: folded in at each row's finalization and in
// every sum of split parts, softmax_sink.h);
// the tuned ones in a separate instantiation (kExt), so models without
// them run the same code as before.
#include <algorithm>

#include "backend/cuda/attention/attention_args.cuh"
#include "backend/cuda/attention/kv_fp8.cuh"

namespace rf::gpu {
namespace {

// Keys per K/V tile. Staged as f32, head size 256 needs 64 KB for K and V
// at 32 keys, all of an AMD compute unit's LDS: the portable variant takes 16.
// Heads past 256 (Gemma 4's 512) take half as many (tile_keys).
#ifdef RF_PORTABLE
constexpr int kTileKeys = 16;
#else
constexpr int kTileKeys = 32;
#endif
constexpr int kMaxHeadDim = 512;
constexpr int kMaxDimsPerLane = kMaxHeadDim / RF_WARP_SIZE;  // head dims per lane (device code)
constexpr int kMaxWarps = 8;        // one per query head of the group, at most

// Keys per staged tile of attention_kernel at head size hd.
constexpr int tile_keys(int hd) { return hd > 256 ? kTileKeys / 2 : kTileKeys; }

// Dynamic shared memory of attention_kernel for head_dim hd and `warps` warps.
constexpr size_t generic_smem_bytes(int hd, int warps) {
  return sizeof(float) * (2 * tile_keys(hd) * (hd + 1) + warps * (hd + tile_keys(hd)));
}
constexpr size_t kGenericMaxSmem =
    std::max(generic_smem_bytes(256, kMaxWarps), generic_smem_bytes(kMaxHeadDim, kMaxWarps));



// Generic fallback: a block per (token, KV head, split), a warp per query
// head of the group (in turns of the block's warps); K/V tiles of n_keys
// (tile_keys(hd)) keys staged as f32 in shared memory (e4m3 rows times
// their scales), scores one key per lane.
template <typename KV>
__global__ void attention_kernel(AttnArgs a, int n_keys) {
  extern __shared__ float smem[];
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int lane = threadIdx.x % RF_WARP_SIZE, warp = threadIdx.x / RF_WARP_SIZE;
  const int n_warps = blockDim.x / RF_WARP_SIZE;
  const int hd = a.hd, group = a.n_heads / a.n_kv;
  const int kstride = hd + 1;  // padded rows: no bank conflicts across keys
  float* ks = smem;                             // [n_keys][hd + 1]
  float* vs = ks + n_keys * kstride;            // [n_keys][hd + 1]
  float* qs = vs + n_keys * kstride;            // [n_warps][hd]
  float* ps = qs + n_warps * hd;                // [n_warps][n_keys]

  pdl_wait();
  pdl_trigger();
  const int pos = a.positions[t];
  const int n_ctx = pos + 1;
  const int split_len = a.split_len_dev ? *a.split_len_dev : a.split_len;
  const int k_begin = max(split * split_len, a.window > 0 ? pos - a.window + 1 : 0);
  const int k_end = min(n_ctx, split * split_len + split_len);
  const int32_t* table = a.block_tables + size_t(a.token_seq[t]) * a.max_blocks_per_seq;
  const int64_t kv_stride = a.kv_stride;
  const KV* kc = static_cast<const KV*>(a.kc);
  const KV* vc = static_cast<const KV*>(a.vc);

  for (int h0 = 0; h0 < group; h0 += n_warps) {
    const int h = kvh * group + h0 + warp;
    const bool active = h0 + warp < group;
    if (active)
      for (int d = lane; d < hd; d += RF_WARP_SIZE)
        qs[warp * hd + d] = __half2float(a.q[(size_t(t) * a.n_heads + h) * hd + d]) * a.scale;
    float m = -INFINITY, l = 0.0f;
    float acc[kMaxDimsPerLane];
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) acc[i] = 0.0f;

    for (int k0 = k_begin; k0 < k_end; k0 += n_keys) {
      const int nk = min(n_keys, k_end - k0);
      __syncthreads();
      if (hd % 8 == 0) {  // 8 elements per load (16 bytes of f16, 8 of e4m3)
        const int chunks = hd / 8;
        for (int i = threadIdx.x; i < nk * chunks; i += blockDim.x) {
          const int j = i / chunks, c = i % chunks, p = k0 + j;
          const int64_t slot = int64_t(table[p / a.block_size]) * a.block_size + p % a.block_size;
          float kf[8], vf[8];
          kv_unpack8(kc + slot * kv_stride + kvh * hd + 8 * c, kf);
          kv_unpack8(vc + slot * kv_stride + kvh * hd + 8 * c, vf);
          float k_mul = 1.0f, v_mul = 1.0f;
          if constexpr (kIsFp8<KV>) {
            k_mul = a.k_scale[slot * a.scale_stride + kvh] * kFp8HalfScale;
            v_mul = a.v_scale[slot * a.scale_stride + kvh] * kFp8HalfScale;
          }
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            ks[j * kstride + 8 * c + e] = kIsFp8<KV> ? kf[e] * k_mul : kf[e];
            vs[j * kstride + 8 * c + e] = kIsFp8<KV> ? vf[e] * v_mul : vf[e];
          }
        }
      } else {
        for (int i = threadIdx.x; i < nk * hd; i += blockDim.x) {
          const int j = i / hd, d = i % hd, p = k0 + j;
          const int64_t slot = int64_t(table[p / a.block_size]) * a.block_size + p % a.block_size;
          const int64_t at = slot * kv_stride + kvh * hd + d;
          if constexpr (kIsFp8<KV>) {
            ks[j * kstride + d] = e4m3_to_float(kc[at].bits) * a.k_scale[slot * a.scale_stride + kvh];
            vs[j * kstride + d] = e4m3_to_float(vc[at].bits) * a.v_scale[slot * a.scale_stride + kvh];
          } else {
            ks[j * kstride + d] = __half2float(kc[at]);
            vs[j * kstride + d] = __half2float(vc[at]);
          }
        }
      }
      __syncthreads();
      if (!active) continue;
      // Scores: lane j scores key j of the tile (j, j + warp size, ...).
      float sc = -INFINITY;
      for (int j = lane; j < nk; j += RF_WARP_SIZE) {
        float s = 0.0f;
        for (int d = 0; d < hd; ++d) s = fmaf(qs[warp * hd + d], ks[j * kstride + d], s);
        if (a.softcap > 0.0f) s = softcap_score(s, a.softcap);
        ps[warp * n_keys + j] = s;
        sc = fmaxf(sc, s);
      }
      const float m_new = fmaxf(m, warp_max(sc));
      float psum = 0.0f;
      for (int j = lane; j < nk; j += RF_WARP_SIZE) {
        const float p = __expf(ps[warp * n_keys + j] - m_new);
        ps[warp * n_keys + j] = p;
        psum += p;
      }
      psum = warp_sum(psum);
      const float corr = __expf(m - m_new);
      l = l * corr + psum;
      m = m_new;
      RF_SYNCWARP();
#pragma unroll
      for (int i = 0; i < kMaxDimsPerLane; ++i) {
        const int d = lane + i * RF_WARP_SIZE;
        if (d < hd) {
          float v = acc[i] * corr;
          for (int j = 0; j < nk; ++j) v = fmaf(ps[warp * n_keys + j], vs[j * kstride + d], v);
          acc[i] = v;
        }
      }
    }
    if (!active) continue;
    if (a.n_splits == 1) {
      const float inv = pos >= 0 ? softmax_out_scale(m, l, sink_logit(a.sinks, h)) : 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxDimsPerLane; ++i) {
        const int d = lane + i * RF_WARP_SIZE;
        if (d < hd) a.out[(size_t(t) * a.n_heads + h) * hd + d] = __float2half_rn(acc[i] * inv);
      }
    } else {
      const size_t base = (size_t(t) * a.n_heads + h) * a.n_splits + split;
#pragma unroll
      for (int i = 0; i < kMaxDimsPerLane; ++i) {
        const int d = lane + i * RF_WARP_SIZE;
        if (d < hd) a.part_out[base * hd + d] = acc[i];
      }
      if (lane == 0) {
        a.part_ml[base * 2] = m;
        a.part_ml[base * 2 + 1] = l;
      }
    }
  }
}

}  // namespace

void attention_device_setup() {
  // The generic kernel's largest launches (head_dim 256 or 512, 8 warps)
  // need more than the default 48 KB of dynamic shared memory.
  for (const auto kernel : {attention_kernel<__half>, attention_kernel<Fp8>})
    RF_GPU_CHECK(gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, int(kGenericMaxSmem)));
  attention_decode_device_setup();
  attention_prefill_device_setup();
}

int decode_cluster_limit(const Tuning& tuning, int head_dim) {
#ifdef RF_PORTABLE
  (void)tuning;
  (void)head_dim;
  return 0;  // no clusters
#else
  if (tuning.attention_cluster < 2) return 0;
  const int slices = head_dim == 256 ? tuning.attention_cluster_hd256 : tuning.attention_cluster;
  return std::clamp(slices, 2, kMaxDecodeCluster);
#endif
}

bool decode_cluster_sums(const LaunchCtx& ctx, int n_splits, int head_dim) {
  return n_splits >= 2 && n_splits <= decode_cluster_limit(ctx.tuning, head_dim);
}

void attention(const void* q, const KVLayer& cache, const StepMeta& m, int n_tokens, const AttentionParams& p,
               int n_splits, const AttentionScratch& scratch, void* out, const LaunchCtx& ctx) {
  if (n_tokens == 0) return;
  const int group_size = p.n_heads / std::max(p.n_kv_heads, 1);
  // Multi-token steps: query tiles on tensor cores or on the CUDA-core tile kernel.
  const bool prefill = m.max_new_tokens > 1 && m.q_tiles && m.n_q_tiles > 0 && p.n_heads % p.n_kv_heads == 0;
  const PrefillTiling tiling = prefill_tiling(ctx.tuning, p.head_dim, group_size);
  const bool prefill_mma = prefill && tiling.tensor_cores;
  const bool tiled = prefill && !tiling.tensor_cores && tiling.key_tile > 0;
  const bool fp8 = cache.type == DType::F8_E4M3;
  RF_CHECK(cache.type == DType::F16 || (fp8 && cache.k_scale && cache.v_scale),
           "cuda attention: KV cache must be f16 or f8_e4m3 with row scales, not ", dtype_name(cache.type));
  RF_CHECK(p.head_dim <= kMaxHeadDim, "cuda attention: head_dim ", p.head_dim, " > ", kMaxHeadDim, " is not supported");
  RF_CHECK(p.n_heads % p.n_kv_heads == 0, "cuda attention: heads not divisible by KV heads");
  RF_CHECK(cache.slot_elems() >= int64_t(p.n_kv_heads) * p.head_dim && cache.slot_scales() >= p.n_kv_heads,
           "cuda attention: KV slots narrower than the attention's KV heads");
  // (16-byte row loads: slots a whole number of 8 elements apart)
  RF_CHECK(p.head_dim % 8 != 0 || cache.slot_elems() % 8 == 0, "cuda attention: KV slot stride ",
           cache.slot_elems(), " not a multiple of 8");
  n_splits = std::max(1, n_splits);
  // A mixed step's single-token sequences take the decode kernel (with
  // splits), the prefill kernel only the multi-token chunks' tiles.
  const bool mixed_decode = (prefill_mma || tiled) && m.decode_tokens && m.n_decode_tokens > 0 &&
                            attention_decode_supported(p.head_dim);
  // No prefill kernel for the head size: the decode or the generic kernel
  // takes every token, a query each.
  const bool per_token = !prefill_mma && !tiled;
  // Rows of split partials. A multi-token step's every token splits only
  // within the scratch, the splits' length from the host (the device's
  // value is for the single-token sequences).
  const int decode_rows = mixed_decode ? m.n_decode_tokens : per_token ? n_tokens : 0;
  if (per_token && prefill && decode_rows > scratch.max_tokens) n_splits = 1;
  RF_CHECK(n_splits == 1 || (n_splits <= scratch.max_splits && decode_rows <= scratch.max_tokens),
           "cuda attention: split scratch too small");
  const int group = p.n_heads / p.n_kv_heads;
  // One warp (of the device's width) per query head of the group, at least 64 threads.
  const int threads = std::max(64, ctx.warp_size * std::min(group, kMaxWarps));
  const int max_warps = threads / ctx.warp_size;
  const size_t smem = generic_smem_bytes(p.head_dim, max_warps);
  AttnArgs a;
  a.q = static_cast<const __half*>(q);
  a.kc = cache.k;
  a.vc = cache.v;
  a.k_scale = cache.k_scale;
  a.v_scale = cache.v_scale;
  a.positions = m.positions;
  a.token_seq = m.token_seq;
  a.block_tables = m.block_tables;
  a.max_blocks_per_seq = m.max_blocks_per_seq;
  a.block_size = cache.block_size;
  a.block_shift = -1;
  for (int sh = 0; sh < 31; ++sh)
    if (cache.block_size == (1 << sh)) a.block_shift = sh;
  a.n_heads = p.n_heads;
  a.n_kv = p.n_kv_heads;
  a.hd = p.head_dim;
  a.kv_stride = int(cache.slot_elems());
  a.scale_stride = int(cache.slot_scales());
  a.scale = p.scale;
  a.window = p.window;
  a.softcap = p.softcap;
  a.sinks = p.sinks;
  a.head_chunks = (group_size + kDecodeMaxHeads - 1) / kDecodeMaxHeads;
  // The tuned kernels' variant with window, soft-cap and head chunks.
  const bool ext = p.window > 0 || p.softcap > 0.0f || p.head_dim >= 256 || a.head_chunks > 1;
  a.n_splits = n_splits;
  a.split_len_dev = nullptr;
  // Keys per split: this step's value from the device when the backend
  // provides it, else the context capacity divided evenly.
  const int capacity = m.max_blocks_per_seq * cache.block_size;
  a.split_len = (capacity + n_splits - 1) / n_splits;
  a.split_len_dev = n_splits > 1 && !(per_token && prefill) ? m.attn_split_len : nullptr;
  a.out = static_cast<__half*>(out);
  a.part_out = scratch.partial_out;
  a.part_ml = scratch.partial_ml;
  a.tokens = nullptr;
  a.cluster = false;
  a.xq = nullptr;
  a.xds = nullptr;
  // The decode kernel's splits summed in a cluster of their blocks
  // (Tuning::attention_cluster) rather than by the combine kernel.
  const bool cluster = decode_cluster_sums(ctx, n_splits, p.head_dim);
  if (prefill_mma || tiled) {
    int n_tiles = m.n_q_tiles;
    if (mixed_decode) {
      AttnArgs d = a;
      d.tokens = m.decode_tokens;
      d.cluster = cluster;
      launch_attention_decode(dim3(unsigned(m.n_decode_tokens), unsigned(p.n_kv_heads), unsigned(n_splits)), d, ext,
                              fp8, ctx);
      if (n_splits > 1 && !cluster)
        launch_attention_combine(scratch, m.positions, m.decode_tokens, p.sinks, m.n_decode_tokens, p.n_heads,
                                 p.head_dim, n_splits, out, ctx);
      n_tiles = m.n_prompt_tiles;
    }
    if (n_tiles == 0) return;
    // Tiles split over their keys (query_tiles.h): parts leave partial
    // results, which the combine kernel sums into out.
    RF_CHECK(m.n_q_splits == 0 || scratch.tile_out, "cuda attention: no scratch for split prefill tiles");
    AttnArgs pa = a;
    pa.part_out = scratch.tile_out;
    pa.part_ml = scratch.tile_ml;
    if (prefill_mma)
      launch_attention_prefill_mma(pa, m.q_tiles, n_tiles, tiling.heads_per_block, fp8, ctx);
    else
      launch_attention_prefill(pa, m.q_tiles, n_tiles, tiling.heads_per_block, ext, fp8, ctx);
    if (m.n_q_splits > 0)
      launch_prefill_combine(scratch, m.q_splits, m.n_q_splits, m.positions, p.sinks, p.n_heads, p.head_dim, out,
                             ctx);
    return;
  }
  const dim3 grid(unsigned(n_tokens), unsigned(p.n_kv_heads), unsigned(n_splits));
  if (attention_decode_supported(p.head_dim)) {  // any token works; it is built for one per sequence
    if (cluster) {
      a.cluster = true;
      // One token whose GEMV reads 8-bit quants: the cluster writes them.
      const int width = p.n_heads * p.head_dim;
      if (n_tokens == 1 && act_q8_fusable(ctx, 1, width)) {
        a.xq = act_q8_quants(ctx.act_q8);
        a.xds = act_q8_scales(ctx.act_q8);
      }
      launch_attention_decode(grid, a, ext, fp8, ctx);
      if (a.xq) act_q8_record(ctx, out, width);
      return;
    }
    launch_attention_decode(grid, a, ext, fp8, ctx);
  } else if (fp8) {
    launch(attention_kernel<Fp8>, grid, dim3(threads), smem, ctx, a, tile_keys(p.head_dim));
  } else {
    launch(attention_kernel<__half>, grid, dim3(threads), smem, ctx, a, tile_keys(p.head_dim));
  }
  if (n_splits > 1)
    launch_attention_combine(scratch, m.positions, nullptr, p.sinks, n_tokens, p.n_heads, p.head_dim, n_splits, out,
                             ctx);
}

}  // namespace rf::gpu
