// Each family as a configuration of building blocks, with the metadata keys
// and defaults llama.cpp uses for it (src/llama-model.cpp, load_hparams;
// RoPE styles from llama_model_rope_type):
//   llama, mistral  NORM RoPE; SwiGLU; pre-norms only; llama may have
//                   experts (Mixtral: expert_count > 0), each expert
//                   feed_forward_length wide
//   qwen2           NeoX RoPE; q/k/v biases (required)
//   qwen3           NeoX RoPE; per-head q/k RMSNorm
//   qwen3moe        qwen3's blocks with experts (expert_count required), each
//                   expert_feed_forward_length wide (default
//                   feed_forward_length / expert_used_count)
//   gemma2          NeoX RoPE; embeddings * sqrt(n_embd); GeGLU; post-attention
//                   and post-FFN norms; attention soft-cap (default 50) and
//                   final soft-cap (default 30); sliding window (default 4096)
//                   on every other layer starting with layer 0; q scale
//                   1/sqrt(head_dim), or 1/sqrt(n_embd/n_head) for the 27B
//   gemma3          gemma2's blocks without soft-caps, plus q/k norms; sliding
//                   window only when attention.sliding_window > 0, on layers
//                   il % period < period - 1 (period: attention.
//                   sliding_window_pattern, default 6), whose RoPE uses
//                   rope.freq_base_swa (default 1e4) and no scaling
//   phi3            NeoX RoPE; fused attn_qkv; fused gate+up in ffn_up; its
//                   sliding_window key is ignored, as llama.cpp does
//   glm4            NORM RoPE over rope.dimension_count dims (partial);
//                   optional q/k/v biases; fused gate+up; post norms
//   glm4moe         NeoX RoPE over rope.dimension_count dims; q/k/v biases;
//                   q/k norms where blk.0 has them; post_attention_norm is
//                   the pre-FFN norm; leading_dense_block_count dense layers,
//                   then experts (expert_count, expert_feed_forward_length
//                   required) with expert_shared_count ungated shared
//                   experts; sigmoid routing (expert_gating_func) with
//                   exp_probs_b.bias for the choice only, expert_weights_norm
//                   (default false), expert_weights_scale; nextn MTP blocks
//                   loaded, not run
//   deepseek2       DeepSeek V2/V3 (arch_deepseek.cpp): NORM RoPE over
//                   rope.dimension_count dims (YaRN from the rope.scaling
//                   keys, the rotation not magnitude-scaled); multi-head
//                   latent attention with the compressed cache; glm4moe's
//                   MoE keys (softmax gating by default) with an optional
//                   exp_probs_b.bias and group-limited routing
//   gpt-oss         NeoX RoPE (YaRN from the rope.scaling keys); q/k/v and
//                   output biases; attention sinks; sliding window
//                   (attention.sliding_window) on every other layer from
//                   layer 0 (attention.sliding_window_pattern, default 2);
//                   post_attention_norm is the pre-FFN norm; experts
//                   (expert_count required, each expert_feed_forward_length
//                   wide) with router and expert biases and the clamped
//                   SwiGLU (swiglu_oai); routing: softmax over the top-k
//                   logits, i.e. the renormalised top-k
//   qwen35          hybrid: Gated DeltaNet layers (ssm.conv_kernel,
//                   ssm.state_size, ssm.group_count, ssm.time_step_rank,
//                   ssm.inner_size, all required; value and key head sizes
//                   equal) on every layer but each
//                   full_attention_interval-th (default 4), or where
//                   attention.recurrent_layers (one flag per layer) says;
//                   full-attention layers: q/k RMSNorm, a sigmoid output
//                   gate from the doubled attn_q, IMRoPE
//                   (rope.dimension_sections, required: with text positions
//                   every section turns by the token's position, i.e. NeoX
//                   RoPE over rope.dimension_count dims); post_attention_norm
//                   is the pre-FFN norm; block_count includes
//                   nextn_predict_layers MTP blocks after the main layers
//   qwen35moe       qwen35's layers with experts (expert_count required, each
//                   expert_feed_forward_length wide, default
//                   feed_forward_length / expert_used_count, which may then
//                   be absent) and a shared expert on every layer
//                   (expert_shared_feed_forward_length wide, default
//                   feed_forward_length), scaled by sigmoid(x .
//                   ffn_gate_inp_shexp); routing renormalised
//   gemma4          gemma3's blocks (sliding window attention.sliding_window,
//                   required; attention.sliding_window_pattern one flag per
//                   layer, or a period, default 6) with: window layers of
//                   head size attention.key_length_swa (== value_length_swa,
//                   required) turning rope.dimension_count_swa dims (default
//                   key_length_swa) at rope.freq_base_swa (default 1e4);
//                   full layers of key_length turning rope.dimension_count
//                   dims at rope.freq_base with rope_freqs (proportional
//                   RoPE); head_count_kv and feed_forward_length one value or
//                   one per layer; attention scale 1; V RMS-normed without a
//                   weight, K as V where attn_v is absent; the last
//                   attention.shared_kv_layers (default 0) layers attend to
//                   the KV of the last earlier layer of their kind (llama.cpp:
//                   n_kv_from_start - 2 for window layers, - 1 for full ones);
//                   per-layer embeddings when embedding_length_per_layer_input
//                   > 0; layer_output_scale; final soft-cap
//                   (final_logit_softcapping, default none); experts
//                   (expert_count optional, each expert_feed_forward_length
//                   wide) beside the dense FFN, softmax routing renormalised
// Experts (every layer's FFN a router and expert_count experts): softmax
// routing over all experts, the expert_used_count most probable run, their
// weights renormalised unless expert_weights_norm is false (llama.cpp's
// build_moe_ffn with norm_w for both families).
#include "model/arch.h"

