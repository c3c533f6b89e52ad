// DeepSeek V2 / V3 (deepseek2): the family's keys as llama.cpp's
// load_arch_hparams for deepseek2 reads them, and what its graph derives
// from them (the attention scale of YaRN models).
//
// Multi-head latent attention in the split form llama.cpp's converter
// writes (attn_kv_a_mqa, attn_k_b, attn_v_b): attention.kv_lora_rank
// (required) is the latent c, rope.dimension_count the RoPE key shared by
// every head; the compressed cache's key_length must be kv_lora_rank +
// rope dims, its value_length kv_lora_rank and head_count_kv 1 (the
// per-head sizes are key_length_mla and value_length_mla, required);
// attention.q_lora_rank (default 0: attn_q, as DeepSeek-V2-Lite) the query
// LoRA. RoPE NORM (adjacent pairs). The attention scale is
// 1 / sqrt(key_length_mla), with YaRN times mscale^2: mscale = attn_factor
// * (1 + yarn_log_multiplier * ln(factor)) (the file's multiplier holds 0.1
// * mscale_all_dim), the rotation then not magnitude-scaled (llama.cpp's
// yarn_attn_factor cancels YaRN's 1 + 0.1 ln(factor)); without a
// multiplier mscale = attn_factor * (1 + 0.1 ln(factor)), the rotation's.
// MoE: glm4moe's keys (arch_detail::read_lead_shared_moe) with softmax
// gating by default (V2), exp_probs_b.bias for the choice where the first
// expert layer has it (V3), and expert_group_count experts groups of which
// expert_group_used_count are chosen from (default 0: no groups).
#include <cmath>

#include "core/error.h"
#include "model/arch.h"

namespace rf {

void arch_detail::configure_deepseek2(const gguf::File& f, ModelConfig& c) {
  const std::string a = c.arch + ".";
  read_nextn(f, c);
  c.rope.neox = false;
  read_lead_shared_moe(f, c, 1);
  c.expert_choice_bias =
      c.n_layer_dense_lead < c.n_layer &&
      f.find_tensor("blk." + std::to_string(c.n_layer_dense_lead) + ".exp_probs_b.bias") != nullptr;

  const std::string gk = a + "expert_group_count", guk = a + "expert_group_used_count";
  const int64_t groups = f.get_int(gk, 0), used = f.get_int(guk, 0);
  if (groups > 1) {
    RF_CHECK(groups <= 32 && c.n_expert % groups == 0 && c.n_expert / groups >= 2, "model metadata '", gk, "' = ",
             groups, " does not split ", c.n_expert, " experts into at most 32 groups of 2 or more");
    RF_CHECK(used >= 1 && used <= groups && c.n_expert_used <= used * (c.n_expert / groups), "model metadata '", guk,
             "' = ", used, " is out of range for ", groups, " groups and ", c.n_expert_used, " experts used");
    c.n_expert_group = int32_t(groups);
    c.n_expert_group_used = int32_t(used);
  } else {
    RF_CHECK(groups >= 0, "model metadata '", gk, "' = ", groups, " is negative");
  }

  const std::string lk = a + "attention.kv_lora_rank", qk = a + "attention.q_lora_rank";
  c.mla_kv_lora = positive_key(lk, f.require_int(lk), 65536);
  const int64_t q_lora = f.get_int(qk, 0);
  RF_CHECK(q_lora >= 0 && q_lora <= 65536, "model metadata '", qk, "' = ", q_lora, " is out of range (0..65536)");
  c.mla_q_lora = int32_t(q_lora);
  const std::string kmk = a + "attention.key_length_mla", vmk = a + "attention.value_length_mla";
  const int32_t k_mla = positive_key(kmk, f.require_int(kmk), 4096);
  c.mla_v = positive_key(vmk, f.require_int(vmk), 4096);
  RF_CHECK(k_mla > c.rope.n_rot, "model metadata '", kmk, "' = ", k_mla, " leaves no no-RoPE dims beside ",
           c.rope.n_rot, " RoPE dims");
  c.mla_k_nope = k_mla - c.rope.n_rot;
  const int64_t vlen = f.get_int(a + "attention.value_length", c.head_dim);
  RF_CHECK(c.head_dim == c.mla_kv_lora + c.rope.n_rot && vlen == c.mla_kv_lora && c.n_head_kv == 1 &&
               c.layer_n_head_kv.empty(),
           "model metadata: the compressed MLA cache needs key_length = kv_lora_rank + rope.dimension_count (",
           c.mla_kv_lora + c.rope.n_rot, "), value_length = kv_lora_rank (", c.mla_kv_lora,
           ") and head_count_kv 1; the file has ", c.head_dim, ", ", vlen, " and ", c.n_head_kv,
           " (a file without attn_k_b / attn_v_b is not supported)");

  // YaRN (llama.cpp's yarn_attn_factor and the graph's kq_scale): with a
  // log multiplier the rotation's 1 + 0.1 ln(factor) is cancelled and
  // mscale = attn_factor (1 + multiplier ln(factor)); without one the
  // rotation keeps it and mscale = attn_factor (1 + 0.1 ln(factor)).
  c.attn_scale = 1.0f / std::sqrt(float(k_mla));
  if (c.rope.ext_factor != 0.0f) {
    const float ln_factor = std::log(1.0f / c.rope.freq_scale);
    const float log_mul = optional_float(f, a + "rope.scaling.yarn_log_multiplier", 0.0);
    const float mscale = c.rope.attn_factor * (1.0f + (log_mul != 0.0f ? log_mul : 0.1f) * ln_factor);
    c.attn_scale *= mscale * mscale;
    if (log_mul != 0.0f) c.rope.attn_factor /= 1.0f + 0.1f * ln_factor;
  }
}

}  // namespace rf
