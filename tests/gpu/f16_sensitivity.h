// How far a model's logits move under rounding at f16's precision, seen on
// the CPU: the CPU run rounding weights and activations to f16 where a GPU
// does (F16RoundedCpu) against the plain CPU run, fed the same tokens. A
// GPU run's distance from the CPU scales with this sensitivity: most tiny
// models move by ~1e-3 relative L2, while the hybrids' recurrent layers and
// Gemma 4's blocks amplify the same rounding several times over (with f16
// weights alone, tiny-qwen35's first-step logits of llama.cpp's prompts
// move by 4e-3 - 1.4e-2, its GPU run's by 1.0-1.7x that, prompt by
// prompt). GPU tests compare with f16_tolerance(): 1e-2, or kF16Headroom times the measured sensitivity
// (the largest over the run's steps: one rounding's effect on one step
// scatters) where the model is that sensitive.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "gpu/routing_margin.h"
#include "model/runner.h"
#include "op/op_test_util.h"

namespace rf::test {

// The GPU's rounding against the emulated one: its reductions run in other
// orders and not every f16 intermediate of its fused kernels is emulated
// (with f16 weights alone as the measure, as gpu_checks.py's families eval
// takes it, tiny-qwen35's GPU run is 1.0-1.7x away).
constexpr double kF16Headroom = 3.0;

// The relative L2 a GPU run may keep from the CPU's where the model moves
// by `sensitivity` under f16 rounding.
inline double f16_tolerance(double sensitivity) { return std::max(1e-2, kF16Headroom * sensitivity); }

// The gap (nats) within which two GPU runs of a model (alone and in a
// batch: other reduction orders) may take different greedy tokens: 1e-2
// for models of sensitivity up to 1e-3 (the families' gaps seen part at
// 1e-5 - 4e-3 nats), in proportion beyond.
inline double near_tie_nats(double sensitivity) { return 1e-2 * std::max(1.0, sensitivity / 1e-3); }

// The CPU backend rounding as a GPU does: its f32 weight matrices (and
// embeddings) to the nearest f16 values as they load, and the outputs of
// the ops whose outputs the GPU keeps in f16 (norms, matmuls, attention,
// the GLUs, the experts, the recurrent layers' conv and gated norm) as
// they are made. The residual stream and the delta rule's state stay f32,
// as on the GPU.
class F16RoundedCpu : public RoutingMarginCpu {
 public:
  using RoutingMarginCpu::RoutingMarginCpu;
  Tensor load_weight(const Tensor& host, const std::string& name) override {
    if (host.type != DType::F32 || host.rows() <= 1) return RoutingMarginCpu::load_weight(host, name);
    const size_t n = size_t(host.numel());
    auto* p = static_cast<float*>(alloc(n * sizeof(float), name));
    std::memcpy(p, host.data, n * sizeof(float));
    Tensor t = host;
    t.data = p;
    round(t);
    return t;
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    RoutingMarginCpu::rms_norm(x, w, eps, out);
    round(out);
  }
  Handoff matmul(const Tensor& x, const Tensor& w, Tensor& out, const Handoff& x_in = {}) override {
    const Handoff h = RoutingMarginCpu::matmul(x, w, out, x_in);
    round(out);
    return h;
  }
  Handoff attention(const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
                    Tensor& out) override {
    const Handoff h = RoutingMarginCpu::attention(q, cache, m, p, out);
    round(out);
    return h;
  }
  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override {
    RoutingMarginCpu::swiglu(gate, up, out);
    round(out);
  }
  void geglu(const Tensor& gate, const Tensor& up, Tensor& out) override {
    RoutingMarginCpu::geglu(gate, up, out);
    round(out);
  }
  void swiglu_oai(const Tensor& gate, const Tensor& up, Tensor& out) override {
    RoutingMarginCpu::swiglu_oai(gate, up, out);
    round(out);
  }
  void moe_ffn(const Tensor& x, const Tensor& ids, const Tensor& weights, const ExpertWeights& w, const MoeParams& p,
               Tensor& out, const Handoff& x_in = {}, const Handoff& ids_in = {}) override {
    RoutingMarginCpu::moe_ffn(x, ids, weights, w, p, out, x_in, ids_in);
    round(out);
  }
  void conv1d_silu_state(const Tensor& x, const Tensor& w, const StepMeta& m, const RecurrentLayer& st,
                         Tensor& out) override {
    RoutingMarginCpu::conv1d_silu_state(x, w, m, st, out);
    round(out);
  }
  void gated_rms_norm(const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& out) override {
    RoutingMarginCpu::gated_rms_norm(x, w, z, eps, out);
    round(out);
  }
  void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) override {
    RoutingMarginCpu::sigmoid_mul(x, gate, out);
    round(out);
  }

