// Synthetic GGUF models: real models' shapes with random weights (never all
// zero, seeded, reproducible) and a valid SentencePiece-style vocabulary of
// the right size (special tokens, 256 byte tokens, then "▁t<i>" pieces),
// loadable by this engine and by llama.cpp. Every supported family has
// presets in its published shape, with its tensors (biases, q/k norms, post
// norms, fused q/k/v or gate+up, MoE routers and 3-D expert tensors) and
// metadata keys (head size, soft-caps, sliding window, partial rotary,
// experts, ...) as llama.cpp's converter writes them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/quant_plan.h"

namespace rf {

struct SyntheticPreset {
  std::string name;
  std::string arch = "llama";  // general.architecture
  int32_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0;
  int32_t head_dim = 0;        // 0: n_embd / n_head
  int32_t n_ff = 0, n_vocab = 0, n_ctx = 0;
  float rope_base = 10000.0f;
  bool tied_embeddings = false;
  float rms_eps = 1e-5f;
  int32_t n_rot = 0;           // rotary dims; 0: the head size
  float rope_scale_linear = 0; // > 0: rope.scaling.type linear with this factor
  int32_t sliding_window = 0;  // attention.sliding_window (0: none written)
  int32_t swa_pattern = 0;     // attention.sliding_window_pattern (0: none written)
  float attn_softcap = 0, final_softcap = 0;  // written when > 0
  // Tensors beyond Llama's:
  bool qkv_bias = false, qk_norm = false, post_norms = false;
  bool fused_qkv = false, fused_gate_up = false;
  // Mixture of experts (n_expert 0: dense): ffn_gate_inp and
  // ffn_{gate,up,down}_exps replace ffn_{gate,up,down}.
  int32_t n_expert = 0, n_expert_used = 0;
  int32_t n_ff_expert = 0;     // > 0: written as expert_feed_forward_length (qwen3moe); 0: experts are n_ff wide
  // gpt-oss's blocks: attn_output.bias, attn_sinks, the router's and the
  // experts' biases, post_attention_norm as the pre-FFN norm; and YaRN
  // (rope.scaling.* keys) where yarn_factor > 0.
  bool oai_blocks = false;
  // GLM-4.5 (arch glm4moe): the first n_layer_dense_lead layers dense (n_ff),
  // the others experts with exp_probs_b.bias and an ungated shared expert
  // (n_expert_shared x n_ff_expert wide); sigmoid routing, weights
  // renormalised, times expert_weights_scale; post_attention_norm as the
  // pre-FFN norm.
  int32_t n_layer_dense_lead = 0, n_expert_shared = 0;
  float expert_weights_scale = 1.0f;
  float yarn_factor = 0;
  int32_t yarn_orig_ctx = 0;
  // Hybrid Qwen3.5 / Qwen3.6 (arch qwen35, qwen35moe; model/synthetic_hybrid.cpp):
  // Gated DeltaNet layers of ssm_k_heads q/k heads and ssm_v_heads value
  // heads of ssm_head_dim, a conv of ssm_conv_kernel taps, on every layer
  // but each full_attention_interval-th; gated full attention; a shared
  // expert of n_ff_shexp (qwen35moe); nextn_layers MTP blocks after the
  // n_layer main ones; rope.dimension_sections.
  int32_t ssm_k_heads = 0, ssm_v_heads = 0, ssm_head_dim = 0, ssm_conv_kernel = 4;
  int32_t full_attention_interval = 4;
  int32_t n_ff_shexp = 0;
  int32_t nextn_layers = 0;
  std::vector<int32_t> rope_sections;

  // Gemma 4 (arch gemma4; model/synthetic_gemma4.cpp): window layers (all
  // but each swa_pattern-th) of head_dim_swa with n_head_kv_swa KV heads,
  // full layers of head_dim with n_head_kv; V is K on full layers
  // (k_eq_v: no attn_v); full layers' rope_freqs turn the first
  // rope_pairs_full pairs (proportional RoPE; the others 1e30); the last
  // shared_kv_layers layers reuse earlier KV; per-layer embeddings of
  // n_embd_per_layer; experts (n_expert > 0) beside the dense FFN.
  int32_t head_dim_swa = 0, n_head_kv_swa = 0;
  bool k_eq_v = false;
  int32_t rope_pairs_full = 0;
  int32_t shared_kv_layers = 0, n_embd_per_layer = 0;

  // DeepSeek V2/V3 (arch deepseek2; model/synthetic_deepseek.cpp):
  // multi-head latent attention (a q LoRA of mla_q_lora, 0: attn_q; the
  // latent of mla_kv_lora; heads of mla_k_nope + n_rot query/key dims and
  // mla_v value dims; head_count_kv 1 and head_dim kv_lora + n_rot, the
  // compressed cache); expert groups; sigmoid gating with exp_probs_b.bias
  // (expert_sigmoid) or softmax; YaRN with yarn_log_mul.
  int32_t mla_q_lora = 0, mla_kv_lora = 0, mla_k_nope = 0, mla_v = 0;
  int32_t n_expert_group = 0, n_expert_group_used = 0;
  bool expert_sigmoid = false, expert_weights_norm = false;
  float yarn_log_mul = 0;

  int32_t hd() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
  bool deepseek2() const { return arch == "deepseek2"; }
  bool gemma4() const { return arch == "gemma4"; }
  bool glm4moe() const { return arch == "glm4moe"; }
  bool moe_layer(int32_t il) const { return n_expert > 0 && il >= n_layer_dense_lead; }
  bool hybrid() const { return ssm_v_heads > 0; }
  int32_t expert_ff() const { return n_ff_expert > 0 ? n_ff_expert : n_ff; }
  int32_t n_tensors() const;  // what write_synthetic_model writes
};

std::optional<SyntheticPreset> synthetic_preset(const std::string& name);
std::string synthetic_preset_names();

// Writes the model; progress(done_tensors, total_tensors) after each tensor.
void write_synthetic_model(const SyntheticPreset& p, const QuantPlan& plan, const std::string& path, uint64_t seed,
                           ThreadPool& pool, const std::function<void(uint64_t, uint64_t)>& progress);

// The model's GGUF header alone (metadata and tensor infos, no data): what
// --load-format dummy loads, its weights made on the backend.
std::vector<uint8_t> synthetic_header(const SyntheticPreset& p, const QuantPlan& plan);

// Fills `n` values in [-scale, scale] from (seed, first index): the same
// numbers however the work is split.
void synthetic_values(uint64_t seed, uint64_t first, float scale, float* out, size_t n);

// Rows [0, n_rows) of a `cols`-wide matrix of synthetic_values (row r from
// index r * cols) stored as `type` at `dst`, row after row, on pool's
// threads.
void synthetic_rows(ThreadPool& pool, DType type, uint64_t seed, int64_t cols, int64_t n_rows, float scale,
                    uint8_t* dst);

}  // namespace rf
