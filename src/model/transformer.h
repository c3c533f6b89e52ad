// Transformer: the forward pass over a flattened multi-sequence batch
// (DESIGN.md step 4), written once against the Backend interface for every
// family: ModelConfig's building blocks switch its optional steps on (biases,
// q/k norms, post norms, GeGLU, soft-caps, sliding windows, embedding scale,
// experts in place of the dense FFN, a shared expert beside them, a gated
// attention output, Gated DeltaNet layers or multi-head latent attention in
// place of attention; Gemma 4's
// per-layer shapes, shared KV, per-layer embeddings and experts beside the
// dense FFN, run step by step).
// Each layer stores and reads its K/V through its KV group's slots and
// block tables (kv/group_layout.h, StepMeta::for_group); a recurrent layer
// instead reads and writes each sequence's state row (StepMeta::
// state_slots), and the batch's state copies (prefix checkpoints) run
// before the first layer and after the last.
// Owns the activation workspace, sized at construction for the largest step;
// forward allocates nothing.
// With a communicator, it runs one tensor-parallel rank (model/shard.h):
// `config` and `weights` are the rank's, the embedding is summed over the
// ranks' vocabulary ranges, the attention output and FFN down projections
// are all-reduced, and the logits are the rank's vocabulary range.
#pragma once

#include "backend/backend.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/shard.h"
#include "model/weights.h"

namespace rf {

// The first rows x cols elements of a workspace buffer, as a tensor of
// `cols` columns (a layer narrower than the widest uses the front).
Tensor rows_of(const Tensor& buf, int64_t cols, int64_t rows);

class Transformer {
 public:
  Transformer(const ModelConfig& config, const ModelWeights& weights, Backend& backend, const BackendLimits& limits,
              Communicator* comm = nullptr);
  ~Transformer();
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  // Runs every layer for all of the batch's tokens, writing their K/V into
  // `kv`, and returns f32 logits [batch.n_logits(), vocab_range().count] on
  // the backend (valid until the next call). With `hidden_states`, every
  // token also runs the whole last layer and the final norm: hidden()
  // then holds the normed final hidden state of each (embedding requests).
  Tensor forward(const Batch& batch, KVCache& kv, bool hidden_states = false);
  // [n_tokens of the last forward, n_embd] (activation type): the final
  // norm of each token's last hidden state, after a forward with
  // hidden_states; valid until the next call.
  Tensor hidden() const { return xn_.slice_rows(0, hidden_rows_); }

  // Captures the decode graphs of every batch bucket up front (backends
  // with graphs), so that later steps allocate nothing.
  void warmup(KVCache& kv);

  const BackendLimits& limits() const { return limits_; }
  // The token ids whose logits forward() returns (all, unless tensor parallel).
  IndexRange vocab_range() const { return vocab_; }
  Backend& backend() { return backend_; }