#include <cmath>

#include "core/error.h"

namespace rf {
namespace {

// The 27B Gemma models scale queries by 1/sqrt(n_embd / n_head)
// (query_pre_attn_scalar 144), the others by 1/sqrt(head_dim); llama.cpp
// tells them apart by layer count.
float gemma_attn_scale(const ModelConfig& c, int32_t layers_27b) {
  if (c.n_layer == layers_27b) return 1.0f / std::sqrt(float(c.n_embd / c.n_head));
  return 1.0f / std::sqrt(float(c.head_dim));
}

}  // namespace

float arch_detail::optional_float(const gguf::File& f, const std::string& key, double fallback) {
  const double v = f.get_float(key, fallback);
  RF_CHECK(std::isfinite(v), "model metadata '", key, "' = ", v, " is not finite");
  return float(v);
}

namespace {

using arch_detail::optional_float;

void gemma_common(ModelConfig& c) {
  c.rope.neox = true;
  c.embd_scale = std::sqrt(float(c.n_embd));
  c.activation = Activation::GeluTanh;
  c.post_attn_norm = true;
  c.post_ffn_norm = true;
}

void configure_gemma2(const gguf::File& f, ModelConfig& c) {
  const std::string a = c.arch + ".";
  gemma_common(c);
  c.attn_scale = gemma_attn_scale(c, 46);
  c.attn_softcap = optional_float(f, a + "attn_logit_softcapping", 50.0);
  c.final_softcap = optional_float(f, a + "final_logit_softcapping", 30.0);
  RF_CHECK(c.attn_softcap > 0 && c.final_softcap > 0, "model metadata: gemma2 soft-caps must be positive");
  c.sliding_window = positive_key(a + "attention.sliding_window", f.get_int(a + "attention.sliding_window", 4096));
  set_swa_period(c, 2);
}

void configure_gemma3(const gguf::File& f, ModelConfig& c) {
  const std::string a = c.arch + ".";
  gemma_common(c);
  c.qk_norm = true;
  c.attn_scale = gemma_attn_scale(c, 62);
  c.final_softcap = optional_float(f, a + "final_logit_softcapping", 0.0);
  RF_CHECK(c.final_softcap >= 0, "model metadata: ", a, "final_logit_softcapping is negative");
  const int64_t window = f.get_int(a + "attention.sliding_window", 0);
  RF_CHECK(window >= 0 && window <= (int64_t(1) << 24), "model metadata '", a, "attention.sliding_window' = ", window,
           " is out of range");
  if (window == 0) return;
  c.sliding_window = int32_t(window);
  const std::string pk = a + "attention.sliding_window_pattern";
  const gguf::Value* pattern = f.find(pk);
  if (pattern && pattern->type == gguf::ValueType::ARRAY) {  // one flag per layer
    const auto v = pattern->as_array(pk).to_i64(pk);
    RF_CHECK(int64_t(v.size()) == c.n_layer, "model metadata '", pk, "' has ", v.size(), " entries for ", c.n_layer,
             " layers");
    for (size_t i = 0; i < v.size(); ++i) c.swa_layers[i] = v[i] != 0;
  } else {
    const int64_t period = f.get_int(pk, 6);
    RF_CHECK(period >= 0 && period <= 4096, "model metadata '", pk, "' = ", period, " is out of range");
    set_swa_period(c, period);
  }
  c.rope_swa.freq_base = optional_float(f, a + "rope.freq_base_swa", 10000.0);
  RF_CHECK(c.rope_swa.freq_base > 1.0f, "model metadata: ", a, "rope.freq_base_swa out of range");
  c.rope_swa.freq_scale = 1.0f;
}

// Gemma 4: gemma3's blocks, per-layer head sizes and KV heads, shared KV,
// per-layer embeddings and experts beside the dense FFN (config.h).
void configure_gemma4(const gguf::File& f, ModelConfig& c) {
  const std::string a = c.arch + ".";
  gemma_common(c);
  c.qk_norm = true;
  c.v_norm = true;
  c.attn_scale = 1.0f;
  c.layer_out_scale = true;
  c.freq_factors_full_only = true;
  c.final_softcap = optional_float(f, a + "final_logit_softcapping", 0.0);
  RF_CHECK(c.final_softcap >= 0, "model metadata: ", a, "final_logit_softcapping is negative");
  c.sliding_window = positive_key(a + "attention.sliding_window", f.require_int(a + "attention.sliding_window"));
  const std::string pk = a + "attention.sliding_window_pattern";
  const gguf::Value* pattern = f.find(pk);
  if (pattern && pattern->type == gguf::ValueType::ARRAY) {
    const auto v = pattern->as_array(pk).to_i64(pk);
    RF_CHECK(int64_t(v.size()) == c.n_layer, "model metadata '", pk, "' has ", v.size(), " entries for ", c.n_layer,
             " layers");
    for (size_t i = 0; i < v.size(); ++i) c.swa_layers[i] = v[i] != 0;
  } else {
    const int64_t period = f.get_int(pk, 6);
    RF_CHECK(period >= 0 && period <= 4096, "model metadata '", pk, "' = ", period, " is out of range");
    set_swa_period(c, period);
  }
  const int32_t hd_swa = positive_key(a + "attention.key_length_swa", f.require_int(a + "attention.key_length_swa"),
                                      c.head_dim);
  const int64_t vd_swa = f.get_int(a + "attention.value_length_swa", hd_swa);
  RF_CHECK(vd_swa == hd_swa, "model metadata '", a, "attention.value_length_swa' = ", vd_swa,
           " differs from key_length_swa ", hd_swa, " (not supported)");
  c.layer_head_dim.assign(size_t(c.n_layer), c.head_dim);
  for (int32_t il = 0; il < c.n_layer; ++il)
    if (c.is_swa(il)) c.layer_head_dim[size_t(il)] = hd_swa;
  c.rope_swa.freq_base = optional_float(f, a + "rope.freq_base_swa", 10000.0);
  RF_CHECK(c.rope_swa.freq_base > 1.0f, "model metadata: ", a, "rope.freq_base_swa out of range");
  c.rope_swa.freq_scale = 1.0f;
  const std::string rk = a + "rope.dimension_count_swa";
  c.rope_swa.n_rot = positive_key(rk, f.get_int(rk, hd_swa), hd_swa);
  RF_CHECK(c.rope_swa.n_rot % 2 == 0, "model metadata '", rk, "' = ", c.rope_swa.n_rot, " is odd");

  const std::string sk = a + "attention.shared_kv_layers";
  const int64_t shared = f.get_int(sk, 0);
  RF_CHECK(shared >= 0 && shared <= c.n_layer - 2, "model metadata '", sk, "' = ", shared, " is out of range (0..",
           c.n_layer - 2, " for ", c.n_layer, " layers)");
  if (shared > 0) {
    const int32_t from = c.n_layer - int32_t(shared);  // the first layer without KV of its own
    c.kv_source.resize(size_t(c.n_layer));
    for (int32_t il = 0; il < c.n_layer; ++il) {
      c.kv_source[size_t(il)] = il < from ? il : from - (c.is_swa(il) ? 2 : 1);
      const int32_t src = c.kv_source[size_t(il)];
      RF_CHECK(c.is_swa(src) == c.is_swa(il), "model metadata '", sk, "' = ", shared, ": layer ", il,
               " would reuse the KV of layer ", src, ", a layer of the other attention kind");
    }
  }
  const std::string pl = a + "embedding_length_per_layer_input";
  const int64_t per_layer = f.get_int(pl, 0);
  RF_CHECK(per_layer >= 0 && per_layer <= 65536, "model metadata '", pl, "' = ", per_layer, " is out of range");
  c.n_embd_per_layer = int32_t(per_layer);
  if (c.has_experts()) {
    c.moe_with_dense = true;
    c.expert_weights_norm = true;
    const std::string ek = a + "expert_feed_forward_length";
    c.n_ff_expert = positive_key(ek, f.require_int(ek));
  }
}

enum class ExpertUse { None, Optional, Required };

struct Family {
  const char* arch;
  void (*configure)(const gguf::File&, ModelConfig&);
  ExpertUse experts = ExpertUse::None;
};

void configure_gpt_oss(const gguf::File& f, ModelConfig& c) {
  const std::string a = c.arch + ".";
  c.rope.neox = true;
  c.qkv_bias = BiasUse::Required;
  c.out_bias = true;
  c.attn_sinks = true;
  c.ffn_norm_name = "post_attention_norm";
  c.moe_biases = true;
  c.expert_activation = Activation::SiLUClampedOai;
  c.expert_weights_norm = true;  // softmax over the chosen experts' logits
  const std::string ff_key = a + "expert_feed_forward_length";
  c.n_ff_expert = positive_key(ff_key, f.get_int(ff_key, c.n_ff));
  c.sliding_window = positive_key(a + "attention.sliding_window", f.require_int(a + "attention.sliding_window"));
  const int64_t period = f.get_int(a + "attention.sliding_window_pattern", 2);
  RF_CHECK(period >= 0 && period <= 4096, "model metadata '", a, "attention.sliding_window_pattern' = ", period,
           " is out of range");
  set_swa_period(c, period);
}

void configure_qwen3moe(const gguf::File& f, ModelConfig& c) {
  c.rope.neox = true;
  c.qk_norm = true;
  const std::string key = c.arch + ".expert_feed_forward_length";
  if (f.has(key)) {
    c.n_ff_expert = positive_key(key, f.get_int(key, 0));
  } else {  // llama.cpp's default
    c.n_ff_expert = c.n_ff / c.n_expert_used;
    RF_CHECK(c.n_ff_expert > 0, "model metadata is missing '", key, "' (feed_forward_length ", c.n_ff,
             " / expert_used_count ", c.n_expert_used, " is 0)");
  }
}

}  // namespace

// nextn_predict_layers (default 0): block_count counts that many MTP blocks
// after the main layers; n_layer becomes the main layers' count.
void arch_detail::read_nextn(const gguf::File& f, ModelConfig& c) {
  const int64_t n_all = c.n_layer;
  const std::string nk = c.arch + ".nextn_predict_layers";
  const int64_t nextn = f.get_int(nk, 0);
  RF_CHECK(nextn >= 0 && nextn < n_all, "model metadata '", nk, "' = ", nextn, " is out of range (0..",
           n_all - 1, " for block_count ", n_all, ")");
  c.n_layer_nextn = int32_t(nextn);
  c.n_layer = int32_t(n_all - nextn);
  c.swa_layers.assign(size_t(c.n_layer), 0);
}

// The MoE keys GLM-4.5 and DeepSeek share (llama.cpp's load_arch_hparams
// for both): expert_feed_forward_length (required), expert_shared_count
// shared experts (required; one SwiGLU of their summed width, ungated),
// leading_dense_block_count dense layers first, expert_gating_func (1
// softmax, 2 sigmoid; `gating_default` where absent), expert_weights_norm
// (default false) and expert_weights_scale (default 1; 0 means 1).
void arch_detail::read_lead_shared_moe(const gguf::File& f, ModelConfig& c, int64_t gating_default) {
  const std::string a = c.arch + ".";
  const std::string ek = a + "expert_feed_forward_length", sk = a + "expert_shared_count";
  c.n_ff_expert = positive_key(ek, f.require_int(ek));
  const int64_t shared = f.require_int(sk);
  RF_CHECK(shared >= 0 && shared <= 64, "model metadata '", sk, "' = ", shared, " is out of range (0..64)");
  c.n_ff_shexp = int32_t(shared) * c.n_ff_expert;
  c.shexp_gated = false;
  const std::string lk = a + "leading_dense_block_count";
  const int64_t lead = f.get_int(lk, 0);
  RF_CHECK(lead >= 0 && lead <= c.n_layer, "model metadata '", lk, "' = ", lead, " is out of range (0..", c.n_layer,
           ")");
  c.n_layer_dense_lead = int32_t(lead);
  const std::string gk = a + "expert_gating_func";
  const int64_t gating = f.get_int(gk, gating_default);
  RF_CHECK(gating == 1 || gating == 2, "model metadata '", gk, "' = ", gating,
           " is not supported (1 softmax, 2 sigmoid)");
  c.expert_gating = gating == 1 ? MoeGating::Softmax : MoeGating::Sigmoid;
  c.expert_weights_norm = f.get_bool(a + "expert_weights_norm", false);
  const std::string wk = a + "expert_weights_scale";
  const float scale = arch_detail::optional_float(f, wk, 1.0);
  RF_CHECK(scale >= 0.0f, "model metadata '", wk, "' = ", scale, " is negative");
  c.expert_weights_scale = scale == 0.0f ? 1.0f : scale;
}

namespace {

// GLM-4.5 (glm4moe; llama.cpp's load_arch_hparams and build_moe_ffn call):
// NeoX RoPE over rope.dimension_count dims, q/k/v biases, q/k norms where
// the file has them, post_attention_norm as the pre-FFN norm; the shared
// MoE keys (read_lead_shared_moe; sigmoid gating by default) with
// exp_probs_b.bias for the choice.
void configure_glm4moe(const gguf::File& f, ModelConfig& c) {
  arch_detail::read_nextn(f, c);
  c.rope.neox = true;
  c.qkv_bias = BiasUse::Required;
  c.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  c.ffn_norm_name = "post_attention_norm";
  arch_detail::read_lead_shared_moe(f, c, 2);
  c.expert_choice_bias = true;
}

// Qwen3.5 / Qwen3.6 (qwen35, qwen35moe): the hybrid layers and the MTP
// blocks (llama.cpp's load_arch_hparams for both).
void configure_qwen35(const gguf::File& f, ModelConfig& c) {
  const std::string a = c.arch + ".";
  c.rope.neox = true;
  c.qk_norm = true;
  c.attn_output_gate = true;
  c.ffn_norm_name = "post_attention_norm";
  const int64_t n_all = c.n_layer;  // block_count: the main layers and the MTP blocks
  arch_detail::read_nextn(f, c);

  const std::string sk = a + "rope.dimension_sections";
  const gguf::Value* sv = f.find(sk);
  RF_CHECK(sv && sv->type == gguf::ValueType::ARRAY, "model metadata is missing required key '", sk, "'");
  int64_t total = 0;
  for (int64_t v : sv->as_array(sk).to_i64(sk)) {
    RF_CHECK(v >= 0 && v <= c.rope.n_rot, "model metadata '", sk, "' has an entry ", v, " out of range");
    c.rope_sections.push_back(int32_t(v));
    total += v;
  }
  RF_CHECK(c.rope_sections.size() <= 4 && total <= c.rope.n_rot / 2, "model metadata '", sk, "': ",
           c.rope_sections.size(), " sections of ", total, " dimension pairs for rope.dimension_count ", c.rope.n_rot);

  auto ssm_key = [&](const char* key, int64_t max) { return positive_key(a + key, f.require_int(a + key), max); };
  c.ssm_conv_kernel = ssm_key("ssm.conv_kernel", 64);
  RF_CHECK(c.ssm_conv_kernel >= 2, "model metadata '", a, "ssm.conv_kernel' = ", c.ssm_conv_kernel,
           " (at least 2 taps)");
  c.ssm_head_dim = ssm_key("ssm.state_size", 1024);
  c.ssm_k_heads = ssm_key("ssm.group_count", 4096);
  c.ssm_v_heads = ssm_key("ssm.time_step_rank", 4096);
  const int32_t inner = ssm_key("ssm.inner_size", int64_t(1) << 24);
  RF_CHECK(c.ssm_v_heads % c.ssm_k_heads == 0, "model metadata: ssm.time_step_rank ", c.ssm_v_heads,
           " value heads is not a multiple of ssm.group_count ", c.ssm_k_heads);
  RF_CHECK(inner == c.ssm_v_heads * c.ssm_head_dim, "model metadata: ssm.inner_size ", inner, " is not ",
           c.ssm_v_heads, " value heads of ssm.state_size ", c.ssm_head_dim, " (other value head sizes are not supported)");

  c.recurrent_layers.assign(size_t(c.n_layer), 0);
  const std::string rk = a + "attention.recurrent_layers";
  if (const gguf::Value* rv = f.find(rk); rv && rv->type == gguf::ValueType::ARRAY) {
    const auto flags = rv->as_array(rk).to_i64(rk);
    RF_CHECK(int64_t(flags.size()) == n_all || int64_t(flags.size()) == c.n_layer, "model metadata '", rk, "' has ",
             flags.size(), " entries for ", n_all, " layers");
    for (size_t il = 0; il < flags.size(); ++il) {
      RF_CHECK(int64_t(il) < c.n_layer || flags[il] == 0, "model metadata '", rk, "': MTP block ", il,
               " marked recurrent");
      if (int64_t(il) < c.n_layer) c.recurrent_layers[il] = flags[il] != 0;
    }
  } else {
    const std::string ik = a + "full_attention_interval";
    const int32_t interval = positive_key(ik, f.get_int(ik, 4), 4096);
    for (int32_t il = 0; il < c.n_layer; ++il) c.recurrent_layers[size_t(il)] = (il + 1) % interval != 0;
  }
  RF_CHECK(c.n_recurrent() < c.n_layer, "model metadata: every layer of '", c.arch,
           "' is recurrent (no full-attention layer to hold KV)");
}

void configure_qwen35moe(const gguf::File& f, ModelConfig& c) {
  configure_qwen35(f, c);
  const std::string a = c.arch + ".";
  c.expert_weights_norm = true;  // llama.cpp's build_moe_ffn call for the family
  const std::string ek = a + "expert_feed_forward_length", sk = a + "expert_shared_feed_forward_length";
  if (f.has(ek)) {
    c.n_ff_expert = positive_key(ek, f.get_int(ek, 0));
  } else {
    c.n_ff_expert = c.n_ff / c.n_expert_used;
    RF_CHECK(c.n_ff_expert > 0, "model metadata is missing '", ek, "' (feed_forward_length ", c.n_ff,
             " / expert_used_count ", c.n_expert_used, " is 0)");
  }
  c.n_ff_shexp = f.has(sk) ? positive_key(sk, f.get_int(sk, 0)) : c.n_ff;
  RF_CHECK(c.n_ff_shexp > 0, "model metadata is missing '", sk, "' (and feed_forward_length, its default)");
}

const Family kFamilies[] = {
    {"llama",
     [](const gguf::File&, ModelConfig& c) {
       c.rope.neox = false;
       if (c.has_experts()) c.n_ff_expert = c.n_ff;
     },
     ExpertUse::Optional},
    {"mistral", [](const gguf::File&, ModelConfig& c) { c.rope.neox = false; }},
    {"qwen2",
     [](const gguf::File&, ModelConfig& c) {
       c.rope.neox = true;
       c.qkv_bias = BiasUse::Required;
     }},
    {"qwen3",
     [](const gguf::File&, ModelConfig& c) {
       c.rope.neox = true;
       c.qk_norm = true;
     }},
    {"qwen3moe", configure_qwen3moe, ExpertUse::Required},
    {"gemma2", configure_gemma2},
    {"gemma3", configure_gemma3},
    {"gemma4", configure_gemma4, ExpertUse::Optional},
    {"phi3",
     [](const gguf::File&, ModelConfig& c) {
       c.rope.neox = true;
       c.fused_gate_up = true;
     }},
    {"glm4",
     [](const gguf::File&, ModelConfig& c) {
       c.rope.neox = false;
       c.qkv_bias = BiasUse::Optional;
       c.post_attn_norm = true;
       c.post_ffn_norm = true;
       c.fused_gate_up = true;
     }},
    {"glm4moe", configure_glm4moe, ExpertUse::Required},
    {"deepseek2", arch_detail::configure_deepseek2, ExpertUse::Required},
    {"gpt-oss", configure_gpt_oss, ExpertUse::Required},
    {"qwen35", configure_qwen35},
    {"qwen35moe", configure_qwen35moe, ExpertUse::Required},
};

// At most llama.cpp's LLAMA_MAX_EXPERTS.
constexpr int64_t kMaxExperts = 512;

std::string expert_architectures() {
  std::string s;
  for (const Family& fam : kFamilies)
    if (fam.experts != ExpertUse::None) s += (s.empty() ? "" : ", ") + std::string(fam.arch);
  return s;
}

// expert_count, expert_used_count and expert_weights_norm, as llama.cpp's
// load_hparams reads them: expert_used_count is required with experts and
// must be 1..expert_count, and must be absent or 0 without them.
void read_experts(const gguf::File& f, ModelConfig& c, ExpertUse use) {
  const std::string a = c.arch + ".";
  const std::string count_key = a + "expert_count", used_key = a + "expert_used_count";
  const int64_t n = use == ExpertUse::Required ? f.require_int(count_key) : f.get_int(count_key, 0);
  if (use == ExpertUse::None) {
    RF_CHECK(n == 0, "unsupported model: '", c.arch, "' with ", n, " experts (", count_key,
             "); mixture-of-experts models are supported for ", expert_architectures());
    return;
  }
  if (n == 0 && use == ExpertUse::Optional) {
    const int64_t used = f.get_int(used_key, 0);
    RF_CHECK(used == 0, "model metadata '", used_key, "' = ", used, " without experts ('", count_key,
             "' is 0 or missing)");
    return;
  }
  c.n_expert = positive_key(count_key, n, kMaxExperts);
  c.n_expert_used = positive_key(used_key, f.require_int(used_key), c.n_expert);
  c.expert_weights_norm = f.get_bool(a + "expert_weights_norm", true);
}

}  // namespace

bool family_ffn_optional(const std::string& arch) { return arch == "qwen35moe"; }

bool architecture_supported(const std::string& arch) {
  for (const Family& fam : kFamilies)
    if (arch == fam.arch) return true;
  return false;
}

std::string supported_architectures() {
  std::string s;
  for (const Family& fam : kFamilies) s += (s.empty() ? "" : ", ") + std::string(fam.arch);
  return s;
}

void configure_family(const gguf::File& f, ModelConfig& c) {
  c.attn_scale = 1.0f / std::sqrt(float(c.head_dim));
  c.swa_layers.assign(size_t(c.n_layer), 0);
  c.rope_swa = c.rope;
  for (const Family& fam : kFamilies)
    if (c.arch == fam.arch) {
      read_experts(f, c, fam.experts);
      fam.configure(f, c);
      if (c.expert_activation == Activation::SiLU) c.expert_activation = c.activation;
      // The sliding-window layers share the global RoPE style.
      c.rope_swa.neox = c.rope.neox;
      if (c.layer_head_dim.empty()) c.rope_swa.n_rot = c.rope.n_rot;
      return;
    }
  fail("unsupported model architecture '", c.arch, "' (supported: ", supported_architectures(), ")");
}

}  // namespace rf
