// CudaBackend's attention ops: paged attention over the KV cache, with the
// decode kernel's key slices chosen per step shape (attention_splits,
// decode_slices: fixed per graph bucket, their length read from the device).
#include <algorithm>

#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/attention/attention.cuh"
#include "backend/cuda/cuda_backend_impl.h"

namespace rf {

int CudaBackend::attention_splits(const StepMeta& m) const {
  // Decode steps: a fixed number of key slices (their length is read from
  // the device per step), so that every KV head of every sequence is spread
  // over many blocks. Prefill batches use the tiled kernel instead.
  // A mixed step's single-token sequences take the decode kernel the same
  // way (StepMeta::decode_tokens).
  const int n = m.max_new_tokens > 1 ? m.n_decode_tokens : m.n_tokens;
  if (n > impl_->attn.max_tokens || n == 0) return 1;
  return decode_slices(m.max_blocks_per_seq * m.block_size, n);
}

int CudaBackend::decode_slices(int capacity, int n_tokens) const {
  // A few blocks (tokens x KV heads x slices) per SM
  // (Tuning::attention_blocks_per_sm) fill the GPU without making each
  // block's key range short; at most one slice per 32 keys.
  const int target = tuning_.attention_blocks_per_sm * n_sms_;
  const int per_slice = std::max(1, n_tokens * std::max(limits_.n_kv_heads, 1));
  const int wanted = (target + per_slice - 1) / per_slice;
  const int slices = std::clamp(std::min(wanted, (capacity + 31) / 32), 1, impl_->attn.max_splits);
  // Slices summed by a cluster of their blocks: at most a cluster's worth.
  // (Layers of two head sizes: the narrower one's limit too.)
  int cluster = gpu::decode_cluster_limit(tuning_, limits_.head_dim);
  if (limits_.min_head_dim > 0 && limits_.min_head_dim != limits_.head_dim)
    cluster = std::min(cluster, gpu::decode_cluster_limit(tuning_, limits_.min_head_dim));
  return cluster >= 2 ? std::min(slices, cluster) : slices;
}

Handoff CudaBackend::attention(const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
                               Tensor& out) {
  RF_CHECK(q.type == DType::F16 && out.type == DType::F16, "cuda attention: f16 activations");
  Impl& I = *impl_;
  const int splits = attention_splits(m);
  const char* kind = m.max_new_tokens == 1    ? "attention decode splits "
                     : m.n_decode_tokens > 0 ? "attention mixed, decode splits "
                                             : nullptr;
  OpTimer timer(profiler(), kind ? str(kind, splits) : std::string("attention prefill"));
  RF_CHECK(p.n_heads <= limits_.n_heads && p.head_dim <= limits_.head_dim, "cuda attention: shape exceeds reserve()");
  const uint64_t before = act_q8_version();
  const gpu::LaunchCtx c = ctx_producing();  // one token: its 8-bit quants too, for the GEMV after
  gpu::attention(q.data, cache, m, m.n_tokens, p, splits, I.attn, out.data, c);
  return act_q8_handoff(out, before, c);
}

Handoff CudaBackend::attention_ext(const Tensor& q, const KVLayer& cache, const StepMeta& m,
                                   const AttentionParams& p, Tensor& out) {
  // The same kernels: window, soft-cap and sinks are arguments of every one.
  return attention(q, cache, m, p, out);
}

}  // namespace rf
