// ModelConfig: the hyper-parameters of a decoder-only transformer read from
// GGUF metadata ({arch}.embedding_length, ...) with llama.cpp's keys and
// defaults, validated for consistency, plus the building blocks its
// architecture combines (model/arch.cpp says which each family uses). One
// forward pass (model/transformer.cpp) runs every combination; a family is a
// configuration, not a copy of the forward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/activation.h"
#include "core/pooling.h"
#include "core/rope_params.h"
#include "gguf/reader.h"

namespace rf {

enum class BiasUse { None, Optional, Required };  // attn_{q,k,v}.bias

struct ModelConfig {
  std::string arch;        // general.architecture: "llama", "qwen2", "gemma3", ...
  std::string name;        // general.name
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;    // attention.key_length (== value_length), default n_embd / n_head
  int32_t n_ff = 0;        // feed_forward_length: the dense FFN's width (unused by qwen3moe's expert layers)
  int32_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  RopeParams rope;         // freq_factors stays null here; the model sets it
  RopeParams rope_swa;     // sliding-window layers: own base and scale (gemma3 rope.freq_base_swa)
  std::string rope_scaling = "none";  // none | linear | yarn

  // --- building blocks (all off for Llama) ---------------------------------
  BiasUse qkv_bias = BiasUse::None;
  bool qk_norm = false;         // attn_q_norm / attn_k_norm [head_dim]: RMSNorm of each head before RoPE
  bool post_attn_norm = false;  // post_attention_norm on the attention output before the residual add
  bool post_ffn_norm = false;   // post_ffw_norm on the FFN output before the residual add
  bool fused_gate_up = false;   // ffn_up holds gate rows then up rows (2 * n_ff), no ffn_gate
  Activation activation = Activation::SiLU;
  float embd_scale = 1.0f;      // embeddings multiplied by this (gemma: sqrt(n_embd))
  float attn_scale = 0.0f;      // q.k scale; 1/sqrt(head_dim) unless the family overrides it
  float attn_softcap = 0.0f;    // > 0: attention logits soft-capped (gemma2)
  float final_softcap = 0.0f;   // > 0: output logits soft-capped (gemma2)
  int32_t sliding_window = 0;   // > 0: keys this many positions old or older are masked on SWA layers
  std::vector<uint8_t> swa_layers;  // [n_layer]: 1 where the layer uses the sliding window
  bool out_bias = false;        // attn_output.bias [n_embd] after the output projection
  bool attn_sinks = false;      // attn_sinks [n_head]: a sink logit per head in the softmax (gpt-oss)
  std::string ffn_norm_name = "ffn_norm";  // the pre-FFN norm's tensor (gpt-oss: post_attention_norm)

  // --- mixture of experts (n_expert 0: every layer's FFN is dense) --------
  // Every layer's FFN is then a router and n_expert experts, n_expert_used
  // of them run per token (model/arch.cpp says which families have them).
  int32_t n_expert = 0;         // expert_count
  int32_t n_expert_used = 0;    // expert_used_count: 1..n_expert
  int32_t n_ff_expert = 0;      // each expert's FFN width (the family's rule, model/arch.cpp)
  bool expert_weights_norm = true;  // expert_weights_norm: the chosen experts' weights renormalised to sum 1
  bool moe_biases = false;      // router ffn_gate_inp.bias [n_expert] and expert biases ffn_*_exps.bias (gpt-oss)
  Activation expert_activation = Activation::SiLU;  // the experts' GLU
  // > 0: a shared expert (ffn_{gate,up,down}_shexp, this wide) runs for every
  // token beside the routed ones, its output times sigmoid(x . ffn_gate_inp_shexp)
  // where shexp_gated, else added as it is.
  int32_t n_ff_shexp = 0;
  bool shexp_gated = true;
  // Routing beyond softmax (GLM-4.5): sigmoid gating, exp_probs_b.bias for
  // the choice only (expert_choice_bias), and a scale of the weights.
  MoeGating expert_gating = MoeGating::Softmax;
  bool expert_choice_bias = false;  // exp_probs_b.bias [n_expert] on every expert layer
  float expert_weights_scale = 1.0f;
  // The first this many layers have a dense FFN (feed_forward_length wide)
  // in place of the experts (leading_dense_block_count).
  int32_t n_layer_dense_lead = 0;
  // Group-limited routing (expert_group_count, expert_group_used_count;
  // MoeParams::n_group): 0 without groups.
  int32_t n_expert_group = 0;
  int32_t n_expert_group_used = 0;

