// CudaBackend's RoPE ops: rotary embedding with the K/V store into the paged
// cache, alone or after the per-head q/k RMSNorms in the same launch, and of
// q alone (rope.cuh).
#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/rope/rope.cuh"

namespace rf {

void CudaBackend::rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m, const RopeParams& rope,
                                const KVLayer& cache) {
  RF_CHECK(q.type == DType::F16 && k.type == DType::F16 && v.type == DType::F16, "cuda rope: f16 activations");
  OpTimer timer(profiler(), "rope+kv store");
  gpu::rope_store_kv(q.data, k.data, v.data, m, m.n_tokens, int(q.cols() / cache.head_dim), rope, cache, ctx());
}

void CudaBackend::rope_q(Tensor& q, int32_t head_dim, const StepMeta& m, const RopeParams& rope) {
  RF_CHECK(q.type == DType::F16 && head_dim > 0 && q.cols() % head_dim == 0, "cuda rope_q: f16 rows of whole heads");
  OpTimer timer(profiler(), "rope q");
  gpu::rope_q(q.data, m, int(q.rows()), int(q.cols() / head_dim), head_dim, rope, ctx());
}

void CudaBackend::qk_norm_rope_store_kv(const Tensor& q_raw, const Tensor& wq, const Tensor& k_raw, const Tensor& wk,
                                        float eps, Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m,
                                        const RopeParams& rope, const KVLayer& cache) {
  const int hd = cache.head_dim;
  if (!tuning_.fusions.qk_norm_rope || cache.type != DType::F16 || !gpu::qk_norm_rope_fusable(hd, warp_size_))
    return Backend::qk_norm_rope_store_kv(q_raw, wq, k_raw, wk, eps, q, k, v, m, rope, cache);
  RF_CHECK(q_raw.type == DType::F16 && k_raw.type == DType::F16 && q.type == DType::F16 && k.type == DType::F16 &&
               v.type == DType::F16 && wq.type == DType::F32 && wk.type == DType::F32 && wq.cols() == hd &&
               wk.cols() == hd && q_raw.cols() == q.cols() && k_raw.cols() == k.cols() && q.cols() % hd == 0,
           "cuda qk_norm_rope_store_kv: bad inputs");
  OpTimer timer(profiler(), "q/k norms+rope+kv store");
  gpu::qk_norm_rope_store_kv(q_raw.data, wq.ptr<float>(), k_raw.data, wk.ptr<float>(), eps, q.data, k.data, v.data, m,
                             m.n_tokens, int(q.cols() / hd), rope, cache, ctx());
}

}  // namespace rf
