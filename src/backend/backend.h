// The Backend interface: device memory and the ops the model needs, called
// eagerly on one stream (DESIGN.md, "Backends"). The CPU backend is the
// reference; GPU backends implement the same ops with the same semantics.
// Memory is planned up front (weights, the KV pool, one activation
// workspace); ops never allocate. An op a backend lacks is an error that
// names it — never a silent fallback to another device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/batch.h"
#include "backend/collective.h"
#include "backend/query_tiles.h"
#include "core/activation.h"
#include "core/rope_params.h"
#include "core/sampling.h"
#include "backend/tensor.h"

namespace rf {

// One layer's slice of the paged KV cache: K and V each hold
// [num_blocks * block_size slots, n_kv_heads, head_dim] of `type` (each
// slot slot_elems() apart). An
// F8_E4M3 cache also holds one f32 scale per (slot, KV head) row of K and
// of V ([num_blocks * block_size slots, n_kv_heads]): element d of a row is
// e4m3_to_float(byte d) * its scale (core/fp8.h says how rows are encoded).
struct KVLayer {
  void* k = nullptr;
  void* v = nullptr;
  DType type = DType::F32;
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  float* k_scale = nullptr;  // F8_E4M3 only
  float* v_scale = nullptr;
  // Layers of other widths share the arrays (Gemma 4's head sizes): slot s
  // of K or V then starts at element s * slot_stride, its scales at
  // s * scale_stride (0: packed, n_kv_heads * head_dim and n_kv_heads).
  // Every backend's KV store and attention read these strides.
  int64_t slot_stride = 0;
  int64_t scale_stride = 0;
  int64_t slot_elems() const { return slot_stride > 0 ? slot_stride : int64_t(n_kv_heads) * head_dim; }
  int64_t slot_scales() const { return scale_stride > 0 ? scale_stride : n_kv_heads; }
};

// One Gated DeltaNet layer's slice of the recurrent state cache (model/
// kv_cache.h): `n_rows` rows of f32 state, row r of this layer at
// conv + r * row_stride and ssm + r * row_stride (the rows of all layers
// interleave, so one row of every layer is one contiguous block: a
// sequence's slot, or a prefix checkpoint; StepMeta::state_slots picks a
// sequence's row). In one row:
//   conv [conv_kernel - 1, conv_channels]: the inputs of the last
//        conv_kernel - 1 positions before the sequence's next token, oldest
//        first (row p of them: position next - (conv_kernel - 1) + p);
//   ssm  [n_v_heads, head_v_dim, head_k_dim]: per value head h the state
//        S_h as its transpose, S_h[i][j] at (h, j, i) — row j (a value
//        component) holds the key components i contiguously.
// A sequence whose first token in a step is at position 0 starts from the
// zero state (nothing is read from its row); every step leaves the state
// after the sequence's last token of the step in its row.
struct RecurrentLayer {
  float* conv = nullptr;
  float* ssm = nullptr;
  int64_t row_stride = 0;  // floats from one row to the next
  int32_t n_rows = 0;
  int32_t conv_kernel = 0;    // taps of the causal conv (ssm.conv_kernel)
  int32_t conv_channels = 0;  // 2 * n_k_heads * head_k_dim + n_v_heads * head_v_dim: q | k | v
  int32_t n_k_heads = 0;      // q/k heads (ssm.group_count)
  int32_t n_v_heads = 0;      // value heads (ssm.time_step_rank); value head h uses q/k head h % n_k_heads
  int32_t head_k_dim = 0;     // ssm.state_size
  int32_t head_v_dim = 0;     // ssm.inner_size / n_v_heads
  int64_t conv_floats() const { return int64_t(conv_kernel - 1) * conv_channels; }
  int64_t ssm_floats() const { return int64_t(n_v_heads) * head_v_dim * head_k_dim; }
};

struct AttentionParams {
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  float scale = 1.0f;  // usually 1/sqrt(head_dim)
  // Honoured by attention_ext() only (attention() requires both 0 and no sinks):
  int32_t window = 0;    // > 0: a query at position p sees keys at p - window < j <= p
  float softcap = 0.0f;  // > 0: logits s = scale * q.k become softcap * tanh(s / softcap)
  // [n_heads] f32 on the backend's device, or null: attention sinks
  // (gpt-oss), one more logit per head in the softmax's denominator with no
  // value: p_j = exp(s_j) / (exp(sink_h) + sum_i exp(s_i)).
  const float* sinks = nullptr;
};

// One multi-head latent attention layer (DeepSeek V2/V3; Backend::
// attention_mla): n_heads query heads of nope + rope dims; per token a
// latent c of lora dims and one RoPE key of rope dims shared by the heads,
// cached as one K row [c | k_rope] (KVLayer n_kv_heads 1, head_dim lora +
// rope, no V: the values are read from the front of the K rows); v value
// dims per head. Head h's key is [w_kb[h] . c | k_rope] and its value
// w_vb[h] . c.
struct MlaParams {
  int32_t n_heads = 0, nope = 0, rope = 0, lora = 0, v = 0;
  float scale = 1.0f;  // of q . k over a head's nope + rope dims
  // attn_k_b [n_heads * lora rows, nope] and attn_v_b [n_heads * v rows,
  // lora]: head h's rows start at h * lora and h * v (the CPU reads any
  // stored format; GPUs f32, f16 or bf16).
  Tensor w_kb, w_vb;
  int32_t q_head() const { return nope + rope; }
  int32_t kv_row() const { return lora + rope; }
};

// Device-side view of an uploaded Batch: pointers valid until the next
// upload_step. Scalars are host values. slot_mapping and block_tables are
// those of one KV group (Batch::groups): upload_step returns group 0's,
// for_group(g) the view a layer of group g passes to the ops.
struct StepMeta {
  const int32_t* token_ids = nullptr;     // [n_tokens]
  const int32_t* positions = nullptr;     // [n_tokens]
  const int32_t* slot_mapping = nullptr;  // [n_tokens]
  const int32_t* token_seq = nullptr;     // [n_tokens]
  const int32_t* seq_starts = nullptr;    // [n_seqs + 1]
  const int32_t* context_lens = nullptr;  // [n_seqs]
  // [n_seqs, max_blocks_per_seq]; negative entries (released blocks of a
  // sliding-window group) lie before every window that reads the table and
  // must not be read.
  const int32_t* block_tables = nullptr;
  const int32_t* logits_rows = nullptr;   // [n_logits]
  // Hybrid models: each sequence's recurrent-state row (RecurrentLayer);
  // -1 for padding sequences. Null for models without recurrent layers.
  const int32_t* state_slots = nullptr;   // [n_seqs]
  // Query tiles for prefill kernels (backends that build them; query_tiles.h):
  // up to 16 consecutive tokens of one sequence each, a tile deep in its
  // context possibly split into parts over its keys, which the q_splits
  // records (n_q_splits of them) tell a combine step to sum.
  const QueryTile* q_tiles = nullptr;
  int32_t n_q_tiles = 0;
  const QuerySplit* q_splits = nullptr;
  int32_t n_q_splits = 0;
  // A step mixing multi-token chunks with single-token sequences (backends
  // that build them): the multi-token sequences' tiles come first in
  // q_tiles (n_prompt_tiles of them), and decode_tokens lists the
  // single-token sequences' tokens, for a decode kernel to take.
  int32_t n_prompt_tiles = 0;
  const int32_t* decode_tokens = nullptr;
  int32_t n_decode_tokens = 0;
  // Keys per split-K slice of decode attention for this step (one value on
  // the device, so a captured graph adapts to the context length).
  const int32_t* attn_split_len = nullptr;
  // Key slices of decode attention this step (backends that split it; 0:
  // none chosen), and which captured graph of its batch bucket the step
  // takes: kernels chosen by the step's context (e.g. more slices for long
  // contexts) are another graph (Backend::run_graph keys include it).
  int32_t decode_slices = 0;
  uint32_t graph_variant = 0;
  int32_t n_tokens = 0, n_seqs = 0, n_logits = 0;
  int32_t max_blocks_per_seq = 0, block_size = 0;
  int32_t max_new_tokens = 0, max_context_len = 0;
  // KV groups: group g's slot_mapping and block_tables lie g * these many
  // elements after group 0's.
  int32_t n_groups = 1;
  int64_t group_slot_stride = 0, group_table_stride = 0;

