// The RoPE family's launchers (rope_kv.cu): rotary embedding of q and k
// with the K/V store into the paged cache, alone or after the per-head
// q/k RMSNorms; RoPE of q alone (shared-KV layers).
#pragma once

#include "backend/backend.h"
#include "backend/cuda/gpu.h"

namespace rf::gpu {

// RoPE on q and k (f16, in place) and K/V store into the paged cache (f16,
// or e4m3 with row scales), at the cache's slot strides.
void rope_store_kv(void* q, void* k, const void* v, const StepMeta& m, int n_tokens, int n_heads, const RopeParams& rope,
                   const KVLayer& cache, const LaunchCtx& ctx);
// RoPE on q alone (f16, in place), as rope_store_kv turns it; nothing stored.
void rope_q(void* q, const StepMeta& m, int n_tokens, int n_heads, int head_dim, const RopeParams& rope,
            const LaunchCtx& ctx);
// The same after per-head RMSNorms of q_raw and k_raw (weights wq, wk) into
// q and k (Backend::qk_norm_rope_store_kv); f16 cache, heads whose half is
// a whole number of warps and at most 128 (qk_norm_rope_fusable).
bool qk_norm_rope_fusable(int head_dim, int warp_size);
void qk_norm_rope_store_kv(const void* q_raw, const float* wq, const void* k_raw, const float* wk, float eps, void* q,
                           void* k, const void* v, const StepMeta& m, int n_tokens, int n_heads,
                           const RopeParams& rope, const KVLayer& cache, const LaunchCtx& ctx);

}  // namespace rf::gpu
