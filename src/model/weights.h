// Weights of a model: every tensor looked up by its GGUF name (llama.cpp's
// names), shape-checked against the config (a missing tensor or a wrong
// shape is an error naming it) and made usable by the backend. Fused
// weights (attn_qkv; ffn_up holding gate and up) are loaded once and seen as
// row slices, so the forward pass treats them like separate matrices. A
// mixture-of-experts layer has a router (ffn_gate_inp) and 3-D expert
// tensors (ffn_{gate,up,down}_exps) seen as matrices with the experts
// stacked along rows (backend.h, ExpertWeights) instead of the dense FFN.
// Hybrid models' recurrent layers have the Gated DeltaNet weights in place
// of q/k/v/o; their MTP blocks are loaded beside the layers (mtp).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/shard.h"

namespace rf {

// Optional tensors are empty (data == nullptr) when the model has none.
struct LayerWeights {
  Tensor attn_norm;  // [n_embd] f32
  Tensor wq;         // [q_dim rows, n_embd]  (rows of attn_qkv when fused)
  Tensor wk;         // [kv_dim rows, n_embd]
  Tensor wv;         // [kv_dim rows, n_embd]
  Tensor bq, bk, bv;           // [q_dim], [kv_dim], [kv_dim] f32, optional
  Tensor q_norm, k_norm;       // [head_dim] f32, optional (per-head RMSNorm)
  Tensor wo;         // [n_embd rows, q_dim]
  Tensor bo;         // [n_embd] f32, optional (attn_output.bias)
  Tensor sinks;      // [n_head] f32, optional (attn_sinks)
  Tensor post_attn_norm;       // [n_embd] f32, optional
  Tensor ffn_norm;   // [n_embd] f32
  Tensor w_gate;     // [n_ff rows, n_embd]  (rows of ffn_up when fused)
  Tensor w_up;       // [n_ff rows, n_embd]
  Tensor w_down;     // [n_embd rows, n_ff]
  Tensor router;     // ffn_gate_inp [n_expert rows, n_embd] (MoE layers; the dense FFN tensors are then empty)
  Tensor router_bias;  // [n_expert] f32, optional (ffn_gate_inp.bias)
  Tensor choice_bias;  // [n_expert] f32, optional (exp_probs_b.bias): added for the choice of experts only
  ExpertWeights experts;  // ffn_{gate,up,down}_exps (MoE layers)
  Tensor post_ffn_norm;        // [n_embd] f32, optional
  bool fused_qkv = false;
  // Gated attention output (attn_output_gate): the gate rows of attn_q.
  Tensor w_attn_gate;  // [q_dim rows, n_embd]
  // A shared expert beside the routed ones (n_ff_shexp > 0).
  Tensor shexp_gate, shexp_up;  // [n_ff_shexp rows, n_embd]
  Tensor shexp_down;            // [n_embd rows, n_ff_shexp]
  Tensor shexp_gate_inp;        // ffn_gate_inp_shexp [1 row, n_embd]: the shared expert's scale before the sigmoid
  // Gated DeltaNet layers (recurrent; the attention tensors above are then empty).
  Tensor ssm_in;        // attn_qkv [conv_channels rows, n_embd]: q | k | v before the conv
  Tensor ssm_z;         // attn_gate [ssm_inner rows, n_embd]: the output norm's gate
  Tensor ssm_beta;      // [v heads rows, n_embd]: write strength before the sigmoid
  Tensor ssm_alpha;     // [v heads rows, n_embd]: decay before softplus
  Tensor ssm_conv;      // ssm_conv1d [conv_channels rows, conv_kernel] f32
  Tensor ssm_dt_bias;   // ssm_dt.bias [v heads] f32
  Tensor ssm_a;         // [v heads] f32: -exp(A_log)
  Tensor ssm_norm;      // [head_dim] f32: the gated RMSNorm's weight, shared by the heads
  Tensor ssm_out;       // [n_embd rows, ssm_inner]
  // Multi-head latent attention (ModelConfig::is_mla): wq is attn_q_a
  // [q_lora rows, n_embd] with a q LoRA, else attn_q [mla_q_dim rows, n_embd].
  Tensor q_a_norm;   // attn_q_a_norm [q_lora] f32 (q LoRA only)
  Tensor wq_b;       // attn_q_b [mla_q_dim rows, q_lora] (q LoRA only)
  Tensor wkv_a;      // attn_kv_a_mqa [kv_lora + n_rot rows, n_embd]: c, then the RoPE key
  Tensor kv_a_norm;  // attn_kv_a_norm [kv_lora] f32: c's RMSNorm
  Tensor w_kb;       // attn_k_b [n_head * kv_lora rows, k_nope]: head h's rows h * kv_lora ..
  Tensor w_vb;       // attn_v_b [n_head * mla_v rows, kv_lora]: head h's rows h * mla_v ..
  // Gemma 4 (ModelConfig::stepwise_layers):
  Tensor v_norm;         // [head_dim] f32 ones: V's RMSNorm has no weight (v_norm)
  float out_scale = 1.0f;  // layer_output_scale
  Tensor router_norm;    // [n_embd] f32: ffn_gate_inp.scale / sqrt(n_embd), the router input's norm gain
  Tensor expert_scale;   // ffn_down_exps.scale [n_expert] f32
  Tensor pre_ffn_norm_2, post_ffn_norm_1, post_ffn_norm_2;  // [n_embd] f32 (moe_with_dense)
  Tensor ple_gate;       // inp_gate [n_embd_per_layer rows, n_embd]
  Tensor ple_proj;       // proj [n_embd rows, n_embd_per_layer]
  Tensor ple_post_norm;  // post_norm [n_embd] f32
  Tensor ple_embd;       // the layer's columns of per_layer_token_embd [n_vocab rows, n_embd_per_layer]
  // The weights the layer's first matmul multiplies its normed input by
  // (q, k, v [and the attention gate], or the DeltaNet input projections).
  std::vector<Tensor> mixer_inputs() const;
};

// A multi-token-prediction (NextN) block: a full-attention layer (its FFN
// the model's kind) fed by eh_proj of [RMSNorm(embedding) | RMSNorm(hidden)]
// (speculative decoding's draft head; not run by the forward pass).
struct MtpWeights {
  LayerWeights layer;
  Tensor eh_proj;                // [n_embd rows, 2 * n_embd]
  Tensor enorm, hnorm;           // [n_embd] f32
  Tensor embed_tokens;           // [n_vocab rows, n_embd], optional (else the model's)
  Tensor shared_head_head;       // [n_vocab rows, n_embd], optional (else the model's output)
  Tensor shared_head_norm;       // [n_embd] f32, optional
};

// Where weights live beside the backend's memory: the routed experts
// (ffn_{gate,up,down}_exps and their biases) of the first
// host_expert_layers layers stay in host memory (a CPU backend's copy of
// them), and the backend runs their FFNs on the host's cores
// (--cpu-moe, --n-cpu-moe N). Only GPU backends take it; a CPU backend
// holds everything in host memory anyway.
struct WeightPlacement {
  int32_t host_expert_layers = 0;
};

struct ModelWeights {
  Tensor tok_embd;     // [n_vocab rows, n_embd]
  Tensor output_norm;  // [n_embd] f32
  Tensor output;       // [n_vocab rows, n_embd]; the embeddings when tied
  Tensor rope_freqs;   // [n_rot/2] f32, or empty
  // Per-layer embeddings (n_embd_per_layer > 0): per_layer_model_proj
  // [n_layer * n_embd_per_layer rows, n_embd] (layer il's rows together) and
  // per_layer_proj_norm [n_embd_per_layer] f32.
  Tensor ple_model_proj, ple_proj_norm;
  std::vector<LayerWeights> layers;
  std::vector<MtpWeights> mtp;  // [n_layer_nextn]: blocks n_layer, n_layer + 1, ...
  uint64_t bytes = 0;  // weight bytes on the backend
  uint64_t expert_bytes = 0;  // of them, the experts' (ffn_*_exps)
  // Experts kept in host memory (WeightPlacement): how many layers' and
  // their bytes (not in `bytes`).
  int32_t host_expert_layers = 0;
  uint64_t host_expert_bytes = 0;