  StepMeta for_group(int32_t g) const {
    StepMeta m = *this;
    m.slot_mapping += g * group_slot_stride;
    m.block_tables += g * group_table_stride;
    return m;
  }
};

struct BackendLimits {
  int32_t max_tokens = 0;     // largest batch of tokens per step
  int32_t max_seqs = 0;       // largest number of sequences per step
  int32_t max_blocks_per_seq = 0;
  int32_t max_logits = 0;
  int32_t vocab = 0;           // logit columns (a tensor-parallel rank's range of the vocabulary)
  int64_t max_weight_elems = 0;  // largest weight matrix (rows * cols)
  int32_t n_heads = 0;           // attention query heads (these three 0: no paged attention op runs, MLA models)
  int32_t head_dim = 0;
  int32_t n_kv_heads = 0;
  int32_t kv_groups = 1;         // KV groups (Batch::groups) of every step
  // Mixture-of-experts models (0 for dense ones): what moe_ffn's scratch needs.
  int32_t n_expert = 0, n_expert_used = 0, expert_ff = 0;
  int32_t n_embd = 0;
  // The whole vocabulary (allowed-token masks are this wide); more than
  // `vocab` on a tensor-parallel rank. (Tests initialize the fields up to
  // here by position.)
  int32_t vocab_total = 0;
  int32_t n_ff = 0;  // a dense FFN's width (gate and up rows; 0: no dense FFN)
  // Models whose layers differ in head size (Gemma 4): head_dim and
  // n_kv_heads are the largest, this the smallest head size (0: head_dim).
  int32_t min_head_dim = 0;
  // Some layer's experts are in host memory (WeightPlacement): the backend
  // runs their FFNs on the host's cores, or, for batches where copying them
  // over costs less (GPUs), copies a layer's to its memory and runs them
  // there: host_expert_bytes is the most one layer's take (weights and
  // biases, each tensor rounded up to 256 bytes; ExpertWeights::tensors).
  bool host_experts = false;
  uint64_t host_expert_bytes = 0;
};

// How router logits become expert probabilities (llama.cpp's
// expert_gating_func: 1 softmax over all experts, 2 sigmoid of each logit).
enum class MoeGating { Softmax, Sigmoid };

// A mixture-of-experts FFN layer's shape and routing (Mixtral, Qwen3-MoE,
// gpt-oss, GLM-4.5, DeepSeek V2/V3).
struct MoeParams {
  int32_t n_expert = 0;  // experts per layer
  int32_t n_used = 0;    // experts chosen per token (top-k)
  int32_t n_ff = 0;      // each expert's FFN width
  bool norm_weights = true;  // the chosen experts' probabilities renormalised to sum 1
  Activation act = Activation::SiLU;
  MoeGating gating = MoeGating::Softmax;
  float weights_scale = 1.0f;  // the chosen experts' weights times this (after any renormalisation)
  // Optional f32 [n_expert] (GLM-4.5's exp_probs_b.bias): added to the
  // probabilities for the choice of experts only; the weights stay the
  // unbiased probabilities. The layer's own: the model sets it per layer.
  Tensor choice_bias;
  // Optional f32 [n_expert] (gpt-oss's ffn_gate_inp.bias): added to the
  // router logits (moe_router_route). The layer's own, as choice_bias.
  Tensor router_bias;
  // Group-limited routing (DeepSeek's expert_group_count and
  // expert_group_used_count): n_group > 1 splits the experts into n_group
  // equal groups of consecutive ids (at least 2 each, n_group <= 32); the
  // choice is limited to the n_group_used groups whose two best choice
  // scores sum highest (ties to the lower group). 0 or 1: no groups.
  int32_t n_group = 0;
  int32_t n_group_used = 0;
  bool grouped() const { return n_group > 1; }
  // The default routing (softmax, no bias, scale 1, no groups).
  bool plain_routing() const {
    return gating == MoeGating::Softmax && !choice_bias.data && weights_scale == 1.0f && !grouped();
  }
};

// One layer's experts, each matrix stacked along rows (GGUF's 3-D
// ffn_{gate,up,down}_exps seen as 2-D): gate and up [n_expert * n_ff rows,
// n_embd], down [n_expert * n_embd rows, n_ff]; expert e owns rows
// [e * rows_per_expert, (e + 1) * rows_per_expert), so experts stay
// addressable one by one (expert parallelism places them per device).
struct ExpertWeights {
  Tensor gate, up, down;
  // Optional per-expert biases (gpt-oss), f32: gate and up [n_expert rows,
  // n_ff], down [n_expert rows, n_embd]; added to each expert's products
  // before the activation and before the weighted sum.
  Tensor gate_bias, up_bias, down_bias;
  int32_t n_expert = 0;
  bool has_biases() const { return gate_bias.data != nullptr; }
  // Every tensor, biases included (absent ones have no data): for code
  // that moves or pins them all.
  std::array<const Tensor*, 6> tensors() const { return {&gate, &up, &down, &gate_bias, &up_bias, &down_bias}; }
  std::array<Tensor*, 6> tensors() { return {&gate, &up, &down, &gate_bias, &up_bias, &down_bias}; }
  // What a device copy of the tensors takes, each rounded up to 256 bytes.
  uint64_t copy_bytes() const {
    uint64_t n = 0;
    for (const Tensor* t : tensors())
      if (t->data) n += (t->bytes() + 255) / 256 * 256;
    return n;
  }
  Tensor gate_of(int32_t e) const { return gate.slice_rows(e * (gate.rows() / n_expert), gate.rows() / n_expert); }
  Tensor up_of(int32_t e) const { return up.slice_rows(e * (up.rows() / n_expert), up.rows() / n_expert); }
  Tensor down_of(int32_t e) const { return down.slice_rows(e * (down.rows() / n_expert), down.rows() / n_expert); }
};

// What an op hands over with a tensor it wrote (or read whole), for the
// next op that reads that tensor: the op returns it, and the caller passes
// it to that one reader and to no other (a fused op takes what it consumes
// as an argument, never state a previous call left in the backend). A
// default Handoff hands over nothing, and every op takes it: the reader
// then reads the tensor as it is. Which readers take a non-default one is
// said at each op.
struct Handoff {
  const void* data = nullptr;  // the tensor this describes (its data); null: nothing handed over
  // The rows are not RMS-normed yet: the reader scales each by 1 /
  // sqrt(mean(row^2) + norm_eps), the norm's gain being folded into its
  // weights (matmul_add_rms_norm; read by matmul_multi and
  // matmul_gate_up_glu only).
  bool norm_pending = false;
  float norm_eps = 0.0f;
  // A copy of the rows the backend made for its own kernels (on GPUs: one
  // activation row's 8-bit quants; routed ids' expert plan), by the number
  // the backend gave it; 0: none. It stays good until the backend
  // overwrites it, and an op handed an overwritten one throws rf::Error.
  uint64_t copy = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceKind device() const = 0;
  virtual std::string name() const = 0;            // "cpu", "cuda:0 (NVIDIA H200)"
  virtual DType activation_type() const = 0;       // f32 on the CPU, f16 on GPUs
  virtual DType residual_type() const { return DType::F32; }  // the residual stream
  virtual DType kv_type() const = 0;  // the KV cache's element type by default
  // KV element types this backend's rope_store_kv and attention take: its
  // kv_type() and, where implemented, F8_E4M3 (--kv-cache-dtype fp8).
  virtual bool supports_kv_type(DType t) const { return t == kv_type(); }
  // Makes this backend's device current for the calling thread (GPUs; each
  // tensor-parallel rank's thread calls it before running ops).
  virtual void bind_thread() {}

