// CudaBackend's fused matmul ops and their rules: several weights of one
// activation row in one GEMV launch (matmul_multi; two formats in one
// launch; weights packed side by side in one matmul and a column split),
// gate and up with the GLU in one GEMV (or packed: one matmul over both),
// and one token's output projection with the residual add and the next
// RMSNorm folded into the f16 GEMVs around it (matmul_add_rms_norm, with
// norm gains folded into the consumers' weights at load: fold_norm_gain),
// the norm then left to the consumers, as the returned Handoff says
// (norm_pending), with the 8-bit activations handed in and out as for
// matmul (Handoff::copy).
#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/elementwise/elementwise.cuh"
#include "backend/cuda/matmul/matmul.cuh"

namespace rf {

namespace {
// The fused GEMV paths need a few activation rows, f16 input and weights of
// one type and width.
bool gemv_fusable(const Tensor& x, std::span<const Tensor> ws) {
  if (x.type != DType::F16 || x.rows() > 8 || ws.empty()) return false;
  for (const Tensor& w : ws)
    if (w.type != ws[0].type || w.cols() != ws[0].cols() || w.cols() != x.cols()) return false;
  return true;
}
}  // namespace

Handoff CudaBackend::matmul_multi(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                                  std::span<const Tensor> biases, const Handoff& x_in) {
  RF_CHECK(ws.size() == outs.size(), "matmul_multi: weights and outputs differ in number");
  RF_CHECK(biases.empty() || biases.size() == ws.size(), "matmul_multi: biases and weights differ in number");
  check_handoff(x, x_in, "cuda matmul_multi", true);
  bool same_out = true;
  for (const Tensor& o : outs) same_out = same_out && o.type == outs[0].type;
  gpu::GemvNormFusion norm;
  if (x_in.norm_pending) {
    // matmul_add_rms_norm checked that these weights take the fused GEMV.
    norm.x_rms = true;
    norm.eps = x_in.norm_eps;
    RF_CHECK(gemv_fusable(x, ws) && ws.size() <= 3 && same_out, "cuda matmul_multi: an un-normed row for weights "
             "that cannot norm it");
  }
  if (!gemv_fusable(x, ws) && ws.size() > 1 && x.type == DType::F16 && x.rows() <= 8) {
    // Mixed formats (q4_k_m keeps some layers' V in Q6_K): the run of the
    // first format fuses, the rest goes on its own.
    size_t run = 1;
    while (run < ws.size() && ws[run].type == ws[0].type) ++run;
    Handoff after;
    if (run < ws.size() && two_format_gemv(x, ws, outs, biases, run, x_in, after)) return after;
    if (run < ws.size()) {
      auto part = [&](size_t from, size_t count, const Handoff& in) {
        return matmul_multi(x, ws.subspan(from, count), outs.subspan(from, count),
                            biases.empty() ? biases : biases.subspan(from, count), in);
      };
      return part(run, ws.size() - run, part(0, run, x_in));
    }
  }
  if (packed_matmul(x, ws, outs, biases)) return {};
  if (!gemv_fusable(x, ws) || ws.size() > 3 || !same_out || (!tuning_.fusions.gemv_multi && !norm.x_rms))
    return Backend::matmul_multi(x, ws, outs, biases, x_in);
  OpTimer timer(profiler(),
                profiler() ? str("matmul gemv x", ws.size(), " ", dtype_name(ws[0].type), " n", x.rows(), " k", x.cols())
                           : std::string());
  gpu::GemvSegment segs[3];
  for (size_t i = 0; i < ws.size(); ++i) {
    RF_CHECK(outs[i].cols() == ws[i].rows(), "matmul_multi: output ", i, " has the wrong width");
    const Tensor* bias = biases.empty() || !biases[i].data ? nullptr : &biases[i];
    RF_CHECK(!bias || (bias->type == DType::F32 && bias->cols() == ws[i].rows()), "matmul_multi: bias ", i,
             " must be f32 of the output's width");
    segs[i] = {ws[i].data, outs[i].data, int(ws[i].rows()), bias ? bias->ptr<float>() : nullptr};
  }
  const uint64_t before = act_q8_version();
  const gpu::LaunchCtx c = ctx_reading(x, x_in, "cuda matmul_multi");
  gpu::gemv_segments(ws[0].type, segs, int(ws.size()), nullptr, false, ws[0].row_bytes(), int(x.cols()), x.data,
                     int(x.rows()), outs[0].type, c, norm.x_rms ? &norm : nullptr);
  return act_q8_handoff(x, before, c);
}

bool CudaBackend::two_format_gemv(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                                  std::span<const Tensor> biases, size_t run, const Handoff& x_in, Handoff& x_out) {
  if (x.rows() != 1 || x.type != DType::F16 || ws.size() > 3) return false;
  for (size_t i = run; i < ws.size(); ++i)
    if (ws[i].type != ws[run].type) return false;
  gpu::GemvSegment segs[3];
  for (size_t i = 0; i < ws.size(); ++i) {
    const Tensor* bias = biases.empty() || !biases[i].data ? nullptr : &biases[i];
    if (outs[i].type != DType::F16 || outs[i].cols() != ws[i].rows() || ws[i].cols() != x.cols() ||
        (bias && (bias->type != DType::F32 || bias->cols() != ws[i].rows())))
      return false;
    segs[i] = {ws[i].data, outs[i].data, int(ws[i].rows()), bias ? bias->ptr<float>() : nullptr};
  }
  OpTimer timer(profiler(), profiler() ? str("matmul gemv x", run, " ", dtype_name(ws[0].type), " + x", ws.size() - run,
                                             " ", dtype_name(ws[run].type), " n1 k", x.cols())
                                       : std::string());
  const uint64_t before = act_q8_version();
  const gpu::LaunchCtx c = ctx_reading(x, x_in, "cuda matmul_multi");
  if (!gpu::gemv_segments_two_formats(ws[0].type, segs, int(run), ws[0].row_bytes(), ws[run].type, segs + run,
                                      int(ws.size() - run), ws[run].row_bytes(), int(x.cols()), x.data, c))
    return false;
  x_out = act_q8_handoff(x, before, c);
  return true;
}

bool CudaBackend::packed_matmul(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                                std::span<const Tensor> biases) {
  const int n = int(x.rows());
  if (n <= 8 || ws.size() < 2 || ws.size() > size_t(gpu::ColumnSegments::kMax) || x.type != DType::F16) return false;
  gpu::ColumnSegments segs;
  int width = 0;
  const auto* next = static_cast<const uint8_t*>(ws[0].data);
  for (size_t i = 0; i < ws.size(); ++i) {
    const Tensor* bias = biases.empty() || !biases[i].data ? nullptr : &biases[i];
    if (ws[i].data != next || ws[i].type != ws[0].type || ws[i].cols() != x.cols() || ws[i].rows() % 8 != 0 ||
        outs[i].type != DType::F16 || outs[i].cols() != ws[i].rows() ||
        (bias && (bias->type != DType::F32 || bias->cols() != ws[i].rows())))
      return false;
    next += ws[i].bytes();
    segs.dst[i] = outs[i].data;
    segs.bias[i] = bias ? bias->ptr<float>() : nullptr;
    segs.cols[i] = int(ws[i].rows());
    width += segs.cols[i];
  }
  segs.count = int(ws.size());
  if (size_t(n) * size_t(width) * 2 > impl_->packed_bytes) return false;
  Tensor together = make_tensor(ws[0].data, ws[0].type, x.cols(), width, DeviceKind::CUDA);
  Tensor scratch = make_tensor(impl_->packed_out, DType::F16, width, n, DeviceKind::CUDA);
  matmul(x, together, scratch);
  OpTimer timer(profiler(), "split packed outputs");
  gpu::split_columns_f16(impl_->packed_out, n, width, segs, ctx());
  return true;
}

void CudaBackend::matmul_gate_up_glu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& gate,
                                     Tensor& up, Tensor& out, Activation act, const Handoff& x_in) {
  check_handoff(x, x_in, "cuda matmul_gate_up_glu", true);
  if (act == Activation::SiLUClampedOai) {
    // The fused GEMV epilogues and the packed GLU compute SwiGLU and GeGLU:
    // the clamped one runs as gate and up (one matmul_multi, which also
    // takes a pending norm) and then swiglu_oai.
    const Tensor ws[2] = {w_gate, w_up};
    Tensor outs[2] = {gate, up};
    matmul_multi(x, ws, outs, {}, x_in);
    swiglu_oai(gate, up, out);
    return;
  }
  const Tensor pair[2] = {w_gate, w_up};
  gpu::GemvNormFusion norm;
  if (x_in.norm_pending) {
    norm.x_rms = true;  // (matmul_add_rms_norm checked these weights)
    norm.eps = x_in.norm_eps;
    RF_CHECK(gemv_fusable(x, pair) && w_gate.rows() == w_up.rows() && out.type == DType::F16,
             "cuda matmul_gate_up_glu: an un-normed row for weights that cannot norm it");
  }
  if (!norm.x_rms && packed_gate_up(x, w_gate, w_up, out, act)) return;
  if (!gemv_fusable(x, pair) || w_gate.rows() != w_up.rows() || out.type != DType::F16 ||
      (!tuning_.fusions.gemv_glu && !norm.x_rms))
    return Backend::matmul_gate_up_glu(x, w_gate, w_up, gate, up, out, act, x_in);
  const bool gelu = act == Activation::GeluTanh;
  OpTimer timer(profiler(), profiler() ? str("matmul gemv gate*up", gelu ? " gelu " : " ", dtype_name(w_gate.type),
                                             " n", x.rows(), " m", w_gate.rows(), " k", x.cols())
                                       : std::string());
  const gpu::GemvSegment seg{w_gate.data, out.data, int(w_gate.rows())};
  gpu::gemv_segments(w_gate.type, &seg, 1, w_up.data, gelu, w_gate.row_bytes(), int(x.cols()), x.data, int(x.rows()),
                     DType::F16, ctx_reading(x, x_in, "cuda matmul_gate_up_glu"), norm.x_rms ? &norm : nullptr);
}

