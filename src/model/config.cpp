// Reading the common hyper-parameters from GGUF metadata (llama.cpp's keys
// and defaults); the family's building blocks come from model/arch.cpp.
#include "model/config.h"

#include <algorithm>

#include "core/error.h"
#include "model/arch.h"

namespace rf {

int32_t positive_key(const std::string& key, int64_t v, int64_t max) {
  RF_CHECK(v > 0 && v <= max, "model metadata '", key, "' = ", v, " is out of range (1..", max, ")");
  return int32_t(v);
}

void set_swa_period(ModelConfig& c, int64_t period) {
  c.swa_layers.assign(size_t(c.n_layer), 0);
  for (int32_t il = 0; il < c.n_layer; ++il) c.swa_layers[size_t(il)] = period == 0 || il % period < period - 1;
}

namespace {

// A key that holds one value or one per layer (llama.cpp's get_key_or_arr):
// the per-layer values into `per_layer` (left empty for one value), their
// largest returned. Each value must be in 1..max.
int32_t key_or_array(const gguf::File& f, const std::string& key, int32_t n_layer, int64_t fallback, int64_t max,
                     std::vector<int32_t>& per_layer) {
  const gguf::Value* v = f.find(key);
  if (!v || v->type != gguf::ValueType::ARRAY) return positive_key(key, f.get_int(key, fallback), max);
  const auto vals = v->as_array(key).to_i64(key);
  RF_CHECK(int64_t(vals.size()) == n_layer, "model metadata '", key, "' has ", vals.size(), " entries for ", n_layer,
           " layers");
  int32_t most = 0;
  for (int64_t x : vals) {
    per_layer.push_back(positive_key(key, x, max));
    most = std::max(most, per_layer.back());
  }
  return most;
}

}  // namespace

int32_t ModelConfig::max_q_dim() const {
  int32_t m = 0;
  for (int32_t il = 0; il < n_layer; ++il) m = std::max(m, q_dim_of(il));
  return m > 0 ? m : q_dim();
}

int32_t ModelConfig::max_kv_dim() const {
  int32_t m = 0;
  for (int32_t il = 0; il < n_layer; ++il) m = std::max(m, kv_dim_of(il));
  return m > 0 ? m : kv_dim();
}

ModelConfig ModelConfig::from_gguf(const gguf::File& f) {
  ModelConfig c;
  c.arch = f.get_string("general.architecture");
  RF_CHECK(!c.arch.empty(), "model metadata is missing 'general.architecture'");
  RF_CHECK(architecture_supported(c.arch), "unsupported model architecture '", c.arch,
           "' (supported: ", supported_architectures(), ")");
  c.name = f.get_string("general.name", c.arch);
  const std::string a = c.arch + ".";
  auto required = [&](const std::string& key, int64_t max = int64_t(1) << 24) {
    return positive_key(a + key, f.require_int(a + key), max);
  };
  c.n_embd = required("embedding_length");
  c.n_layer = required("block_count", 4096);
  // Families whose FFNs are all experts may omit it (model/arch.cpp).
  // feed_forward_length and head_count_kv may give one value per layer.
  if (f.has(a + "feed_forward_length") || !family_ffn_optional(c.arch)) {
    RF_CHECK(f.has(a + "feed_forward_length"), "model metadata is missing required key '", a,
             "feed_forward_length'");
    c.n_ff = key_or_array(f, a + "feed_forward_length", c.n_layer, 0, int64_t(1) << 24, c.layer_n_ff);
  }
  c.n_head = required("attention.head_count", 4096);
  c.n_head_kv = key_or_array(f, a + "attention.head_count_kv", c.n_layer, c.n_head, 4096, c.layer_n_head_kv);
  for (int32_t il = 0; il < c.n_layer; ++il)
    RF_CHECK(c.n_head % c.n_head_kv_of(il) == 0, "model metadata: head_count ", c.n_head,
             " is not a multiple of head_count_kv ", c.n_head_kv_of(il), il ? str(" (layer ", il, ")") : "");
  // Head sizes default to n_embd / n_head, each on its own (llama.cpp).
  const int64_t default_hd = c.n_embd / c.n_head;
  c.head_dim = positive_key(a + "attention.key_length", f.get_int(a + "attention.key_length", default_hd), 1024);
  // (Multi-head latent attention's compressed cache, kv_lora_rank set, has
  // its own rule: model/arch.cpp configure_deepseek2.)
  const int64_t vlen = f.get_int(a + "attention.value_length", default_hd);
  RF_CHECK(vlen == c.head_dim || f.has(a + "attention.kv_lora_rank"), "model metadata: value_length ", vlen,
           " differs from key_length ", c.head_dim, " (not supported)");
  c.n_ctx_train = required("context_length");
  const std::string eps_key = a + "attention.layer_norm_rms_epsilon";
  RF_CHECK(f.has(eps_key), "model metadata is missing '", eps_key, "'");
  c.rms_eps = float(f.get_float(eps_key, 0.0));
  RF_CHECK(c.rms_eps > 0 && c.rms_eps < 1, "model metadata: layer_norm_rms_epsilon ", c.rms_eps, " out of range");

  const gguf::Array* tokens = f.get_array("tokenizer.ggml.tokens");
  const int64_t vocab_meta = f.get_int(a + "vocab_size", tokens ? int64_t(tokens->size()) : 0);
  c.n_vocab = positive_key(a + "vocab_size", vocab_meta);

  RopeParams& r = c.rope;
  r.n_rot = positive_key(a + "rope.dimension_count", f.get_int(a + "rope.dimension_count", c.head_dim), c.head_dim);
  RF_CHECK(r.n_rot % 2 == 0, "model metadata: rope.dimension_count ", r.n_rot, " is odd");
  r.freq_base = float(f.get_float(a + "rope.freq_base", 10000.0));
  RF_CHECK(r.freq_base > 1.0f, "model metadata: rope.freq_base ", r.freq_base, " out of range");
  c.rope_scaling = f.get_string(a + "rope.scaling.type", "none");
  double factor = f.get_float(a + "rope.scaling.factor", 0.0);
  if (factor == 0.0) factor = f.get_float(a + "rope.scale_linear", 0.0);
  if (factor != 0.0 && c.rope_scaling == "none") c.rope_scaling = "linear";
  RF_CHECK(c.rope_scaling == "none" || c.rope_scaling == "linear" || c.rope_scaling == "yarn",
           "model metadata: unsupported rope.scaling.type '", c.rope_scaling, "'");
  if (c.rope_scaling != "none" && factor != 0.0) {
    RF_CHECK(factor >= 1.0 && factor < 1e4, "model metadata: rope.scaling.factor ", factor, " out of range");
    r.freq_scale = float(1.0 / factor);
  }
  r.n_ctx_orig = int32_t(f.get_int(a + "rope.scaling.original_context_length", c.n_ctx_train));
  if (c.rope_scaling == "yarn") {
    r.ext_factor = float(f.get_float(a + "rope.scaling.yarn_ext_factor", 1.0));
    r.attn_factor = float(f.get_float(a + "rope.scaling.attn_factor", 1.0));
    r.beta_fast = float(f.get_float(a + "rope.scaling.yarn_beta_fast", 32.0));
    r.beta_slow = float(f.get_float(a + "rope.scaling.yarn_beta_slow", 1.0));
  }
  configure_family(f, c);
  c.pooling = c.arch.rfind("gemma", 0) == 0 ? Pooling::Mean : Pooling::Last;
  const int64_t pooling = f.get_int(a + "pooling_type", 0);
  RF_CHECK(pooling >= 0 && pooling <= 4, "model metadata '", a, "pooling_type' = ", pooling,
           " is out of range (0 none, 1 mean, 2 cls, 3 last, 4 rank)");
  if (pooling >= 1 && pooling <= 3) c.pooling = Pooling(pooling);  // none and rank: the family's default
  return c;
}

int32_t ModelConfig::n_recurrent() const {
  int32_t n = 0;
  for (uint8_t r : recurrent_layers) n += r != 0;
  return n;
}

MoeParams ModelConfig::moe() const {
  MoeParams p;
  p.n_expert = n_expert;
  p.n_used = n_expert_used;
  p.n_ff = n_ff_expert;
  p.norm_weights = expert_weights_norm;
  p.act = expert_activation;
  p.gating = expert_gating;
  p.weights_scale = expert_weights_scale;
  p.n_group = n_expert_group;
  p.n_group_used = n_expert_group_used;
  return p;
}

std::string ModelConfig::summary() const {
  std::string blocks;
  auto add = [&](bool on, const std::string& what) {
    if (on) blocks += ", " + what;
  };
  add(qkv_bias != BiasUse::None, "qkv bias");
  add(qk_norm, "q/k norm");
  add(post_attn_norm || post_ffn_norm, "post norms");
  add(activation == Activation::GeluTanh, "GeGLU");
  add(has_experts() && expert_activation == Activation::SiLUClampedOai, "clamped SwiGLU experts");
  add(out_bias, "output bias");
  add(attn_sinks, "attention sinks");
  add(moe_biases, "router and expert biases");
  add(fused_gate_up, "fused gate+up");
  add(has_recurrent(), str("Gated DeltaNet on ", n_recurrent(), " of ", n_layer, " layers (", ssm_k_heads,
                           " q/k heads, ", ssm_v_heads, " value heads of ", ssm_head_dim, ", conv ", ssm_conv_kernel,
                           ")"));
  add(attn_output_gate, "gated attention output");
  add(n_ff_shexp > 0, str("shared expert of ffn ", n_ff_shexp));
  add(expert_gating == MoeGating::Sigmoid, "sigmoid routing");
  add(expert_choice_bias, "expert choice bias");
  add(expert_weights_scale != 1.0f, str("expert weights x", expert_weights_scale));
  add(n_expert_group > 1, str("expert groups ", n_expert_group_used, " of ", n_expert_group));
  add(is_mla(), str("MLA (latent ", mla_kv_lora, ", q ", mla_q_lora > 0 ? str("LoRA ", mla_q_lora) : std::string("direct"),
                    ", heads of ", mla_k_nope, "+", rope.n_rot, " -> ", mla_v, ")"));
  add(n_layer_dense_lead > 0, str(n_layer_dense_lead, " leading dense layer", n_layer_dense_lead == 1 ? "" : "s",
                                  " of ffn ", n_ff));
  add(n_layer_nextn > 0, str(n_layer_nextn, " MTP block", n_layer_nextn == 1 ? "" : "s", " (not run)"));
  int32_t n_shared = 0, hd_window = 0;
  for (int32_t il = 0; il < n_layer; ++il) {
    n_shared += shares_kv(il);
    if (is_swa(il) && hd_window == 0) hd_window = head_dim_of(il);
  }
  add(!layer_head_dim.empty() && hd_window != head_dim, str("head size ", hd_window, " on window layers"));
  add(!layer_n_head_kv.empty(), "per-layer KV heads");
  add(!layer_n_ff.empty(), "per-layer FFN widths");
  add(v_norm, "v norm");
  add(n_shared > 0, str(n_shared, " shared-KV layers"));
  add(n_embd_per_layer > 0, str("per-layer embeddings of ", n_embd_per_layer));
  add(moe_with_dense, "dense FFN beside the experts");
  add(layer_out_scale, "layer output scale");
  add(attn_softcap > 0, str("attn soft-cap ", attn_softcap));
  add(final_softcap > 0, str("final soft-cap ", final_softcap));
  add(sliding_window > 0, str("sliding window ", sliding_window));
  add(rope.n_rot < head_dim && !is_mla(), str("rotary ", rope.n_rot, "/", head_dim));
  const std::string ffn =
      has_experts() ? str(n_expert, " experts (", n_expert_used, " used",
                          expert_weights_norm ? "" : ", weights unnormalised", ") of ffn ", n_ff_expert)
                    : str("ffn ", n_ff);
  return str(arch, " '", name, "': ", n_layer, " layers, embd ", n_embd, ", ", n_head, " heads (", n_head_kv,
             " KV) of ", head_dim, ", ", ffn, ", vocab ", n_vocab, ", ctx ", n_ctx_train, ", rope ",
             rope.neox ? "neox" : "norm", " base ", rope.freq_base,
             (rope_scaling != "none" ? ", scaling " + rope_scaling : std::string()), blocks);
}

}  // namespace rf
