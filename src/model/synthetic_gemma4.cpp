// Gemma 4 synthetic presets, metadata and tensors (model/synthetic_gemma4.h).
//
// The published shapes (Hugging Face config.json of google/gemma-4-31B and
// google/gemma-4-26B-A4B; llama.cpp names them by layer count, 60 and 30):
//
// | preset          | embd | layers | heads | KV heads (window / full) | head size (window / full) | FFN  | experts                    | window | pattern   | vocab  | context |
// |-----------------|------|--------|-------|--------------------------|---------------------------|------|----------------------------|--------|-----------|--------|---------|
// | gemma4-31b      | 5376 | 60     | 32    | 16 / 4                   | 256 / 512                 | 21504| —                          | 1024   | 5 window, 1 full | 262144 | 262144 |
// | gemma4-26b-a4b  | 2816 | 30     | 16    | 8 / 2                    | 256 / 512                 | 2112 | 128, 8 used, FFN 704       | 1024   | 5 window, 1 full | 262144 | 262144 |
//
// Both: RMS eps 1e-6, tied embeddings, final logit soft-cap 30, window
// layers RoPE base 1e4 over all 256 dims, full layers base 1e6 with
// proportional RoPE (partial_rotary_factor 0.25: rope_freqs turn the first
// 64 of 256 pairs), V is K on full layers (attention_k_eq_v), no shared KV,
// no per-layer embeddings (those are the E2B / E4B models'). The tiny
// presets keep every block at test size: tiny-gemma4 with shared KV (the
// last 3 of 6 layers), per-layer embeddings and K as V on full layers,
// tiny-gemma4moe with 8 experts beside the dense FFN.
#include "model/synthetic_gemma4.h"

#include <cstring>
#include <string>