  // --- memory ------------------------------------------------------------
  // Allocations are owned by the backend and freed with it (or by free()).
  virtual void* alloc(size_t bytes, const std::string& what) = 0;
  virtual void free(void* p) = 0;
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;  // waits for the data
  virtual size_t free_memory() const = 0;
  virtual size_t total_memory() const { return 0; }
  virtual size_t allocated_bytes() const { return 0; }  // by this backend, so far
  // Makes a weight tensor usable by the ops: a copy of `host` (mapped file
  // data) in the backend's memory (the CPU's: in transparent huge pages).
  virtual Tensor load_weight(const Tensor& host, const std::string& name) = 0;
  // A weight the loader wrote into this backend's memory itself (packed
  // parts, --load-format dummy): the backend notes of it what load_weight
  // notes (GPUs: whether a batch-1 GEMV reads it with 8-bit activations).
  virtual void adopt_weight(const Tensor& w) {}
  // Host memory the ops will read during steps (weights kept in host
  // memory: WeightPlacement). GPU backends page-lock it, so copies from it
  // run at the bus's rate, its pages read in now rather than at the first
  // steps; it stays locked while the returned handle lives. An empty handle:
  // nothing was locked (a CPU backend; or the memory cannot be, which is
  // logged; the ops still read it).
  virtual std::shared_ptr<const void> pin_host_memory(const void* p, size_t bytes) { return {}; }
  // Upload f32 host data as a small device tensor (norm weights, rope factors).
  virtual Tensor load_f32(const float* host, int64_t cols, int64_t rows, const std::string& name) = 0;