bool CudaBackend::packed_gate_up(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& out,
                                 Activation act) {
  const int n = int(x.rows()), ff = int(w_gate.rows());
  const bool adjacent = static_cast<const uint8_t*>(w_gate.data) + w_gate.bytes() == w_up.data &&
                        w_up.type == w_gate.type && w_up.rows() == ff && w_up.cols() == w_gate.cols();
  if (!tuning_.fusions.packed_gate_up || n <= 8 || !adjacent || x.type != DType::F16 || out.type != DType::F16 ||
      out.cols() != ff || size_t(n) * size_t(2 * ff) * 2 > impl_->packed_bytes)
    return false;
  Tensor together = make_tensor(w_gate.data, w_gate.type, w_gate.cols(), 2 * int64_t(ff), DeviceKind::CUDA);
  Tensor scratch = make_tensor(impl_->packed_out, DType::F16, 2 * int64_t(ff), n, DeviceKind::CUDA);
  matmul(x, together, scratch);
  OpTimer timer(profiler(), act == Activation::GeluTanh ? "geglu (packed)" : "swiglu (packed)");
  gpu::glu_packed(impl_->packed_out, n, ff, out.data, act == Activation::GeluTanh, ctx());
  return true;
}

Handoff CudaBackend::matmul_add_rms_norm(const Tensor& x, const Tensor& w, Tensor& out, Tensor& residual,
                                         const Tensor& norm_w, float eps, Tensor& next,
                                         std::span<const Tensor> consumers, const Handoff& x_in) {
  const int m = int(w.rows()), k = int(w.cols());
  // One token, f16 weights on both sides, the norm's gain folded into the
  // consumers: the projection adds its rows to the residual and writes the
  // new residual as f16 into next; the consumers' GEMVs norm it.
  bool fuse = x.rows() == 1 && x.type == DType::F16 && x.cols() == k && w.type == DType::F16 &&
              residual.type == DType::F32 && residual.rows() == 1 && residual.cols() == m &&
              next.type == DType::F16 && next.rows() >= 1 && next.cols() == m && out.type == DType::F16 &&
              folded_gains_.count(norm_w.data) > 0 && !consumers.empty() && consumers.size() <= 3 &&
              gpu::gemv_fuses_norm(tuning_, w.type, w.row_bytes(), false);
  for (const Tensor& c : consumers)
    fuse = fuse && c.type == DType::F16 && c.cols() == m && c.row_bytes() == consumers[0].row_bytes() &&
           gpu::gemv_fuses_norm(tuning_, c.type, c.row_bytes(), true);
  if (!fuse) return Backend::matmul_add_rms_norm(x, w, out, residual, norm_w, eps, next, consumers, x_in);
  check_handoff(x, x_in, "cuda matmul_add_rms_norm");
  OpTimer timer(profiler(),
                profiler() ? str("matmul gemv+residual ", dtype_name(w.type), " m", m, " k", k) : std::string());
  gpu::GemvNormFusion fusion;
  fusion.residual = residual.ptr<float>();
  fusion.residual_f16 = next.data;
  const gpu::GemvSegment seg{w.data, out.data, m};
  gpu::gemv_segments(w.type, &seg, 1, nullptr, false, w.row_bytes(), k, x.data, 1, out.type,
                     ctx_reading(x, x_in, "cuda matmul_add_rms_norm"), &fusion);
  // next holds the new residual, its norm left to the consumers' GEMVs.
  Handoff h;
  h.data = next.data;
  h.norm_pending = true;
  h.norm_eps = eps;
  return h;
}