 private:
  Tensor alloc_act(int64_t cols, int64_t rows, DType type, const char* what);
  void run_layers(const StepMeta& m, KVCache& kv, bool hidden_states = false);
  // Layer il's q/k/v projections of the normed input in xn_, [q/k norms,]
  // RoPE and the store of K and V into the layer's cache: returns q.
  // (xn_h: what xn's norm handed over, Backend::Handoff)
  Tensor project_qkv(int32_t il, const StepMeta& m, const KVLayer& cache, const Handoff& xn_h);
  // Paged attention of q over the layer's cache into rows of attn_ (times
  // sigmoid of the gate rows, with a gated attention output).
  // What it hands over with them goes into attn_h.
  Tensor attend(int32_t il, const StepMeta& m, const KVLayer& cache, const Tensor& q, Handoff& attn_h);
  // Layer il's token mixer for all the step's tokens: attention (q/k/v, KV
  // store, attention) or the Gated DeltaNet block (input projections,
  // conv, delta rule, gated norm): the rows its output projection
  // (mixer_out) multiplies.
  // out_h: what the mixer hands over with its output.
  Tensor mixer(int32_t il, const StepMeta& m, KVCache& kv, const Handoff& xn_h, Handoff& out_h);
  Tensor delta_net(int32_t il, const StepMeta& m, const RecurrentLayer& st, const Handoff& xn_h);
  // Multi-head latent attention (transformer_mla.cpp): the rows of attn_
  // (n_head * mla_v wide) that attn_output multiplies.
  Tensor mla_attention(int32_t il, const StepMeta& m, const KVLayer& cache, const Handoff& xn_h);
  MlaParams mla_params(int32_t il) const;
  const Tensor& mixer_out(int32_t il) const;
  // Sums a row-parallel product over the ranks (tensor parallel only).
  void reduce(Tensor& x);
  // The FFN of the normed rows xn (dense, or router -> top-k experts):
  // returns its down projection (rows of proj_), before any post-FFN norm
  // and the sum over ranks.
  Tensor ffn_block(int32_t il, const Tensor& xn, const Handoff& xn_h);
  // A dense FFN's GLU of the normed rows xn (rows of gate_): what its down
  // projection multiplies.
  Tensor ffn_hidden(int32_t il, const Tensor& xn, const Handoff& xn_h);
  // x += in . w^T [+ bias] (summed over the ranks, post-normed where
  // post_norm is present), then xn = the next RMSNorm of x, whose matmuls by `consumers`
  // come next (the backend may fuse the three: Backend::matmul_add_rms_norm).
  // in_h: what in's producer handed over; returns xn's Handoff, for those matmuls.
  Handoff project_into_residual(const Tensor& in, const Handoff& in_h, const Tensor& w, const Tensor& bias,
                                Tensor& x, const Tensor& post_norm, const Tensor& next_norm,
                                std::span<const Tensor> consumers, Tensor& xn);
  // The last layer's x += ffn_out (summed over the ranks, post-normed
  // where the model has it): no next norm to fuse it with.
  void add_last_residual(int32_t il, Tensor& x, Tensor& ffn_out);
  // The last layer past its token mixer for the rows that need logits only
  // (m.n_logits < m.n_tokens: a prompt's other tokens only leave their K
  // and V, or state): the mixer output `mix` of every token, its rows that
  // need logits gathered with their residuals, then the output projection
  // and the FFN on those rows alone.
  void last_layer_for_logits(int32_t il, const StepMeta& m, const Tensor& mix, const Tensor& x);
  // The final norm, the LM head [and soft-cap] of the gathered rows in last.
  void logits_of(const Tensor& last, int32_t nl);
  // x += block_out (summed over the ranks, then post-normed when post_norm
  // is present), then xn = the next RMSNorm of x: one fused op either way
  // (with the sum too where the communicator fuses it).
  // Returns xn's Handoff.
  Handoff residual_and_norm(Tensor& x, Tensor& block_out, const Tensor& post_norm, const Tensor& next_norm,
                            Tensor& xn);
  // The layers one step at a time (ModelConfig::stepwise_layers: per-layer
  // head sizes and widths, shared KV, V normed or taken from K, experts
  // beside the dense FFN, per-layer embeddings, layer output scales), every
  // row through the last layer (model/transformer_blocks.cpp).
  void run_layers_stepwise(const StepMeta& m, KVCache& kv, bool hidden_states);
  // The dense FFN of xn (post_ffw_norm_1) plus the experts of
  // RMSNorm(x) (pre_ffw_norm_2; routed by RMSNorm(x) * router_norm,
  // scaled per expert; post_ffw_norm_2): returns their sum (rows of aux_).
  Tensor ffn_beside_experts(int32_t il, const Tensor& x, const Tensor& xn);
  // x += RMSNorm(proj(gelu(x . inp_gate) * layer il's per-layer input)),
  // the input made from the token's per_layer_token_embd columns and the
  // embeddings' projection (ple_x0_).
  void per_layer_embedding(int32_t il, const StepMeta& m, Tensor& x);
  // Pure decode steps (one new token and one logit row per sequence) run as
  // graphs, padded to a bucket size.
  bool graph_eligible(const Batch& b) const;
  static int32_t graph_bucket(int32_t n);
  // A captured graph's key: the bucket and the step's graph variant (StepMeta).
  static uint64_t graph_key(int32_t bucket, const StepMeta& m);
  void pad_for_graph(const Batch& b, int32_t bucket);