namespace rf {
namespace {

SyntheticPreset gemma4(std::string name, int32_t embd, int32_t layers, int32_t heads, int32_t kv_swa, int32_t kv_full,
                       int32_t hd_swa, int32_t hd_full, int32_t ff, int32_t vocab, int32_t ctx, int32_t window,
                       int32_t period) {
  SyntheticPreset p;
  p.name = std::move(name);
  p.arch = "gemma4";
  p.n_embd = embd, p.n_layer = layers, p.n_head = heads;
  p.n_head_kv = kv_full, p.n_head_kv_swa = kv_swa;
  p.head_dim = hd_full, p.head_dim_swa = hd_swa;
  p.n_ff = ff, p.n_vocab = vocab, p.n_ctx = ctx;
  p.rope_base = 1e6f;
  p.tied_embeddings = true;
  p.rms_eps = 1e-6f;
  p.sliding_window = window;
  p.swa_pattern = period;
  p.final_softcap = 30.0f;
  p.qk_norm = p.post_norms = true;
  p.k_eq_v = true;
  p.rope_pairs_full = hd_full / 8;  // partial_rotary_factor 0.25 of hd_full / 2 pairs
  return p;
}

bool is_window(const SyntheticPreset& p, int32_t il) { return il % p.swa_pattern < p.swa_pattern - 1; }
bool is_shared(const SyntheticPreset& p, int32_t il) { return il >= p.n_layer - p.shared_kv_layers; }
int32_t head_dim_of(const SyntheticPreset& p, int32_t il) { return is_window(p, il) ? p.head_dim_swa : p.head_dim; }
int32_t kv_heads_of(const SyntheticPreset& p, int32_t il) { return is_window(p, il) ? p.n_head_kv_swa : p.n_head_kv; }
bool has_v(const SyntheticPreset& p, int32_t il) { return !is_shared(p, il) && (is_window(p, il) || !p.k_eq_v); }

}  // namespace

void add_gemma4_presets(std::vector<SyntheticPreset>& v) {
  v.push_back(gemma4("gemma4-31b", 5376, 60, 32, 16, 4, 256, 512, 21504, 262144, 262144, 1024, 6));
  SyntheticPreset moe = gemma4("gemma4-26b-a4b", 2816, 30, 16, 8, 2, 256, 512, 2112, 262144, 262144, 1024, 6);
  moe.n_expert = 128, moe.n_expert_used = 8, moe.n_ff_expert = 704;
  v.push_back(moe);
  SyntheticPreset tiny = gemma4("tiny-gemma4", 256, 6, 4, 2, 1, 64, 128, 512, 1024, 2048, 16, 3);
  tiny.shared_kv_layers = 3;
  tiny.n_embd_per_layer = 256;  // whole blocks of every quantized type (its columns are split per layer)
  v.push_back(tiny);
  SyntheticPreset tiny_moe = gemma4("tiny-gemma4moe", 256, 6, 4, 2, 1, 64, 128, 256, 1024, 2048, 16, 3);
  tiny_moe.n_expert = 8, tiny_moe.n_expert_used = 2, tiny_moe.n_ff_expert = 64;
  v.push_back(tiny_moe);
  // Four layers of each published shape at its real widths: three
  // sliding-window layers (head size 256) and a full-attention one (512),
  // so that both kinds share the cache as in the whole model (whose first
  // full layer is its sixth).
  const SyntheticPreset full[2] = {v[v.size() - 4], v[v.size() - 3]};  // gemma4-31b, gemma4-26b-a4b
  for (const SyntheticPreset& p : full) {
    SyntheticPreset four = p;
    four.name += "-4l";
    four.n_layer = 4;
    four.swa_pattern = 4;
    v.push_back(four);
  }
}

void describe_gemma4_metadata(gguf::Writer& w, const SyntheticPreset& p) {
  const std::string a = p.arch + ".";
  std::vector<int32_t> kv;
  gguf::Array pattern;
  pattern.elem_type = gguf::ValueType::BOOL;
  for (int32_t il = 0; il < p.n_layer; ++il) {
    kv.push_back(kv_heads_of(p, il));
    pattern.raw.push_back(is_window(p, il) ? 1 : 0);
  }
  w.set_i32s(a + "attention.head_count_kv", kv);  // (replaces the one value)
  w.set(a + "attention.sliding_window_pattern", gguf::Value{gguf::ValueType::ARRAY, std::move(pattern)});
  w.set_u32(a + "attention.key_length_swa", uint32_t(p.head_dim_swa));
  w.set_u32(a + "attention.value_length_swa", uint32_t(p.head_dim_swa));
  w.set_u32(a + "rope.dimension_count_swa", uint32_t(p.head_dim_swa));
  w.set_f32(a + "rope.freq_base_swa", 10000.0f);
  w.set_u32(a + "attention.shared_kv_layers", uint32_t(p.shared_kv_layers));
  w.set_u32(a + "embedding_length_per_layer_input", uint32_t(p.n_embd_per_layer));
}

void describe_gemma4_tensors(const TensorSink& t, const SyntheticPreset& p) {
  std::vector<float> freqs(size_t(p.head_dim / 2), 1e30f);
  for (int32_t i = 0; i < p.rope_pairs_full; ++i) freqs[size_t(i)] = 1.0f;
  t.f32_values("rope_freqs.weight", freqs);
  const int64_t npl = p.n_embd_per_layer, e = p.n_embd;
  if (npl > 0) {
    t.matrix("per_layer_token_embd.weight", npl * p.n_layer, p.n_vocab, 0);
    t.matrix("per_layer_model_proj.weight", e, npl * p.n_layer, 0);
    t.vec("per_layer_proj_norm.weight", npl, 1.0f);
  }
  for (int32_t il = 0; il < p.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    const int64_t hd = head_dim_of(p, il), q = int64_t(p.n_head) * hd, kvd = int64_t(kv_heads_of(p, il)) * hd;
    t.vec(b + "attn_norm.weight", e, 1.0f);
    t.matrix(b + "attn_q.weight", e, q, 0);
    t.vec(b + "attn_q_norm.weight", hd, 1.0f);
    if (!is_shared(p, il)) {
      t.matrix(b + "attn_k.weight", e, kvd, 0);
      t.vec(b + "attn_k_norm.weight", hd, 1.0f);
      if (has_v(p, il)) t.matrix(b + "attn_v.weight", e, kvd, 0);
    }
    t.matrix(b + "attn_output.weight", q, e, 0);
    t.vec(b + "post_attention_norm.weight", e, 1.0f);
    t.vec(b + "layer_output_scale.weight", 1, 1.0f);
    t.vec(b + "ffn_norm.weight", e, 1.0f);
    t.matrix(b + "ffn_gate.weight", e, p.n_ff, 0);
    t.matrix(b + "ffn_up.weight", e, p.n_ff, 0);
    t.matrix(b + "ffn_down.weight", p.n_ff, e, 0);
    t.vec(b + "post_ffw_norm.weight", e, 1.0f);
    if (p.n_expert > 0) {
      const int64_t ff = p.n_ff_expert;
      t.matrix(b + "ffn_gate_inp.weight", e, p.n_expert, 0);
      t.vec(b + "ffn_gate_inp.scale", e, 1.0f);
      t.vec(b + "pre_ffw_norm_2.weight", e, 1.0f);
      t.vec(b + "post_ffw_norm_1.weight", e, 1.0f);
      t.vec(b + "post_ffw_norm_2.weight", e, 1.0f);
      t.matrix(b + "ffn_gate_up_exps.weight", e, 2 * ff, p.n_expert);
      t.matrix(b + "ffn_down_exps.weight", ff, e, p.n_expert);
      t.vec(b + "ffn_down_exps.scale", p.n_expert, 1.0f);
    }
    if (npl > 0) {
      t.matrix(b + "inp_gate.weight", e, npl, 0);
      t.matrix(b + "proj.weight", npl, e, 0);
      t.vec(b + "post_norm.weight", e, 1.0f);
    }
  }
}

int32_t gemma4_tensors(const SyntheticPreset& p) {
  int32_t n = 1 + (p.n_embd_per_layer > 0 ? 3 : 0);
  for (int32_t il = 0; il < p.n_layer; ++il) {
    n += 11;  // norms, q, q norm, output, output scale, the dense FFN
    if (!is_shared(p, il)) n += 2 + (has_v(p, il) ? 1 : 0);
    if (p.n_expert > 0) n += 8;
    if (p.n_embd_per_layer > 0) n += 3;
  }
  return n;
}

}  // namespace rf
