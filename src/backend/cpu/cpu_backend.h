// The CPU backend: the reference implementation of every op. f32 activations
// and an f32 KV cache; matmuls read the stored weight formats directly, in
// one of two modes (CpuMatmul): Reference dequantizes each weight row inside
// a product with f32 activations, so results match a float64 forward over
// the dequantized weights to ~1e-6 (what tests compare other backends
// with); Fast (the CLI's) quantizes the activations of a quantized weight's
// matmul to 8 bits per block of 32 or 256 and multiplies in integers
// (cpu_qdot.h: ~2e-5 to 5e-5 NMSE per matmul against f32 activations, as
// llama.cpp's CPU backend computes). Float weights take the same f32
// kernels in both. Threaded over a pool sized to the machine's cores.
#pragma once

#include <memory>
#include <span>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"

namespace rf {

// How the CPU multiplies by quantized weights (see the file comment).
enum class CpuMatmul { Reference, Fast };

namespace cpu {
struct KernelSet;  // cpu_qdot.h

// One weight's rows in a pass over several (matmul_jobs): where its
// activation rows are in the kernel's format, where its products go.
struct MatmulPart {
  const uint8_t* w = nullptr;
  size_t wrow = 0, tile = 0, m = 0;  // row bytes, rows kept hot together, rows
  const uint8_t* xa = nullptr;       // n activation rows of xrb bytes
  int64_t n = 0;
  float* out = nullptr;              // [n, m]
  void (*dot)(const void*, const void*, size_t, int, size_t, float*, size_t) = nullptr;
  void (*dot2)(const void*, size_t, const void*, size_t, int, size_t, float*, size_t) = nullptr;  // or null
};

// One product of a matmul_jobs pass: out[n, m] = x[n, k] . w[m, k]^T.
struct MatmulJob {
  Tensor x, w, out;
};

// matmul's activation rows in the weight kernel's format and its parts;
// grow to the largest call and are then reused (no allocation per step).
struct MatmulScratch {
  std::vector<uint8_t> xq;
  std::vector<MatmulPart> parts;
  std::vector<size_t> first;  // [parts + 1]: part i holds rows [first[i], first[i + 1]) of the pass
  void reserve(size_t bytes);
};

// moe_ffn's scratch for up to max_rows (token, chosen expert) pairs per call.
struct MoeScratch {
  int64_t max_rows = 0, n_embd = 0, n_ff = 0, n_expert = 0;
  std::vector<int32_t> order;           // [max_rows]: the pairs t * n_used + j grouped by expert
  std::vector<int32_t> start, cursor;   // [n_expert + 1], [n_expert]: each expert's range of order
  std::vector<float> x, gate, up, y_chunk;  // one wave of the pairs' gathered rows (in expert order)
  std::vector<MatmulJob> up_jobs, down_jobs;  // a wave's products: gate and up per expert, then down
  std::vector<int32_t> wave_expert;           // each row's expert in the wave
  std::vector<float> y;                 // [max_rows, n_embd]: each pair's expert output
  MatmulScratch mm;                     // the expert matmuls' quantized activations
  // Sized by the limits' expert fields (empty for dense models).
  void reserve(const BackendLimits& limits);
};
}  // namespace cpu

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(size_t n_threads = 0, CpuMatmul matmul = CpuMatmul::Reference);
  ~CpuBackend() override;

  DeviceKind device() const override { return DeviceKind::CPU; }
  std::string name() const override;
  DType activation_type() const override { return DType::F32; }
  DType kv_type() const override { return DType::F32; }
  bool supports_kv_type(DType t) const override { return t == DType::F32 || t == DType::F8_E4M3; }

  void* alloc(size_t bytes, const std::string& what) override;
  void free(void* p) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  size_t free_memory() const override;
  Tensor load_weight(const Tensor& host, const std::string& name) override;
  Tensor load_f32(const float* host, int64_t cols, int64_t rows, const std::string& name) override;
  void reserve(const BackendLimits& limits) override;