  // Sizes the per-step buffers (metadata, sampling) when an engine starts;
  // calling it again releases the previous reservation first.
  virtual void reserve(const BackendLimits& limits) = 0;

  // --- per step ------------------------------------------------------------
  // Copies the batch metadata to the device (one copy) and returns its view.
  virtual StepMeta upload_step(const Batch& batch) = 0;

  // out[t, :] = table[token_ids[t], :] (dequantized), for all step tokens.
  virtual void embed(const Tensor& table, const StepMeta& m, Tensor& out) = 0;
  // out = x / rms(x) * w, row-wise; w is f32 [cols].
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;
  // out[n, m] = x[n, k] . w[m, k]^T, with w in any stored format. x_in:
  // what the op that wrote x handed over with it; returns what x carries
  // now, for another matmul of x (the copy a backend made of it).
  virtual Handoff matmul(const Tensor& x, const Tensor& w, Tensor& out, const Handoff& x_in = {}) = 0;
  // Applies RoPE to q [n_tokens, n_heads*hd] and k [n_tokens, n_kv*hd] in place
  // and stores k and v into the cache at slot_mapping (slots of -1 skipped).
  virtual void rope_store_kv(Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m, const RopeParams& rope,
                             const KVLayer& cache) = 0;
  // Causal attention of each step token over its sequence's cached context
  // [0, position]; q [n_tokens, n_heads*hd] -> out [n_tokens, n_heads*hd].
  // Returns out's Handoff, for the matmul that reads it.
  virtual Handoff attention(const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
                            Tensor& out) = 0;
  // out = silu(gate) * up.
  virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // out = a + b (out may alias a).
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // out[i, :] = x[logits_rows[i], :] (rows of one type: f32 or f16).
  virtual void gather_rows(const Tensor& x, const StepMeta& m, Tensor& out) = 0;
  // Samples one token per row of f32 logits [n_rows, vocab]; results on the host.
  virtual void sample(const Tensor& logits, std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
                      std::vector<SampleResult>& out) = 0;
  // Waits for all queued work.
  virtual void synchronize() = 0;

