// Paged attention, shared by its three files: the kernel arguments (AttnArgs)
// and the launchers of the prefill and decode kernels, which attention.cu's
// entry point chooses between. Not for other op families.
//  - attention.cu: the entry point and the generic fallback kernel (any
//    head size <= 256, any group);
//  - attention_prefill.cu: query tiles of prefill chunks (head_dim 64/128);
//  - attention_decode.cu (+ attention_decode.cuh): the decode kernel and the
//    split-K combine kernel.
// Every kernel is a programmatic dependent launch (gpu.h: pdl_wait before
// any read). Tokens with a negative position (padding) output 0.
#pragma once

#include "backend/cuda/kernels.h"

namespace rf::gpu {

struct AttnArgs {
  const __half* q;
  const __half* kc;
  const __half* vc;
  const int32_t* positions;
  const int32_t* token_seq;
  const int32_t* block_tables;
  int max_blocks_per_seq, block_size;
  int block_shift;  // log2(block_size) when it is a power of two, else -1
  int n_heads, n_kv, hd;
  float scale;
  int n_splits, split_len;
  const int32_t* split_len_dev;  // when set: keys per split for this step (graph-stable launch shape)
  __half* out;
  float* part_out;
  float* part_ml;
};

// Prefill: grid (query tiles, KV heads, group / heads_per_block); `tiles`
// holds (first token, count) per tile (StepMeta::q_tiles).
void launch_attention_prefill(const AttnArgs& a, const int32_t* tiles, int n_tiles, int heads_per_block,
                              const LaunchCtx& ctx);

// The decode kernel's shared-memory opt-ins (attention_device_setup).
void attention_decode_device_setup();
// Decode: grid (tokens, KV heads, splits); head_dim 64 or 128 and at most 8
// query heads per KV head (attention_decode_supported).
bool attention_decode_supported(int head_dim, int group);
void launch_attention_decode(dim3 grid, const AttnArgs& a, const LaunchCtx& ctx);
// Sums the splits' partial results into out (n_splits > 1).
void launch_attention_combine(const AttentionScratch& scratch, const int32_t* positions, int n_tokens, int n_heads,
                              int head_dim, int n_splits, void* out, const LaunchCtx& ctx);

}  // namespace rf::gpu