  StepMeta upload_step(const Batch& batch) override;
  void embed(const Tensor& table, const StepMeta& m, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  Handoff matmul(const Tensor& x, const Tensor& w, Tensor& out, const Handoff& x_in = {}) override;
  // One job over all the weights' rows, x quantized once (cpu::matmul_multi).
  Handoff matmul_multi(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                       std::span<const Tensor> biases, const Handoff& x_in = {}) override;
  void matmul_gate_up_glu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& gate, Tensor& up,
                          Tensor& out, Activation act, const Handoff& x_in = {}) override;
  void rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m, const RopeParams& rope,
                     const KVLayer& cache) override;
  Handoff attention(const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
                    Tensor& out) override;
  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void add_bias(Tensor& x, const Tensor& bias) override;
  void geglu(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void rope_q(Tensor& q, int32_t head_dim, const StepMeta& m, const RopeParams& rope) override;
  void moe_scale_weights(const Tensor& ids, const Tensor& scales, Tensor& weights) override;
  void swiglu_oai(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void scale(Tensor& x, float s) override;
  void convert(const Tensor& x, Tensor& out) override;
  void softcap(Tensor& x, float cap) override;
  Handoff attention_ext(const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
                        Tensor& out) override;
  void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) override;
  void conv1d_silu_state(const Tensor& x, const Tensor& w, const StepMeta& m, const RecurrentLayer& st,
                         Tensor& out) override;
  void gated_delta_net(const Tensor& qkv, const Tensor& alpha, const Tensor& beta, const Tensor& dt_bias,
                       const Tensor& a, const StepMeta& m, const RecurrentLayer& st, float l2_eps,
                       Tensor& out) override;
  void gated_rms_norm(const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& out) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void mla_rope_store_kv(Tensor& q, Tensor& kv, const Tensor& kv_norm, float eps, const StepMeta& m,
                         const RopeParams& rope, const MlaParams& p, const KVLayer& cache) override;
  void attention_mla(const Tensor& q, const KVLayer& cache, const StepMeta& m, const MlaParams& p, Tensor& q_lat,
                     Tensor& o_lat, Tensor& out) override;
  Handoff moe_route(const Tensor& router_logits, const MoeParams& p, Tensor& ids, Tensor& weights) override;
  void moe_ffn(const Tensor& x, const Tensor& ids, const Tensor& weights, const ExpertWeights& w, const MoeParams& p,
               Tensor& out, const Handoff& x_in = {}, const Handoff& ids_in = {}) override;
  void gather_rows(const Tensor& x, const StepMeta& m, Tensor& out) override;
  void sample(const Tensor& logits, std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
              std::vector<SampleResult>& out) override;
  void embed_range(const Tensor& table, int64_t first, const StepMeta& m, Tensor& out) override;
  void sample_vocab_parallel(const Tensor& logits, int64_t first, int64_t vocab_total, std::span<const SampleRow> rows,
                             std::span<const PenaltyToken> penalties, Communicator& comm,
                             std::vector<SampleResult>& out) override;
  void synchronize() override {}
  // memcpy between two 256 MiB buffers on every pool thread (each its own
  // slice), best of 3 after a warm-up: the memory roofline bench reports.
  double measure_copy_bandwidth() override;

  ThreadPool& pool() { return pool_; }
  CpuMatmul matmul_mode() const { return matmul_mode_; }

 private:
  ThreadPool pool_;
  CpuMatmul matmul_mode_;
  const cpu::KernelSet& kernels_;  // kernels_for(matmul_mode_)
  Batch step_;  // the uploaded batch: StepMeta points into it
  // Its KV groups' slot mappings [n_groups, n_tokens] and block tables
  // [n_groups, n_seqs, max_blocks_per_seq], each laid end to end.
  std::vector<int32_t> step_slots_, step_tables_;
  cpu::MoeScratch moe_;  // sized by reserve()
  cpu::MatmulScratch mm_;  // matmul's activation rows, pre-sized by reserve()
  std::mutex alloc_mu_;
  std::unordered_set<void*> allocations_;
  // Weights (load_weight): copies in chunks of transparent huge pages, laid
  // end to end (a 4 KiB page mapping of the file costs decode ~20% in TLB
  // misses). The current chunk's next free byte and its end; see load_weight.
  std::vector<void*> weight_chunks_;
  uint8_t* weight_next_ = nullptr;
  uint8_t* weight_end_ = nullptr;
  size_t weight_copied_ = 0, weight_budget_ = 0;  // chunk bytes so far; the most (0: not yet measured)
  bool weights_in_place_ = false;  // the budget ran out: later weights are views of the file
  static size_t available_memory();
};