  // --- ops of some model families ------------------------------------------
  // The defaults throw an error naming the op and the backend; a backend
  // that runs these families implements them. The model calls each only
  // where its configuration needs it, so Llama models need none of them.
  // Two building blocks need no op of their own: fused weights (attn_qkv,
  // ffn_up holding gate and up) are row slices of one weight given to
  // matmul, and per-head RMSNorm of q and k is rms_norm over the same memory
  // seen as [n_tokens * n_heads rows, head_dim].
  //
  // x[r, :] += bias for every row r; bias is f32 [x.cols()] (q/k/v biases).
  virtual void add_bias(Tensor& x, const Tensor& bias);
  // out = gelu(gate) * up (GeGLU), where gelu is the tanh approximation
  // 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) evaluated as ggml does:
  // on g rounded to f16, the result rounded to f16 (g <= -10: 0; g >= 10: g)
  // — what a backend with f16 activations computes naturally.
  virtual void geglu(const Tensor& gate, const Tensor& up, Tensor& out);
  // out = glu_oai(gate, up) (core/activation.h: gpt-oss's clamped SwiGLU).
  virtual void swiglu_oai(const Tensor& gate, const Tensor& up, Tensor& out);
  // x *= s in place (Gemma's embedding scale sqrt(n_embd)): f32 rows, or
  // rows of the activation type.
  virtual void scale(Tensor& x, float s);
  // out = x in out's element type (f32, or the activation type: the
  // residual stream as activations), the same number of elements.
  virtual void convert(const Tensor& x, Tensor& out);
  // x = cap * tanh(x / cap) in place (final-logit soft-capping); cap > 0.
  virtual void softcap(Tensor& x, float cap);
  // attention() with p.window, p.softcap and p.sinks honoured: a query at
  // position pos attends to its sequence's keys max(0, pos - window + 1) ..
  // pos (window 0: from 0), with logits s = p.scale * q.k soft-capped as
  // p.softcap * tanh(s / p.softcap) when p.softcap > 0, then softmax (with
  // the head's sink logit in the denominator where p.sinks is set).
  virtual Handoff attention_ext(const Tensor& q, const KVLayer& cache, const StepMeta& m, const AttentionParams& p,
                                Tensor& out);

  // out = x * sigmoid(gate), elementwise; gate has x's shape, or one column
  // (a scalar per row, broadcast over the row). out may alias x. (Qwen3.5's
  // gated attention output and its shared expert's gate.)
  virtual void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out);

