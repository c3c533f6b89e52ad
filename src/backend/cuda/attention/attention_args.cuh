// What the attention family's kernel files share (not for other op
// families; attention.cuh declares the family's launchers): the kernel
// arguments (AttnArgs) and the launchers of the prefill, decode and combine
// kernels, which attention.cu's entry point chooses between. Every kernel
// reads an f16 cache or an e4m3 one with row scales (kv_fp8.cuh).
//  - attention.cu: the entry point and the generic fallback kernel (any
//    head size <= 256, any group);
//  - attention_prefill.cu: query tiles of prefill chunks (head_dim 64/128/256
//    on CUDA cores, or on tensor cores: prefill_mma_tile.h);
//  - attention_decode.cu (+ attention_decode.cuh, attention_decode_steps.cuh):
//    the decode kernel and its cluster sum of the split-K slices;
//  - attention_combine.cu: the split-K combine kernel.
// Every kernel is a programmatic dependent launch (gpu.h: pdl_wait before
// any read). Tokens with a negative position (padding) output 0.
#pragma once

#include "backend/cuda/attention/attention.cuh"
#include "backend/cuda/attention/softmax_sink.h"

namespace rf::gpu {

struct AttnArgs {
  const __half* q;
  const void* kc;        // the cache's elements: __half, or e4m3 bytes (kv_fp8.cuh)
  const void* vc;
  const float* k_scale;  // e4m3: row scales [slot, n_kv] (KVLayer)
  const float* v_scale;
  const int32_t* positions;
  const int32_t* token_seq;
  const int32_t* block_tables;
  int max_blocks_per_seq, block_size;
  int block_shift;  // log2(block_size) when it is a power of two, else -1
  int n_heads, n_kv, hd;
  // Elements from one cache slot to the next in K and V, and scales from
  // one slot's to the next (KVLayer::slot_elems / slot_scales: n_kv * hd
  // and n_kv, or the widest layer's where layers of other widths share the
  // arrays).
  int kv_stride, scale_stride;
  float scale;
  // Model-family extras (kernels' kExt variants; the generic kernel always):
  int window;        // > 0: a query at pos sees keys pos - window < j <= pos
  float softcap;     // > 0: scores s become softcap * tanh(s / softcap)
  // [n_heads] f32 or null: each query head's sink logit in the softmax's
  // denominator (AttentionParams::sinks; softmax_sink.h), folded in by every
  // kernel's finalization and every sum of split parts.
  const float* sinks;
  int head_chunks;   // decode: blocks per KV head, each for <= 8 of its query heads
  int n_splits, split_len;
  const int32_t* split_len_dev;  // when set: keys per split for this step (graph-stable launch shape)
  __half* out;
  float* part_out;
  float* part_ml;
  // Decode: the token of each blockIdx.x (a mixed step's single-token
  // sequences, StepMeta::decode_tokens); null: blockIdx.x itself. Split
  // partials are indexed by blockIdx.x.
  const int32_t* tokens;
  // Decode with n_splits > 1 (CUDA): the splits of one (token, KV head
  // [chunk]) run as one thread-block cluster whose blocks sum them through
  // distributed shared memory (no combine kernel); one token's output may
  // then also go to 8-bit quants (xq, xds: act_q8's layout; null: not).
  bool cluster;
  int8_t* xq;
  float2* xds;
};

// Query heads one decode block holds (more per KV head: head chunks).
constexpr int kDecodeMaxHeads = 8;

// Scores soft-capped as the model asks (only for keys in range).
__device__ __forceinline__ float softcap_score(float s, float cap) { return cap * tanhf(s / cap); }

// Prefill: a block per (tile, KV head, group / heads_per_block), the tile
// slowest; `tiles` (StepMeta::q_tiles) may be parts of split tiles over key
// ranges at multiples of 32 (a.part_out / a.part_ml: AttentionScratch::
// tile_out / tile_ml, summed by launch_prefill_combine); head_dim 64, 128
// or 256. ext: the window / soft-cap variant (always for head_dim 256).
bool attention_prefill_supported(int head_dim);
void launch_attention_prefill(const AttnArgs& a, const QueryTile* tiles, int n_tiles, int heads_per_block, bool ext,
                              bool fp8, const LaunchCtx& ctx);
// The tensor-core prefill kernel (prefill_mma_tile.h; CUDA, head_dim 64,
// 96, 128 or 256): a block per (tile, KV head, group / heads_per_block),
// heads_per_block <= 8 (one warp each); tiles may be parts of split tiles
// (a.part_out / a.part_ml: AttentionScratch::tile_out / tile_ml), which
// launch_prefill_combine sums afterwards.
bool attention_prefill_mma_supported(int head_dim);
void attention_prefill_device_setup();  // its shared-memory opt-ins (attention_device_setup)
void launch_attention_prefill_mma(const AttnArgs& a, const QueryTile* tiles, int n_tiles, int heads_per_block, bool fp8,
                                  const LaunchCtx& ctx);
void launch_prefill_combine(const AttentionScratch& scratch, const QuerySplit* splits, int n_splits,
                            const int32_t* positions, const float* sinks, int n_heads, int head_dim, void* out,
                            const LaunchCtx& ctx);

// The decode kernel's shared-memory opt-ins (attention_device_setup).
void attention_decode_device_setup();
// Decode: grid (tokens, KV heads * a.head_chunks, splits); head_dim 64 or
// 128 (and 256 on CUDA), groups of more than 8 query heads per KV head in
// chunks of 8 (attention_decode_supported). ext: the window / soft-cap /
// head-chunk variant (always for head_dim 256 or more than 8 heads).
// fp8: the cache holds e4m3 rows with scales. With splits, the combine
// kernel follows, unless a.cluster (then the splits are 2..kMaxDecodeCluster).
bool attention_decode_supported(int head_dim);
void launch_attention_decode(dim3 grid, const AttnArgs& a, bool ext, bool fp8, const LaunchCtx& ctx);
// Sums the splits' partial results into out (n_splits > 1): rows
// 0..n_rows of the partials, for the tokens `tokens` lists (null: row i is
// token i); sinks as AttnArgs::sinks.
void launch_attention_combine(const AttentionScratch& scratch, const int32_t* positions, const int32_t* tokens,
                              const float* sinks, int n_rows, int n_heads, int head_dim, int n_splits, void* out,
                              const LaunchCtx& ctx);

}  // namespace rf::gpu