// GELU (tanh approximation) as ggml evaluates it on the CPU, the way
// llama.cpp's reference outputs were made: x rounded to f16, gelu_tanh of
// that (here in double), the result rounded to f16; x <= -10 gives 0 and
// x >= 10 gives x. (Exact f32 GELU differs from llama.cpp's Gemma logits by
// up to 3.4e-4, beyond the 1e-3-of-the-largest-logit tolerance on tiny-gemma2.)
float gelu_tanh_f16(float x);

// Ops as free functions over host tensors (the backend's implementation,
// also used directly by tests).
namespace cpu {
void moe_route(const Tensor& router_logits, const MoeParams& p, Tensor& ids, Tensor& weights);
void moe_ffn(ThreadPool& pool, const Tensor& x, const Tensor& ids, const Tensor& weights, const ExpertWeights& w,
             const MoeParams& p, Tensor& out, MoeScratch& scratch, const KernelSet& ks);
// out[n, m] = x[n, k] . w[m, k]^T with the given kernel set (cpu_qdot.h);
// the short form is the reference mode with scratch of its own (for one-off
// callers: it allocates).
void matmul(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out, MatmulScratch& scratch,
            const KernelSet& ks);
void matmul(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out);
// The kernel set of a mode (reference_kernels() or best_kernels()).
const KernelSet& kernels_for(CpuMatmul mode);
// Every job in one parallel pass over all their weights' rows (a MoE
// layer's experts, each on its own gathered rows): the weights share one k
// and one activation format; jobs in a row with the same x share its
// quantized rows. Each product is the bits matmul() gives.
void matmul_jobs(ThreadPool& pool, std::span<const MatmulJob> jobs, MatmulScratch& scratch, const KernelSet& ks);
// outs[i] = x . ws[i]^T for up to kMaxMultiWeights weights of one k.
constexpr size_t kMaxMultiWeights = 8;
void matmul_multi(ThreadPool& pool, const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                  MatmulScratch& scratch, const KernelSet& ks);
void rope_store_kv(ThreadPool& pool, Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m,
                   const RopeParams& rope, const KVLayer& cache);
void rope_q(ThreadPool& pool, Tensor& q, int32_t head_dim, const StepMeta& m, const RopeParams& rope);
// RoPE of the first p.n_rot dims of n_heads heads starting head_stride
// floats apart at x, at position pos (as rope_store_kv turns them).
void rope_heads(float* x, int n_heads, int head_stride, int pos, const RopeParams& p);
// Multi-head latent attention (cpu_mla.cpp; semantics in backend.h).
void mla_rope_store_kv(ThreadPool& pool, Tensor& q, Tensor& kv, const Tensor& kv_norm, float eps, const StepMeta& m,
                       const RopeParams& rope, const MlaParams& p, const KVLayer& cache);
void attention_mla(ThreadPool& pool, const Tensor& q, const KVLayer& cache, const StepMeta& m, const MlaParams& p,
                   Tensor& out);
// Honours p.window, p.softcap and p.sinks (the backend's attention()
// requires them unset).
void attention(ThreadPool& pool, const Tensor& q, const KVLayer& cache, const StepMeta& m,
               const AttentionParams& p, Tensor& out);
void sample_row(const float* logits, int32_t vocab, const SampleRow& row, const PenaltyToken* pen,
                SampleResult& out);
// Gated DeltaNet ops (cpu_recurrent.cpp; semantics in backend.h).
void conv1d_silu_state(ThreadPool& pool, const Tensor& x, const Tensor& w, const StepMeta& m, const RecurrentLayer& st,
                       Tensor& out);
void gated_delta_net(ThreadPool& pool, const Tensor& qkv, const Tensor& alpha, const Tensor& beta,
                     const Tensor& dt_bias, const Tensor& a, const StepMeta& m, const RecurrentLayer& st, float l2_eps,
                     Tensor& out);
void gated_rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& out);
void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out);
}  // namespace cpu

}  // namespace rf
