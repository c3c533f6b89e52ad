// CudaBackend's attention ops: paged attention over the KV cache, with the
// decode kernel's key slices chosen per step shape and context
// (decode_slices: a graph variant of the bucket, their length read from
// the device);
// multi-head latent attention over the compressed cache.
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
  return std::max(1, m.decode_slices);  // upload_step's choice (decode_slices)
}

int CudaBackend::decode_slices(int capacity, int n_tokens, int max_context) const {
  // A few blocks (tokens x KV heads x slices) per SM
  // (Tuning::attention_blocks_per_sm) fill the GPU without making each
  // block's key range short; at most one slice per 32 keys.
  const int target = tuning_.attention_blocks_per_sm * n_sms_;
  const int per_slice = std::max(1, n_tokens * std::max(limits_.n_kv_heads, 1));
  const int wanted = (target + per_slice - 1) / per_slice;
  const int slices = std::clamp(std::min(wanted, (capacity + 31) / 32), 1, impl_->attn.max_splits);
  // Slices summed by a cluster of their blocks (no combine kernel): at most
  // a cluster's worth, while the context gives each of them few keys.
  // (Layers of two head sizes: the narrower one's limit too.)
  int cluster = gpu::decode_cluster_limit(tuning_, limits_.head_dim);
  if (limits_.min_head_dim > 0 && limits_.min_head_dim != limits_.head_dim)
    cluster = std::min(cluster, gpu::decode_cluster_limit(tuning_, limits_.min_head_dim));
  if (cluster < 2 || slices <= cluster) return slices;
  const bool long_context = int64_t(max_context) > int64_t(cluster) * tuning_.attention_cluster_max_keys;
  return long_context ? slices : cluster;
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

void CudaBackend::mla_rope_store_kv(Tensor& q, Tensor& kv, const Tensor& kv_norm, float eps, const StepMeta& m,
                                    const RopeParams& rope, const MlaParams& p, const KVLayer& cache) {
  RF_CHECK(q.type == DType::F16 && kv.type == DType::F16 && cache.type == DType::F16 && cache.k &&
               cache.n_kv_heads == 1 && cache.head_dim == p.kv_row() && q.cols() == int64_t(p.n_heads) * p.q_head() &&
               kv.cols() == p.kv_row() && kv_norm.type == DType::F32 && kv_norm.numel() == p.lora &&
               gpu::mla_supported(p),
           "cuda mla_rope_store_kv: f16 q ", q.shape_string(), " and kv ", kv.shape_string(), ", an f16 cache of one ",
           p.kv_row(), "-wide row per slot and an f32 norm of ", p.lora, " expected");
  OpTimer timer(profiler(), "mla rope+kv store");
  gpu::mla_rope_store_kv(q.data, kv.data, kv_norm.ptr<float>(), eps, m, m.n_tokens, p, rope, cache, ctx());
}

void CudaBackend::attention_mla(const Tensor& q, const KVLayer& cache, const StepMeta& m, const MlaParams& p,
                                Tensor& q_lat, Tensor& o_lat, Tensor& out) {
  const int64_t n = m.n_tokens;
  RF_CHECK(q.type == DType::F16 && q_lat.type == DType::F16 && o_lat.type == DType::F16 && out.type == DType::F16 &&
               cache.type == DType::F16 && cache.k && cache.n_kv_heads == 1 && cache.head_dim == p.kv_row() &&
               q.cols() == int64_t(p.n_heads) * p.q_head() && q_lat.numel() >= n * p.n_heads * p.kv_row() &&
               o_lat.numel() >= n * p.n_heads * p.lora && out.cols() == int64_t(p.n_heads) * p.v &&
               p.w_kb.cols() == p.nope && p.w_kb.rows() == int64_t(p.n_heads) * p.lora && p.w_vb.cols() == p.lora &&
               p.w_vb.rows() == int64_t(p.n_heads) * p.v && gpu::mla_supported(p),
           "cuda attention_mla: bad shapes or types (q ", q.shape_string(), ", attn_k_b ", p.w_kb.shape_string(), " ",
           dtype_name(p.w_kb.type), ", attn_v_b ", p.w_vb.shape_string(), ", out ", out.shape_string(), ")");
  OpTimer timer(profiler(), "attention mla");
  gpu::attention_mla(q.data, cache, m, m.n_tokens, p, q_lat.data, o_lat.data, out.data, ctx());
}

}  // namespace rf
