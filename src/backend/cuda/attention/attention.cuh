// The attention family's launchers: paged attention over the KV cache
// (attention.cu picks the prefill, decode or generic kernel), its scratch
// for split-K partials, how the prefill kernel tiles its queries, and the
// decode kernel's cluster sums; multi-head latent attention over the
// compressed cache (attention_mla.cu). attention_args.cuh holds what the
// family's own files share.
#pragma once

#include "backend/backend.h"
#include "backend/cuda/gpu.h"

namespace rf::gpu {

// One-time setup of the current device (shared-memory opt-ins): the
// backend's constructor calls it once per device, before any launch.
void attention_device_setup();  // attention.cu, attention_decode.cu, attention_prefill.cu

// Paged attention; partial buffers hold split-K results.
struct AttentionScratch {
  float* partial_out = nullptr;  // [max_tokens, n_heads, max_splits, head_dim]
  float* partial_ml = nullptr;   // [max_tokens, n_heads, max_splits, 2]
  int max_splits = 1;
  int max_tokens = 0;
  // Prefill tiles split over their keys (QueryTile::partial): per slot
  // [kQueryTileTokens, n_heads, head_dim] unnormalized outputs and
  // [kQueryTileTokens, n_heads, 2] (max, sum) statistics.
  float* tile_out = nullptr;
  float* tile_ml = nullptr;
  int max_tile_partials = 0;
};
// How the prefill attention kernel that runs for a head size under these
// options (tensor cores, else CUDA cores, else none) takes its query tiles:
// keys per key tile (0: no tile kernel runs) and query heads per block for
// a GQA group; attention() launches by it. prefill_blocks_per_sm: how many
// of its blocks an SM holds at once (an occupancy query; the backend plans
// a step's tiles with both, query_tiles.h).
struct PrefillTiling {
  bool tensor_cores = false;
  int key_tile = 0;
  int heads_per_block = 1;
};
PrefillTiling prefill_tiling(const Tuning& tuning, int head_dim, int group);
int prefill_blocks_per_sm(const PrefillTiling& tiling, int head_dim);
void attention(const void* q, const KVLayer& cache, const StepMeta& m, int n_tokens, const AttentionParams& p,
               int n_splits, const AttentionScratch& scratch, void* out, const LaunchCtx& ctx);
// Whether the decode kernel's n_splits splits are summed by a cluster of
// their blocks (Tuning::attention_cluster; CUDA) instead of the
// combine kernel: clusters of at most kMaxDecodeCluster blocks (past the
// portable 8: an opt-in of the kernels).
constexpr int kMaxDecodeCluster = 16;
// The most slices so summed for a head size (attention_cluster, or
// attention_cluster_hd256 at 256); 0: none.
int decode_cluster_limit(const Tuning& tuning, int head_dim);
bool decode_cluster_sums(const LaunchCtx& ctx, int n_splits, int head_dim);

// ---- attention_mla.cu: multi-head latent attention (backend.h MlaParams),
// f16 activations and compressed cache. Supported: even RoPE dims, a
// latent of at most 1024.
bool mla_supported(const MlaParams& p);
// Backend::mla_rope_store_kv (q, kv f16 in place; cache.k f16 rows).
void mla_rope_store_kv(void* q, void* kv, const float* norm_w, float eps, const StepMeta& m, int n_tokens,
                       const MlaParams& p, const RopeParams& rope, const KVLayer& cache, const LaunchCtx& ctx);
// Backend::attention_mla: absorb (q -> q_lat), attend (q_lat -> o_lat),
// the value projection (o_lat -> out), three launches; attn_k_b and
// attn_v_b f32, f16 or bf16.
void attention_mla(const void* q, const KVLayer& cache, const StepMeta& m, int n_tokens, const MlaParams& p,
                   void* q_lat, void* o_lat, void* out, const LaunchCtx& ctx);

}  // namespace rf::gpu
