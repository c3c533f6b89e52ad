// The CUDA backend: every Backend op on one stream of one GPU. f16
// activations, an f32 residual stream, an f16 paged KV cache; weights stay
// in their GGUF format on the device (dequantized inside the GEMV, or per
// row chunk into a fixed scratch buffer for large batches that go through
// cuBLAS). All memory is allocated at load and reserve(); steps allocate
// nothing. Decode steps can be captured and replayed as CUDA graphs (HIP
// graphs on AMD). One source for both vendors: a HIP build (preset hip)
// compiles this same backend against the HIP runtime through gpu.h; the
// class keeps its name there and reports vendor() "rocm".
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_options.h"

namespace rf {

namespace gpu {
struct LaunchCtx;
class OpProfiler;
}

class CudaBackend final : public Backend {
 public:
  // The device's tuning (tuning.h), options.tune and the environment
  // switches (core/env.h) are applied here, once.
  explicit CudaBackend(const CudaOptions& options = {});
  ~CudaBackend() override;

  static int device_count();  // 0 when no usable GPU (or driver)
  static const char* vendor();  // "cuda", or "rocm" in a HIP build

  DeviceKind device() const override { return DeviceKind::CUDA; }
  std::string name() const override { return name_; }
  DType activation_type() const override { return DType::F16; }
  DType kv_type() const override { return DType::F16; }
  bool supports_kv_type(DType t) const override { return t == DType::F16 || t == DType::F8_E4M3; }
  void bind_thread() override { bind(); }

  void* alloc(size_t bytes, const std::string& what) override;
  void free(void* p) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  size_t free_memory() const override;
  size_t total_memory() const override;
  Tensor load_weight(const Tensor& host, const std::string& name) override;
  void adopt_weight(const Tensor& w) override;
  std::shared_ptr<const void> pin_host_memory(const void* p, size_t bytes) override;
  Tensor load_f32(const float* host, int64_t cols, int64_t rows, const std::string& name) override;
  void reserve(const BackendLimits& limits) override;