  // --- Gated DeltaNet (recurrent layers of hybrid models) ---------------------
  // Ops over the flattened batch: each sequence's tokens are
  // [seq_starts[s], seq_starts[s + 1]) in order, its state in row
  // m.state_slots[s] of `st` (backend.h RecurrentLayer: the zero state when
  // the sequence's first token of the step is at position 0). Padding
  // sequences (position -1) are skipped.
  //
  // Causal depthwise conv1d with SiLU: x [n_tokens, conv_channels] (the q|k|v
  // projections), w f32 [conv_channels rows, conv_kernel]: for token t of a
  // sequence and channel c, out[t, c] = silu(sum_k w[c, k] * in(t - (K-1) + k, c))
  // with K = conv_kernel, in(p) the input of position p (this step's x, or
  // the state's rows for earlier positions; zero before position 0). Then
  // the state's conv rows hold the inputs of the last K - 1 positions.
  virtual void conv1d_silu_state(const Tensor& x, const Tensor& w, const StepMeta& m, const RecurrentLayer& st,
                                 Tensor& out);
  // The gated delta rule. qkv [n_tokens, conv_channels]: the conv's output,
  // q (n_k_heads x head_k_dim) | k (the same) | v (n_v_heads x head_v_dim);
  // alpha, beta [n_tokens, n_v_heads] (the raw projections); dt_bias, a
  // f32 [n_v_heads] (a = -exp(A_log) < 0). qkv is of the activation type
  // (f32 on the CPU), as are the conv's x and out; alpha, beta and out are
  // f32 on every backend (the decay is steep in alpha; out's scale is the
  // state's, before gated_rms_norm divides it out). Per token and value head h, with
  // q, k of head h % n_k_heads, each L2-normalised (x / max(|x|, l2_eps)),
  // q further scaled by 1/sqrt(head_k_dim):
  //   g = softplus(alpha_h + dt_bias_h) * a_h   (softplus(x) = x above 20)
  //   b = sigmoid(beta_h)
  //   S <- exp(g) S;  S <- S + k (b (v - S^T k))^T;  out_h = S^T q
  // (S [head_k_dim, head_v_dim], held transposed in the state). out
  // [n_tokens, n_v_heads * head_v_dim]; the state row holds S afterwards.
  virtual void gated_delta_net(const Tensor& qkv, const Tensor& alpha, const Tensor& beta, const Tensor& dt_bias,
                               const Tensor& a, const StepMeta& m, const RecurrentLayer& st, float l2_eps,
                               Tensor& out);
  // Gated RMSNorm: per head of w.cols() elements of each row of x,
  // out = rms_norm(x_head) * w * silu(z_head); z has x's shape. x is f32
  // (gated_delta_net's output), z and out of the activation type.
  virtual void gated_rms_norm(const Tensor& x, const Tensor& w, const Tensor& z, float eps, Tensor& out);
  // dst = src for `bytes` bytes of this backend's memory (recurrent-state
  // rows: a prefix checkpoint restored to a sequence's slot, or saved from
  // it), queued in order with the ops.
  virtual void copy_on_device(void* dst, const void* src, size_t bytes);

  // --- multi-head latent attention (DeepSeek V2/V3; MlaParams) ----------------
  // In place: q [n_tokens, n_heads * (nope + rope)] turns each head's last
  // rope dims by RoPE (rope.n_rot == p.rope); kv [n_tokens, lora + rope]
  // (attn_kv_a_mqa's output) has its first lora dims RMS-normed by kv_norm
  // (f32 [lora]) with eps and its last rope dims turned; then each token's
  // kv row goes into the cache's K at its slot (slots of -1 skipped).
  virtual void mla_rope_store_kv(Tensor& q, Tensor& kv, const Tensor& kv_norm, float eps, const StepMeta& m,
                                 const RopeParams& rope, const MlaParams& p, const KVLayer& cache);
  // Causal attention in the latent space, per token t (sequence keys j in
  // [0, position]) and head h, q_nope and q_rope its parts of q (after
  // mla_rope_store_kv), K_j the cached row [c_j | k_rope_j]:
  //   q_lat = [w_kb[h]^T-absorbed q_nope | q_rope], q_lat[i] =
  //           sum_d w_kb[h][i][d] q_nope[d] for i < lora (so that q_lat .
  //           K_j = q_nope . (w_kb[h] c_j) + q_rope . k_rope_j)
  //   s_j = p.scale * q_lat . K_j;  o = sum_j softmax(s)_j c_j
  //   out[t, h*v .. (h+1)*v) = w_vb[h] . o
  // — attention over the per-head keys and values without expanding them.
  // q_lat [n_tokens, n_heads * (lora + rope)] and o_lat [n_tokens, n_heads
  // * lora], of the activation type, are scratch the backend may use
  // (unspecified afterwards); out [n_tokens, n_heads * v].
  virtual void attention_mla(const Tensor& q, const KVLayer& cache, const StepMeta& m, const MlaParams& p,
                             Tensor& q_lat, Tensor& o_lat, Tensor& out);

