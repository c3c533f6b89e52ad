// Reading the Llama-family hyper-parameters from GGUF metadata.
#include "model/config.h"

#include "core/error.h"

namespace rf {
namespace {

int32_t positive(const gguf::File& f, const std::string& key, int64_t v, int64_t max = int64_t(1) << 24) {
  RF_CHECK(v > 0 && v <= max, "model metadata '", key, "' = ", v, " is out of range (1..", max, ")");
  return int32_t(v);
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::File& f) {
  ModelConfig c;
  c.arch = f.get_string("general.architecture");
  RF_CHECK(!c.arch.empty(), "model metadata is missing 'general.architecture'");
  // Architectures that share the Llama graph (no biases, SwiGLU, RMSNorm).
  RF_CHECK(c.arch == "llama" || c.arch == "mistral", "unsupported model architecture '", c.arch,
           "' (supported: llama, mistral)");
  c.name = f.get_string("general.name", c.arch);
  const std::string a = c.arch + ".";
  c.n_embd = positive(f, a + "embedding_length", f.require_int(a + "embedding_length"));
  c.n_layer = positive(f, a + "block_count", f.require_int(a + "block_count"), 4096);
  c.n_ff = positive(f, a + "feed_forward_length", f.require_int(a + "feed_forward_length"));
  c.n_head = positive(f, a + "attention.head_count", f.require_int(a + "attention.head_count"), 4096);
  c.n_head_kv = positive(f, a + "attention.head_count_kv", f.get_int(a + "attention.head_count_kv", c.n_head), 4096);
  RF_CHECK(c.n_head % c.n_head_kv == 0, "model metadata: head_count ", c.n_head, " is not a multiple of head_count_kv ",
           c.n_head_kv);
  const int64_t default_hd = c.n_embd / c.n_head;
  c.head_dim = positive(f, a + "attention.key_length", f.get_int(a + "attention.key_length", default_hd), 1024);
  const int64_t vlen = f.get_int(a + "attention.value_length", c.head_dim);
  RF_CHECK(vlen == c.head_dim, "model metadata: value_length ", vlen, " differs from key_length ", c.head_dim,
           " (not supported)");
  c.n_ctx_train = positive(f, a + "context_length", f.get_int(a + "context_length", 4096), int64_t(1) << 24);
  c.rms_eps = float(f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5));
  RF_CHECK(c.rms_eps > 0 && c.rms_eps < 1, "model metadata: layer_norm_rms_epsilon ", c.rms_eps, " out of range");

  const gguf::Array* tokens = f.get_array("tokenizer.ggml.tokens");
  const int64_t vocab_meta = f.get_int(a + "vocab_size", tokens ? int64_t(tokens->size()) : 0);
  c.n_vocab = positive(f, a + "vocab_size", vocab_meta);

  RopeParams& r = c.rope;
  r.n_rot = positive(f, a + "rope.dimension_count", f.get_int(a + "rope.dimension_count", c.head_dim), c.head_dim);
  RF_CHECK(r.n_rot % 2 == 0, "model metadata: rope.dimension_count ", r.n_rot, " is odd");
  r.neox = false;  // llama-family GGUF files are converted for the normal layout
  r.freq_base = float(f.get_float(a + "rope.freq_base", 10000.0));
  RF_CHECK(r.freq_base > 1.0f, "model metadata: rope.freq_base ", r.freq_base, " out of range");
  c.rope_scaling = f.get_string(a + "rope.scaling.type", "none");
  double factor = f.get_float(a + "rope.scaling.factor", 0.0);
  if (factor == 0.0) factor = f.get_float(a + "rope.scale_linear", 0.0);
  if (factor != 0.0 && c.rope_scaling == "none") c.rope_scaling = "linear";
  RF_CHECK(c.rope_scaling == "none" || c.rope_scaling == "linear" || c.rope_scaling == "yarn",
           "model metadata: unsupported rope.scaling.type '", c.rope_scaling, "'");
  if (c.rope_scaling != "none") {
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
  return c;
}

std::string ModelConfig::summary() const {
  return str(arch, " '", name, "': ", n_layer, " layers, embd ", n_embd, ", ", n_head, " heads (", n_head_kv,
             " KV) of ", head_dim, ", ffn ", n_ff, ", vocab ", n_vocab, ", ctx ", n_ctx_train, ", rope base ",
             rope.freq_base, (rope_scaling != "none" ? ", scaling " + rope_scaling : std::string()));
}

}  // namespace rf