  StepMeta upload_step(const Batch& batch) override;
  void embed(const Tensor& table, const StepMeta& m, Tensor& out) override;
  void embed_range(const Tensor& table, int64_t first, const StepMeta& m, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  Handoff matmul(const Tensor& x, const Tensor& w, Tensor& out, const Handoff& x_in = {}) override;
  void rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m, const RopeParams& rope,
                     const KVLayer& cache) override;
  Handoff attention(const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
                    Tensor& out) override;
  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override;
  Handoff attention_ext(const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
                        Tensor& out) override;
  void add_bias(Tensor& x, const Tensor& bias) override;
  void geglu(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void swiglu_oai(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void scale(Tensor& x, float s) override;
  void convert(const Tensor& x, Tensor& out) override;
  void softcap(Tensor& x, float cap) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void gather_rows(const Tensor& x, const StepMeta& m, Tensor& out) override;
  void sample(const Tensor& logits, std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
              std::vector<SampleResult>& out) override;
  void sample_vocab_parallel(const Tensor& logits, int64_t first, int64_t vocab_total, std::span<const SampleRow> rows,
                             std::span<const PenaltyToken> penalties, Communicator& comm,
                             std::vector<SampleResult>& out) override;
  void synchronize() override;
  Handoff matmul_multi(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                       std::span<const Tensor> biases, const Handoff& x_in = {}) override;
  Handoff add_post_norm_rms_norm(Tensor& x, const Tensor& y, const Tensor& w_y, const Tensor& w, float eps,
                                 Tensor& out) override;
  void matmul_gate_up_glu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& gate, Tensor& up,
                          Tensor& out, Activation act, const Handoff& x_in = {}) override;
  Handoff add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out) override;
  Handoff matmul_add_rms_norm(const Tensor& x, const Tensor& w, Tensor& out, Tensor& residual, const Tensor& norm_w,
                              float eps, Tensor& next, std::span<const Tensor> consumers,
                              const Handoff& x_in = {}) override;
  bool fold_norm_gain(Tensor& gain, std::span<const Tensor> consumers) override;
  void mla_rope_store_kv(Tensor& q, Tensor& kv, const Tensor& kv_norm, float eps, const StepMeta& m,
                         const RopeParams& rope, const MlaParams& p, const KVLayer& cache) override;
  void attention_mla(const Tensor& q, const KVLayer& cache, const StepMeta& m, const MlaParams& p, Tensor& q_lat,
                     Tensor& o_lat, Tensor& out) override;
  Handoff moe_route(const Tensor& router_logits, const MoeParams& p, Tensor& ids, Tensor& weights) override;
  Handoff moe_router_route(const Tensor& x, const Tensor& w_router, const MoeParams& p, Tensor& logits, Tensor& ids,
                           Tensor& weights) override;
  void moe_ffn(const Tensor& x, const Tensor& ids, const Tensor& weights, const ExpertWeights& w, const MoeParams& p,
               Tensor& out, const Handoff& x_in = {}, const Handoff& ids_in = {}) override;
  void conv1d_silu_state(const Tensor& x, const Tensor& w, const StepMeta& m, const RecurrentLayer& st,
                         Tensor& out) override;
  void gated_delta_net(const Tensor& qkv, const Tensor& alpha, const Tensor& beta, const Tensor& dt_bias,
                       const Tensor& a, const StepMeta& m, const RecurrentLayer& st, float l2_eps,
                       Tensor& out) override;
  void gated_rms_norm(const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& out) override;
  void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void rms_norm_pair(const Tensor& a, const Tensor& wa, Tensor& a_out, const Tensor& b, const Tensor& wb, Tensor& b_out,
                     float eps) override;
  void qk_norm_rope_store_kv(const Tensor& q_raw, const Tensor& wq, const Tensor& k_raw, const Tensor& wk, float eps,
                             Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m, const RopeParams& rope,
                             const KVLayer& cache) override;
  void rope_q(Tensor& q, int32_t head_dim, const StepMeta& m, const RopeParams& rope) override;
  void moe_scale_weights(const Tensor& ids, const Tensor& scales, Tensor& weights) override;

  // Graphs are off while profiling (op_profiler.h).
  bool supports_graphs() const override { return options_.graphs && !options_.profile; }
  bool packs_qkv() const override { return tuning_.fusions.packed_qkv; }
  void run_graph(uint64_t key, const std::function<void()>& record) override;
  void clear_graphs() override;
  double measure_copy_bandwidth() override;

  void* stream() const { return stream_; }
  int device_index() const { return options_.device; }
  const CudaOptions& options() const { return options_; }
  const gpu::Tuning& tuning() const { return tuning_; }  // what the launchers get
  // Whether matmuls of this weight format and shape quantize the
  // activations to 8 bits (the batch-1 Q4_K / Q6_K GEMV; tests build their
  // reference from the same activations).
  bool gemv_quantizes_activations(DType w_type, int n, int k) const;
  // ... and one token's expert down GEMVs (rows of k, n_used experts a
  // token; MoE FFN).
  bool expert_down_quantizes_activations(DType w_type, int k, int n_used) const;
  // Whether a matmul of n activation rows on FP8 weights w into `out_type`
  // runs on FP8 tensor cores (activations quantized to e4m3, a scale per
  // row: Tuning::fp8_gemm_min_rows); tests build their reference from
  // the same activations.
  bool matmul_runs_fp8(const Tensor& w, int n, DType out_type);
  // The stream, tuning_ and the 8-bit activation buffer, for the
  // launchers of an op that neither reads quants handed to it nor writes
  // a row's quants for the next op (gpu.h: LaunchCtx).
  gpu::LaunchCtx ctx() const;
  gpu::OpProfiler* profiler() const;  // null unless CudaOptions::profile
  size_t allocated_bytes() const override { return allocated_; }