  // --- mixture of experts -----------------------------------------------------
  // Routing: router_logits f32 [n, n_expert] -> ids i32 [n, n_used] and
  // weights f32 [n, n_used]: probabilities (p.gating: softmax over all
  // experts, or the sigmoid of each logit); choice scores = probability +
  // p.choice_bias (where set); with groups (p.grouped()) the experts
  // outside the p.n_group_used groups of the highest sums of their two
  // best scores are out of the choice; the n_used largest scores in
  // descending order (ties to the lower index), their unbiased
  // probabilities renormalised to sum 1 when p.norm_weights (Mixtral's
  // softmax over the chosen top-k is the same thing), times
  // p.weights_scale. n_used must be at most n_group_used * (n_expert /
  // n_group). Returns ids' Handoff, for the moe_ffn of these ids.
  virtual Handoff moe_route(const Tensor& router_logits, const MoeParams& p, Tensor& ids, Tensor& weights);
  // The router logits x . w_router^T (+ p.router_bias where set) into
  // `logits` (f32 [n, n_expert]), then moe_route on them; the default runs
  // matmul, add_bias and moe_route. x is not
  // changed: what x was handed over with goes on to moe_ffn.
  virtual Handoff moe_router_route(const Tensor& x, const Tensor& w_router, const MoeParams& p, Tensor& logits,
                                   Tensor& ids, Tensor& weights);
  // out[t] = sum_j weights[t, j] * down_e . (act(gate_e . x[t]) * (up_e . x[t]))
  // with e = ids[t, j] (each product plus expert e's bias where w has
  // biases): only the chosen experts' weights are read. Scratch
  // is the backend's own, sized by reserve() from BackendLimits' expert
  // fields. x_in, ids_in: what x's and ids' producers handed over.
  virtual void moe_ffn(const Tensor& x, const Tensor& ids, const Tensor& weights, const ExpertWeights& w,
                       const MoeParams& p, Tensor& out, const Handoff& x_in = {}, const Handoff& ids_in = {});

  // --- tensor parallelism (model/shard.h) -------------------------------------
  // embed() from a vocabulary range's rows: out[t, :] = table[id - first, :]
  // for ids in [first, first + table.rows()), zeros for the others (the
  // ranks' rows are then summed by an all-reduce).
  virtual void embed_range(const Tensor& table, int64_t first, const StepMeta& m, Tensor& out);
  // sample() where each rank holds a range of the vocabulary: `logits`
  // [n_rows, its range] are ids [first, first + logits.cols()) of
  // vocab_total. Every rank calls it with the same rows and penalties
  // (global ids) and gets the same results, equal to sample() over the whole
  // logits; only per-row summaries (maxima, sums, histograms, candidates)
  // cross between ranks through `comm`, never the logits.
  virtual void sample_vocab_parallel(const Tensor& logits, int64_t first, int64_t vocab_total,
                                     std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
                                     Communicator& comm, std::vector<SampleResult>& out);