  // --- multi-head latent attention (deepseek2; mla_kv_lora 0: none) ------
  // Per token a latent c (kv_lora_rank wide, RMS-normed by attn_kv_a_norm)
  // and one RoPE key shared by the heads (rope.n_rot wide) come from
  // attn_kv_a_mqa; the cache keeps only those (one K row of head_dim =
  // kv_lora + n_rot, n_head_kv = 1, no V). Queries: attn_q, or the q LoRA
  // attn_q_a -> RMSNorm(attn_q_a_norm) -> attn_q_b, per head mla_k_nope
  // no-RoPE dims then n_rot RoPE dims. Head h's no-RoPE key is
  // attn_k_b[h] . c and its value attn_v_b[h] . c (mla_v wide); attention
  // runs in the latent space (Backend::attention_mla).
  int32_t mla_kv_lora = 0;  // attention.kv_lora_rank
  int32_t mla_q_lora = 0;   // attention.q_lora_rank (0: attn_q directly, as DeepSeek-V2-Lite)
  int32_t mla_k_nope = 0;   // attention.key_length_mla - rope.dimension_count
  int32_t mla_v = 0;        // attention.value_length_mla: each head's value
  bool is_mla() const { return mla_kv_lora > 0; }
  int32_t mla_q_head() const { return mla_k_nope + rope.n_rot; }  // one head's query (and key) width
  int32_t mla_q_dim() const { return n_head * mla_q_head(); }       // the projected queries
  int32_t mla_out_dim() const { return n_head * mla_v; }            // the values after attn_v_b

  // --- hybrid models: Gated DeltaNet (recurrent) layers -------------------
  // Such a layer keeps no KV: a fixed-size state per sequence (a causal
  // conv's last inputs and a delta-rule matrix per value head, backend.h
  // RecurrentLayer) replaces attention. Shapes from the ssm.* keys.
  std::vector<uint8_t> recurrent_layers;  // [n_layer]: 1 where the layer is a Gated DeltaNet layer
  int32_t ssm_conv_kernel = 0;  // ssm.conv_kernel
  int32_t ssm_k_heads = 0;      // ssm.group_count: q/k heads
  int32_t ssm_v_heads = 0;      // ssm.time_step_rank: value heads (head h uses q/k head h % ssm_k_heads)
  int32_t ssm_head_dim = 0;     // ssm.state_size: each q/k and value head's size
  // Full-attention layers: attn_q holds per head head_dim query rows, then
  // head_dim gate rows; the attention output is multiplied by sigmoid(gate).
  bool attn_output_gate = false;
  std::vector<int32_t> rope_sections;  // rope.dimension_sections (IMRoPE; text positions give every section the same position)
  // Multi-token prediction: nextn_predict_layers blocks stored after the
  // n_layer main ones (blk.{n_layer}.*, with their nextn.* tensors), loaded
  // for speculative decoding; the forward pass does not run them.
  int32_t n_layer_nextn = 0;

  // --- per-layer shapes and shared KV (gemma4) --------------------------
  // Empty: every layer has the scalars above (head_dim, n_head_kv, n_ff are
  // then the largest of a layer's when these are set).
  std::vector<int32_t> layer_head_dim;   // [n_layer]: key_length, or key_length_swa on window layers
  std::vector<int32_t> layer_n_head_kv;  // [n_layer]: head_count_kv given per layer
  std::vector<int32_t> layer_n_ff;       // [n_layer]: feed_forward_length given per layer
  // [n_layer] or empty: the layer whose K/V layer il attends to (il: its
  // own; an earlier layer of the same kind: a shared-KV layer, which has no
  // k/v projections and keeps no KV of its own).
  std::vector<int32_t> kv_source;
  bool v_norm = false;          // V RMS-normed per head without a weight; a layer without attn_v uses K as V
  bool freq_factors_full_only = false;  // rope_freqs on full-attention layers only (window layers turn every pair)
  bool layer_out_scale = false; // layer_output_scale [1]: multiplies the residual stream after the layer
  // > 0: per-layer embeddings this wide (per_layer_token_embd, per_layer_model_proj;
  // each layer's inp_gate, proj, post_norm after its FFN).
  int32_t n_embd_per_layer = 0;
  // Experts beside the dense FFN: every layer runs both, the dense branch
  // post-normed by post_ffw_norm_1, the experts (pre_ffw_norm_2, a router
  // reading RMSNorm(x) / sqrt(n_embd) * ffn_gate_inp.scale, fused
  // ffn_gate_up_exps, per-expert ffn_down_exps.scale) by post_ffw_norm_2.
  bool moe_with_dense = false;