  const ModelConfig& c_;
  const ModelWeights& w_;
  Backend& backend_;
  Communicator* comm_;  // tensor parallel only
  IndexRange vocab_;
  BackendLimits limits_;
  std::vector<void*> buffers_;
  // Workspace, [max_tokens rows] unless noted:
  Tensor x_;        // residual stream [n_embd]
  Tensor xn_;       // normed input [n_embd]
  Tensor q_, k_, v_;  // [q_dim], [kv_dim], [kv_dim]
  Tensor attn_;     // [q_dim]
  Tensor proj_;     // projection output [n_embd]
  Tensor gate_, up_;  // [n_ff] (dense FFNs only)
  MoeParams moe_;                 // experts' shape and routing (MoE models only, as are the next three)
  Tensor router_logits_;          // [n_expert] f32
  Tensor expert_ids_;             // [n_expert_used] i32: each token's chosen experts
  Tensor expert_weights_;         // [n_expert_used] f32: their weights
  Tensor q_raw_, k_raw_;  // [q_dim], [kv_dim]: q and k before their per-head norm (qk_norm only)
  Tensor attn_gate_;      // [q_dim]: the attention output's gate (attn_output_gate only)
  // Multi-head latent attention (is_mla only; q_raw_ holds the projected
  // queries [mla_q_dim], k_ the kv rows, q_ the absorbed queries):
  Tensor mla_qa_, mla_qan_;  // [mla_q_lora]: the q LoRA's rows, normed (q LoRA only)
  Tensor mla_lat_;           // [n_head * mla_kv_lora]: attention_mla's weighted latents
  // Gated DeltaNet layers (hybrid models only):
  Tensor ssm_mixed_;      // [conv_channels]: q | k | v before the conv
  Tensor ssm_conv_;       // [conv_channels]: after the conv and SiLU
  Tensor ssm_z_;          // [ssm_inner]: the output norm's gate
  Tensor ssm_beta_, ssm_alpha_;  // [v heads] f32
  Tensor ssm_core_;       // [ssm_inner] f32: the delta rule's output (gated-normed into ssm_conv_'s rows)
  // A shared expert (n_ff_shexp > 0 only):
  Tensor sh_gate_, sh_up_;  // [n_ff_shexp]
  Tensor sh_out_;           // [n_embd]
  Tensor sh_scale_;         // [1]
  std::vector<std::vector<Tensor>> mixer_inputs_;  // [n_layer]: LayerWeights::mixer_inputs, kept
  Tensor post_;     // a post-norm's output [n_embd] (post norms only)
  Tensor aux_;      // [n_embd]: the dense branch beside the experts (moe_with_dense only)
  // Per-layer embeddings (n_embd_per_layer > 0 only):
  Tensor ple_x0_;   // [n_embd]: the scaled embeddings, which every layer's input projection reads
  Tensor ple_in_, ple_pp_, ple_gate_;  // [n_embd_per_layer]: the layer's input, its projection part, the gate
  Tensor last_attn_;  // [max_logits rows, max(q_dim, ssm_inner)]: the last layer's mixer rows that need logits
  Tensor last_;     // [max_logits rows, n_embd]
  Tensor last_n_;   // [max_logits rows, n_embd]
  Tensor logits_;   // [max_logits rows, n_vocab] f32
  Batch padded_;    // the padded copy of a decode batch (reused: no per-step allocation once grown)
  int64_t hidden_rows_ = 0;  // rows of xn_ that hold final hidden states (forward with hidden_states)
};

}  // namespace rf