  // --- fused ops (defaults compose the ops above; backends may fuse) -------
  // outs[i] = x . ws[i]^T for each weight (e.g. the q, k and v
  // projections), plus biases[i] (f32 [rows]) where biases is not empty and
  // biases[i] has data. x_in as for matmul (here also rows whose norm is
  // pending: matmul_add_rms_norm); returns what x carries now.
  virtual Handoff matmul_multi(const Tensor& x, std::span<const Tensor> ws, std::span<Tensor> outs,
                               std::span<const Tensor> biases, const Handoff& x_in = {});
  // Whether the loader should place a layer's q, k and v weights (when they
  // share a format) in one allocation, q's rows, then k's, then v's, as a
  // fused attn_qkv file tensor is, and its FFN gate and up weights likewise
  // (gate's rows, then up's, as a fused ffn_up is): a backend that copies
  // weights into its own memory multiplies a batch by such adjacent weights
  // in one matmul.
  virtual bool packs_qkv() const { return false; }
  // out = act(x . w_gate^T) * (x . w_up^T): SwiGLU or GeGLU (act as
  // swiglu() and geglu() compute it); gate and up are scratch the default
  // uses ([n, n_ff] each). x_in as for matmul_multi.
  virtual void matmul_gate_up_glu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& gate, Tensor& up,
                                  Tensor& out, Activation act, const Handoff& x_in = {});
  // x += y, then out = rms_norm(x) * w. Returns out's Handoff.
  virtual Handoff add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, Tensor& out);
  // out = x . w^T, residual += out, next = rms_norm(residual) * norm_w (an
  // o or down projection, then the next block's norm): matmul then
  // add_rms_norm. `consumers` are the weights the one op right after
  // (matmul_multi or matmul_gate_up_glu) multiplies next by, and nothing
  // else reads next: a backend may leave next un-normed for that op (and
  // out unwritten), which the returned Handoff says (norm_pending). x_in as
  // for matmul.
  virtual Handoff matmul_add_rms_norm(const Tensor& x, const Tensor& w, Tensor& out, Tensor& residual,
                                      const Tensor& norm_w, float eps, Tensor& next, std::span<const Tensor> consumers,
                                      const Handoff& x_in = {});
  // Load time: folds an RMSNorm's gain into the weights of every matmul of
  // its output (`consumers`' columns scaled by it, the gain set to ones), so
  // that the backend may fuse the norm into those matmuls
  // (matmul_add_rms_norm). True if it did; false leaves both unchanged (the
  // default).
  virtual bool fold_norm_gain(Tensor& gain, std::span<const Tensor> consumers);
  // The same with y post-normed first (Gemma's and GLM-4's norms after
  // attention and FFN): x += rms_norm(y) * w_y, the normed y rounded to y's
  // type as a separate rms_norm would store it; then out = rms_norm(x) * w.
  // out has y's shape and type (the default uses it as scratch). Returns
  // out's Handoff.
  virtual Handoff add_post_norm_rms_norm(Tensor& x, const Tensor& y, const Tensor& w_y, const Tensor& w, float eps,
                                         Tensor& out);
  // Two RMSNorms at once: a_out = rms_norm(a) * wa and b_out = rms_norm(b) *
  // wb, rows of the same width (the per-head norms of q and k).
  virtual void rms_norm_pair(const Tensor& a, const Tensor& wa, Tensor& a_out, const Tensor& b, const Tensor& wb,
                             Tensor& b_out, float eps);
  // The per-head q/k norms, RoPE and the KV store in one (Qwen3's and
  // Gemma 3's attention input): q = rms_norm(q_raw) * wq and k =
  // rms_norm(k_raw) * wk per head of cache.head_dim (rounded to q's type as
  // rms_norm_pair stores them), then rope_store_kv(q, k, v). The default
  // runs those two ops.
  virtual void qk_norm_rope_store_kv(const Tensor& q_raw, const Tensor& wq, const Tensor& k_raw, const Tensor& wk,
                                     float eps, Tensor& q, Tensor& k, const Tensor& v, const StepMeta& m,
                                     const RopeParams& rope, const KVLayer& cache);
  // RoPE of q alone, [n_tokens, heads of head_dim] at the tokens' positions
  // as rope_store_kv turns q; nothing is stored (a layer attending to an
  // earlier layer's KV: Gemma 4's shared-KV layers).
  virtual void rope_q(Tensor& q, int32_t head_dim, const StepMeta& m, const RopeParams& rope);
  // weights[t, j] *= scales[ids[t, j]] for the rows of ids: a per-expert
  // output scale (Gemma 4's ffn_down_exps.scale, f32 [n_expert]) applied
  // through the routing weights that moe_ffn sums the experts with.
  virtual void moe_scale_weights(const Tensor& ids, const Tensor& scales, Tensor& weights);

  // --- graphs ----------------------------------------------------------------
  // Backends that can record a sequence of ops once and replay it (CUDA
  // graphs) run `record` under capture the first time a key is seen and
  // replay it afterwards; the ops must then see the same shapes and
  // pointers. Others just run `record`.
  virtual bool supports_graphs() const { return false; }
  virtual void run_graph(uint64_t key, const std::function<void()>& record) { record(); }
  // Drops every recorded graph (their buffers are about to be freed).
  virtual void clear_graphs() {}

  // Device-to-device copy bandwidth in bytes/s (read + write), measured now;
  // 0 where not meaningful.
  virtual double measure_copy_bandwidth() { return 0.0; }

 protected:
  // Throws "backend '<name>' does not implement op '<op>'".
  [[noreturn]] void unsupported(const char* op) const;
  // Checks that `op`, which reads x, may take x_in: it describes x (or
  // nothing), and no norm is pending on it unless the op applies it
  // (norm_ok).
  static void check_handoff(const Tensor& x, const Handoff& x_in, const char* op, bool norm_ok = false);
};

}  // namespace rf