  // --- embeddings ------------------------------------------------------------
  // How an embedding request pools the final hidden states: `pooling_type`
  // (llama.cpp's key and values) when it names mean, cls or last; else the
  // family's default (mean for the Gemma families, as EmbeddingGemma pools;
  // last for the others, as Qwen3-Embedding does).
  Pooling pooling = Pooling::Last;

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }
  int32_t head_dim_of(int32_t il) const { return layer_head_dim.empty() ? head_dim : layer_head_dim[size_t(il)]; }
  int32_t n_head_kv_of(int32_t il) const { return layer_n_head_kv.empty() ? n_head_kv : layer_n_head_kv[size_t(il)]; }
  int32_t n_ff_of(int32_t il) const { return layer_n_ff.empty() ? n_ff : layer_n_ff[size_t(il)]; }
  int32_t q_dim_of(int32_t il) const { return n_head * head_dim_of(il); }
  int32_t kv_dim_of(int32_t il) const { return n_head_kv_of(il) * head_dim_of(il); }
  int32_t max_q_dim() const;
  int32_t max_kv_dim() const;
  int32_t kv_layer(int32_t il) const { return kv_source.empty() ? il : kv_source[size_t(il)]; }
  bool shares_kv(int32_t il) const { return kv_layer(il) != il; }
  // Any block the fused layer path does not cover: the forward then runs
  // its layers step by step (model/transformer_blocks.cpp).
  bool stepwise_layers() const {
    return !layer_head_dim.empty() || !layer_n_head_kv.empty() || !layer_n_ff.empty() || !kv_source.empty() ||
           v_norm || layer_out_scale || n_embd_per_layer > 0 || moe_with_dense;
  }
  bool is_swa(int32_t il) const { return sliding_window > 0 && swa_layers[size_t(il)] != 0; }
  const RopeParams& rope_for(int32_t il) const { return is_swa(il) ? rope_swa : rope; }
  bool has_experts() const { return n_expert > 0; }
  bool is_moe_layer(int32_t il) const { return has_experts() && il >= n_layer_dense_lead; }
  // Whether some layer runs a dense FFN (gate/up/down of n_ff_of(il)).
  bool has_dense_ffn() const { return !has_experts() || moe_with_dense || n_layer_dense_lead > 0; }
  bool is_recurrent(int32_t il) const { return !recurrent_layers.empty() && recurrent_layers[size_t(il)] != 0; }
  bool has_recurrent() const { return ssm_v_heads > 0; }
  int32_t n_recurrent() const;
  int32_t ssm_inner() const { return ssm_v_heads * ssm_head_dim; }  // ssm.inner_size: the value heads together
  int32_t ssm_conv_channels() const { return 2 * ssm_k_heads * ssm_head_dim + ssm_inner(); }  // q | k | v
  MoeParams moe() const;  // the expert layers' shape and routing for the backend

  // Reads and validates; throws rf::Error naming the key on bad or missing
  // metadata, and naming the architecture when it is not supported.
  static ModelConfig from_gguf(const gguf::File& f);
  std::string summary() const;
};

// Checks that metadata `key` = v is in 1..max; throws naming the key.
int32_t positive_key(const std::string& key, int64_t v, int64_t max = int64_t(1) << 24);

// Marks layers il with il % period < period - 1 as sliding-window layers
// (llama.cpp's set_swa_pattern: the last layer of each period is global;
// period 0: every layer is local).
void set_swa_period(ModelConfig& c, int64_t period);

}  // namespace rf