  // Weight bytes a decode step of `seqs` sequences reads: all but the
  // experts no sequence chose — for MoE models the expected share of the
  // experts under uniform routing, 1 - (1 - n_used / n_expert)^seqs
  // (exactly n_used / n_expert for one sequence).
  double bytes_read_per_step(int32_t seqs, int32_t n_used, int32_t n_expert) const;
  bool tied_output = false;
  // Host copies of the parts of weights a tensor-parallel rank holds that
  // are not contiguous in the file (column slices); kept while the backend
  // reads weights in place (the CPU's), else freed once loaded.
  std::vector<std::vector<uint8_t>> host_parts;
  // Host memory of the host-resident experts' tensors that are not copies of
  // the mapped file (biases as f32, dummy weights, fused gate/up split):
  // a CPU backend's allocations, freed with it.
  std::shared_ptr<Backend> host_store;
  std::vector<std::vector<uint8_t>> host_expert_parts;
  // The host-resident experts' memory page-locked by the backend
  // (pin_host_experts); released before the memory itself.
  std::vector<std::shared_ptr<const void>> host_pins;

  // Page-locks the host-resident experts' memory through `backend`
  // (Backend::pin_host_memory): their tensors' whole pages, adjacent ranges
  // merged, one range at a time with progress(done_bytes, total_bytes).
  // Stops at the first range the backend cannot lock. Returns the bytes
  // locked.
  uint64_t pin_host_experts(Backend& backend, const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

  // Loads the whole model, or with shard.split() rank shard.rank's part of
  // it (model/shard.h): `c` is the whole model's configuration.
  // progress(done_bytes, total_bytes) is called as tensors load.
  static ModelWeights load(const gguf::File& f, const ModelConfig& c, Backend& backend,
                           const std::function<void(uint64_t, uint64_t)>& progress = nullptr, ShardSpec shard = {},
                           WeightPlacement placement = {});
};

}  // namespace rf