 private:
  static void round(Tensor& t) {
    if (t.type != DType::F32) return;
    float* p = t.ptr<float>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = f16_to_f32(f32_to_f16(p[i]));
  }
};

// F16RoundedCpu that also rounds a one-row matmul's input to 8-bit quants
// where its weights are block-quantized, as the GPU's batch-1 GEMVs do
// (gemv_stream.cu: per 32, d = max |x| / 127, round(x / d), of the f16
// activations). Its distance from the plain CPU run is a quantized model's
// sensitivity to those activations: the dummy q4_k_m presets' decode steps
// move by 0.010-0.033 relative L2, and their GPU runs by 1.0-1.3x that
// (H200; Gemma 4 and Qwen3.5 the most).
class Q8ActivationsCpu : public F16RoundedCpu {
 public:
  using F16RoundedCpu::F16RoundedCpu;
  Handoff matmul(const Tensor& x, const Tensor& w, Tensor& out, const Handoff& x_in = {}) override {
    if (x.type != DType::F32 || x.rows() != 1 || !info(w.type).quantized || x.numel() % 32 != 0)
      return F16RoundedCpu::matmul(x, w, out, x_in);
    std::vector<float> q(x.ptr<float>(), x.ptr<float>() + x.numel());
    for (size_t b = 0; b < q.size(); b += 32) {
      float amax = 0.0f;
      for (size_t i = b; i < b + 32; ++i) {
        q[i] = f16_to_f32(f32_to_f16(q[i]));
        amax = std::max(amax, std::fabs(q[i]));
      }
      const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
      for (size_t i = b; i < b + 32; ++i) q[i] = std::nearbyint(q[i] * inv) * d;
    }
    Tensor xq = x;
    xq.data = q.data();
    return F16RoundedCpu::matmul(xq, w, out);
  }
};

// The largest relative L2 over the steps of the f16-rounded CPU run against
// the CPU run over `prompt` and then `steps - 1` greedy tokens of the CPU
// run (as the GPU tests feed them); `layers`: the model cut to its first
// layers (0: all).
inline double f16_sensitivity(const std::string& path, const std::vector<int32_t>& prompt, int steps,
                              int32_t layers = 0) {
  CpuBackend cpu(2);
  F16RoundedCpu cpu16(2);
  ModelRunner a(path, cpu, 256, 8, 256, 16, KVCacheDType::Auto, 0, layers);
  ModelRunner b(path, cpu16, 256, 8, 256, 16, KVCacheDType::Auto, 0, layers);
  ModelRunner::Seq sa, sb;
  sa.tokens = sb.tokens = prompt;
  double out = 0.0;
  for (int step = 0; step < steps; ++step) {
    const auto la = a.step({&sa})[0];
    const auto lb = b.step({&sb})[0];
    out = std::max(out, rel_l2(lb, la));
    const int32_t next = ModelRunner::argmax(la);
    sa.tokens.push_back(next);
    sb.tokens.push_back(next);
  }
  return out;
}

}  // namespace rf::test