 private:
  struct Impl;
  // The 8-bit activations an op takes and hands over (gpu::ActQ8Record):
  // the ctx of an op reading x, which may read the quants x_in hands over
  // (checked: nothing overwrote them since); the ctx of an op producing
  // a row, which writes its quants where weights loaded read them; and
  // after the op's launches (act_q8_version() taken before), t's Handoff:
  // the quants of t the op wrote, or was handed and kept.
  gpu::LaunchCtx ctx_reading(const Tensor& x, const Handoff& x_in, const char* op) const;
  gpu::LaunchCtx ctx_producing() const;
  uint64_t act_q8_version() const;
  Handoff act_q8_handoff(const Tensor& t, uint64_t since, const gpu::LaunchCtx& c) const;
  void forget_act_q8();  // memory changed outside the ops: no quants are handed over any more
  struct MoeScratch;  // cuda_moe.cpp
  class ShardOps;     // cuda_sample_parallel.cpp
  void bind() const;  // makes options_.device current for the calling thread
  // Uploads the rows' sampling parameters, penalties and masks for the
  // sampling kernels (sample(), and sample_vocab_parallel()'s first phase).
  void upload_sample_rows(std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties);
  void reserve_moe(const BackendLimits& limits);
  // Host-memory experts copied into the MoE scratch's host_copy (stream
  // order): the same experts as device tensors.
  ExpertWeights copy_host_experts(const ExpertWeights& w);
  // Waits for the stream; with experts in host memory without spinning (the
  // pool needs the cores) and then throws what their FFNs met, if any.
  void wait_stream();
  Handoff planned(const Tensor& ids);  // a one-token routing wrote ids' plan: its Handoff
  void release_moe();
  int attention_splits(const StepMeta& m) const;
  // FP8 tensor-core matmul (matmul_runs_fp8): activation rows per chunk in
  // the dequantization scratch, 0 where this shape does not run so.
  int fp8_matmul_chunk(const Tensor& w, int n, DType out_type);
  void matmul_fp8(const Tensor& x, const Tensor& w, Tensor& out, int chunk);
  // matmul_multi of weights adjacent in memory (Backend::packs_qkv) and 9
  // to kPackedQkvMaxRows rows: one matmul into scratch, then one kernel
  // splitting its columns into outs (+ biases); false where it does not apply.
  bool packed_matmul(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                     std::span<const Tensor> biases);
  // matmul_multi of one activation row by weights of two formats, the
  // first `run` in one and the rest in another (q4_k_m's q/k/v with V in
  // Q6_K): one launch (Fusions::gemv_two_formats), x's Handoff after it
  // into x_out; false where it does not apply.
  bool two_format_gemv(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                       std::span<const Tensor> biases, size_t run, const Handoff& x_in, Handoff& x_out);
  // matmul_gate_up_glu of gate and up weights adjacent in memory and 9 to
  // kPackedQkvMaxRows rows (Fusions::packed_gate_up): one matmul over
  // both into scratch, then the GLU from its two halves; false where it
  // does not apply.
  bool packed_gate_up(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& out, Activation act);
  // Key slices of decode attention for a step of n_tokens single-token
  // rows whose longest context is max_context (two choices per bucket: its
  // graph variants).
  int decode_slices(int capacity, int n_tokens, int max_context) const;
  void release_reserved();
  int n_sms_ = 1;
  int warp_size_ = 32;  // the device's (64 on CDNA): launchers' LaunchCtx

  CudaOptions options_;
  gpu::Tuning tuning_;
  std::string name_;
  void* stream_ = nullptr;
  void* act_q8_ = nullptr;  // LaunchCtx::act_q8
  // Weights whose batch-1 GEMV reads 8-bit activations are loaded: the ops
  // producing a row write its quants (LaunchCtx::act_q8_produce).
  bool q8_readers_ = false;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<MoeScratch> moe_;
  std::mutex alloc_mu_;
  std::unordered_map<void*, size_t> allocations_;
  size_t allocated_ = 0;
  BackendLimits limits_;
  bool reserved_ = false;
  bool capturing_ = false;
  // Norm gains folded into their matmuls' weights (fold_norm_gain: load
  // time).
  std::unordered_set<const void*> folded_gains_;
};

}  // namespace rf