bool CudaBackend::fold_norm_gain(Tensor& gain, std::span<const Tensor> consumers) {
  if (!tuning_.fusions.fold_norm_gains || gain.type != DType::F32 || gain.rows() != 1 || consumers.empty()) return false;
  const int64_t cols = gain.cols();
  for (const Tensor& c : consumers)
    if (c.type != DType::F16 || c.cols() != cols || !gpu::gemv_fuses_norm(tuning_, c.type, c.row_bytes(), true))
      return false;
  bind();
  const gpu::LaunchCtx c = ctx();
  int* overflow = static_cast<int*>(alloc(sizeof(int), "norm gain check"));
  RF_GPU_CHECK(gpuMemsetAsync(overflow, 0, sizeof(int), as_stream(stream_)));
  for (const Tensor& w : consumers) gpu::check_columns_scale_f16(w.data, w.rows(), cols, gain.ptr<float>(), overflow, c);
  int flag = 0;
  copy_to_host(&flag, overflow, sizeof(int));
  free(overflow);
  if (flag != 0) return false;  // some weight times its gain is past f16's range: the norm keeps its gain
  for (const Tensor& w : consumers) gpu::scale_columns_f16(w.data, w.rows(), cols, gain.ptr<float>(), ctx());
  const std::vector<float> ones(size_t(cols), 1.0f);
  copy_to_device(gain.data, ones.data(), ones.size() * sizeof(float));
  folded_gains_.insert(gain.data);
  return true;
}

}  // namespace rf
