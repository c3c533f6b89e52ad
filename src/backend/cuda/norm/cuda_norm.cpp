// CudaBackend's norm ops: RMSNorm, the q/k head norms in one launch, and the
// residual add + RMSNorm with and without the post-norm of the added rows
// (norm.cuh), which hand over their row's 8-bit quants where they wrote
// them (Handoff; gpu.h: LaunchCtx).
#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/norm/norm.cuh"

namespace rf {

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  OpTimer timer(profiler(), "rms_norm");
  RF_CHECK((x.type == DType::F32 || x.type == DType::F16) && w.type == DType::F32 && w.cols() == x.cols() &&
               (out.type == DType::F32 || out.type == DType::F16) && out.cols() == x.cols() && out.rows() >= x.rows(),
           "cuda rms_norm: bad inputs");
  gpu::rms_norm(x.data, x.type, w.ptr<float>(), out.data, out.type, int(x.rows()), int(x.cols()), eps, ctx());
}

void CudaBackend::rms_norm_pair(const Tensor& a, const Tensor& wa, Tensor& a_out, const Tensor& b, const Tensor& wb,
                                Tensor& b_out, float eps) {
  const bool f16 = a.type == DType::F16 && b.type == DType::F16 && a_out.type == DType::F16 &&
                   b_out.type == DType::F16 && a.cols() == b.cols();
  if (!f16 || !tuning_.fusions.norm_pair) return Backend::rms_norm_pair(a, wa, a_out, b, wb, b_out, eps);
  RF_CHECK(wa.type == DType::F32 && wb.type == DType::F32 && wa.cols() == a.cols() && wb.cols() == b.cols() &&
               a_out.rows() >= a.rows() && b_out.rows() >= b.rows(),
           "cuda rms_norm_pair: bad inputs");
  OpTimer timer(profiler(), "rms_norm x2");
  gpu::rms_norm_pair_f16(a.data, wa.ptr<float>(), a_out.data, int(a.rows()), b.data, wb.ptr<float>(), b_out.data,
                         int(b.rows()), int(a.cols()), eps, ctx());
}

Handoff CudaBackend::add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) {
  if (!tuning_.fusions.add_norm) return Backend::add_rms_norm(x, y, w, eps, out);
  RF_CHECK(x.type == DType::F32 && y.type == DType::F16 && w.type == DType::F32 && x.numel() == y.numel() &&
               w.cols() == x.cols(),
           "cuda add_rms_norm: bad inputs");
  OpTimer timer(profiler(), "add+rms_norm");
  const uint64_t before = act_q8_version();
  const gpu::LaunchCtx c = ctx_producing();  // one row: its 8-bit quants too, for the GEMV after
  gpu::add_rms_norm(x.ptr<float>(), y.data, nullptr, w.ptr<float>(), out.data, out.type, int(x.rows()), int(x.cols()),
                    eps, c);
  return act_q8_handoff(out, before, c);
}

Handoff CudaBackend::add_post_norm_rms_norm(Tensor& x, const Tensor& y, const Tensor& w_y, const Tensor& w, float eps,
                                            Tensor& out) {
  if (!tuning_.fusions.add_norm) return Backend::add_post_norm_rms_norm(x, y, w_y, w, eps, out);
  RF_CHECK(x.type == DType::F32 && y.type == DType::F16 && w.type == DType::F32 && w_y.type == DType::F32 &&
               x.numel() == y.numel() && w.cols() == x.cols() && w_y.cols() == x.cols(),
           "cuda add_post_norm_rms_norm: bad inputs");
  OpTimer timer(profiler(), "post_norm+add+rms_norm");
  const uint64_t before = act_q8_version();
  const gpu::LaunchCtx c = ctx_producing();
  gpu::add_rms_norm(x.ptr<float>(), y.data, w_y.ptr<float>(), w.ptr<float>(), out.data, out.type, int(x.rows()),
                    int(x.cols()), eps, c);
  return act_q8_handoff(out, before, c);
}

}  // namespace rf
