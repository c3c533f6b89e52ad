// CudaBackend's Gated DeltaNet ops (hybrid models, backend.h "Gated
// DeltaNet"): the conv1d with its state, the gated delta rule, the gated
// RMSNorm, sigmoid gating and the state-row copies (prefix checkpoints
// restored and saved), each checking its arguments and calling its
// launcher (deltanet.cuh). The state rows are device memory the KV cache
// allocated through alloc(); each sequence's row comes from
// StepMeta::state_slots, uploaded with the step's metadata.
#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/deltanet/deltanet.cuh"

namespace rf {
namespace {

void check_layer(const RecurrentLayer& st, const char* op) {
  RF_CHECK(st.conv && st.ssm && st.conv_kernel >= 2 && st.n_k_heads > 0 && st.n_v_heads % st.n_k_heads == 0 &&
               st.head_k_dim > 0 && st.head_v_dim > 0 &&
               st.conv_channels == 2 * st.n_k_heads * st.head_k_dim + st.n_v_heads * st.head_v_dim,
           "cuda ", op, ": bad state layer (kernel ", st.conv_kernel, ", ", st.n_k_heads, " q/k heads, ",
           st.n_v_heads, " value heads, channels ", st.conv_channels, ")");
}

gpu::RecurrentSeqs seqs_of(const StepMeta& m, const char* op) {
  RF_CHECK(m.state_slots, "cuda ", op, ": the step has no state slots");
  return gpu::RecurrentSeqs{m.seq_starts, m.positions, m.state_slots, m.n_seqs, m.max_new_tokens};
}

}  // namespace

void CudaBackend::conv1d_silu_state(const Tensor& x, const Tensor& w, const StepMeta& m, const RecurrentLayer& st,
                                    Tensor& out) {
  check_layer(st, "conv1d_silu_state");
  const int64_t C = st.conv_channels;
  RF_CHECK(x.type == DType::F16 && out.type == DType::F16 && w.type == DType::F32 && x.cols() == C &&
               out.cols() == C && w.cols() == st.conv_kernel && w.rows() == C && x.rows() >= m.n_tokens &&
               out.rows() >= m.n_tokens && x.data != out.data,
           "cuda conv1d_silu_state: f16 x and out [n, ", C, "] apart, f32 w [", C, ", ", st.conv_kernel,
           "] expected; x is ", x.shape_string());
  OpTimer timer(profiler(), "conv1d_silu");
  gpu::conv1d_silu_state(x.data, w.ptr<float>(), seqs_of(m, "conv1d_silu_state"), st, out.data, ctx());
}

void CudaBackend::gated_delta_net(const Tensor& qkv, const Tensor& alpha, const Tensor& beta, const Tensor& dt_bias,
                                  const Tensor& a, const StepMeta& m, const RecurrentLayer& st, float l2_eps,
                                  Tensor& out) {
  check_layer(st, "gated_delta_net");
  const int64_t Hv = st.n_v_heads;
  RF_CHECK(qkv.type == DType::F16 && qkv.cols() == st.conv_channels && alpha.type == DType::F32 &&
               beta.type == DType::F32 && alpha.cols() == Hv && beta.cols() == Hv && dt_bias.type == DType::F32 &&
               a.type == DType::F32 && dt_bias.numel() == Hv && a.numel() == Hv && out.type == DType::F32 &&
               out.cols() == Hv * st.head_v_dim && qkv.rows() >= m.n_tokens && alpha.rows() >= m.n_tokens &&
               beta.rows() >= m.n_tokens && out.rows() >= m.n_tokens && out.data != qkv.data,
           "cuda gated_delta_net: bad shapes or types (f16 q|k|v; f32 alpha, beta, dt_bias, a and out)");
  OpTimer timer(profiler(), "gated_delta_net");
  gpu::gated_delta_net(qkv.data, alpha.data, beta.data, dt_bias.ptr<float>(), a.ptr<float>(),
                       seqs_of(m, "gated_delta_net"), st, l2_eps, out.data, ctx());
}

void CudaBackend::gated_rms_norm(const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& out) {
  const int64_t hw = w.numel();
  RF_CHECK(x.type == DType::F32 && z.type == DType::F16 && out.type == DType::F16 && w.type == DType::F32 && hw > 0 &&
               x.cols() % hw == 0 && z.cols() == x.cols() && out.cols() == x.cols() && z.rows() >= x.rows() &&
               out.rows() >= x.rows(),
           "cuda gated_rms_norm: f32 x, f16 z and out of one width, a multiple of the f32 weight's ", hw, "; x is ",
           x.shape_string());
  OpTimer timer(profiler(), "gated_rms_norm");
  gpu::gated_rms_norm(x.data, w.ptr<float>(), z.data, out.data, x.rows(), int(x.cols()), int(hw), eps, ctx());
}

void CudaBackend::sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) {
  const int64_t n = x.cols();
  const bool per_row = gate.cols() == 1 && n != 1;
  RF_CHECK(x.type == DType::F16 && gate.type == DType::F16 && out.type == DType::F16 && out.cols() == n &&
               (per_row || gate.cols() == n) && gate.rows() >= x.rows() && out.rows() >= x.rows(),
           "cuda sigmoid_mul: f16 x and out, an f16 gate of x's width or one column; x is ", x.shape_string(),
           ", gate ", gate.shape_string());
  OpTimer timer(profiler(), "sigmoid_mul");
  gpu::sigmoid_mul(x.data, gate.data, per_row, out.data, x.rows(), int(n), ctx());
}

void CudaBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
  bind();
  OpTimer timer(profiler(), "copy_on_device");
  RF_GPU_CHECK(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyDeviceToDevice, as_stream(stream_)));
}

}  // namespace rf
