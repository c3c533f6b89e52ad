// Writing synthetic models (see synthetic.h).
#include "model/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "core/rng.h"
#include "gguf/writer.h"
#include "model/synthetic_deepseek.h"
#include "model/synthetic_gemma4.h"
#include "model/synthetic_hybrid.h"

namespace rf {
namespace {

// Published shapes (config.json of each model): hidden size, layers, heads,
// KV heads, head size, FFN size, vocabulary, context, RoPE. The tiny-*
// presets keep each family's blocks at test size.
SyntheticPreset llama(std::string name, int32_t embd, int32_t layers, int32_t heads, int32_t kv, int32_t ff,
                      int32_t vocab, int32_t ctx, float base, bool tied) {
  SyntheticPreset p;
  p.name = std::move(name);
  p.n_embd = embd, p.n_layer = layers, p.n_head = heads, p.n_head_kv = kv, p.n_ff = ff;
  p.n_vocab = vocab, p.n_ctx = ctx, p.rope_base = base, p.tied_embeddings = tied;
  return p;
}

SyntheticPreset family(std::string name, const std::string& arch, int32_t embd, int32_t layers, int32_t heads,
                       int32_t kv, int32_t hd, int32_t ff, int32_t vocab, int32_t ctx, float base, bool tied,
                       float eps) {
  SyntheticPreset p = llama(std::move(name), embd, layers, heads, kv, ff, vocab, ctx, base, tied);
  p.arch = arch;
  p.head_dim = hd;
  p.rms_eps = eps;
  if (arch == "qwen2") p.qkv_bias = true;
  if (arch == "qwen3" || arch == "qwen3moe") p.qk_norm = true;
  if (arch == "gemma2" || arch == "gemma3") p.post_norms = true;
  if (arch == "gemma3") p.qk_norm = true;
  if (arch == "phi3") p.fused_qkv = p.fused_gate_up = true;
  if (arch == "glm4") p.qkv_bias = p.post_norms = p.fused_gate_up = true;
  if (arch == "gpt-oss") p.qkv_bias = p.oai_blocks = true;
  if (arch == "glm4moe") p.qkv_bias = true;
  return p;
}

// GLM-4.5 (glm4moe): partial rotary 0.5 (half of each head turns), RoPE
// base 1e6, context 131072; `lead` dense layers, then n_expert experts of
// ff_expert (8 used) and one shared expert.
SyntheticPreset glm4moe(std::string name, int32_t embd, int32_t layers, int32_t heads, int32_t kv, int32_t hd,
                        int32_t ff, int32_t vocab, int32_t n_expert, int32_t n_used, int32_t ff_expert, int32_t lead,
                        float scale, bool qk_norm) {
  SyntheticPreset p = family(std::move(name), "glm4moe", embd, layers, heads, kv, hd, ff, vocab, 131072, 1e6f, false,
                             1e-5f);
  p.n_rot = hd / 2;
  p.n_expert = n_expert, p.n_expert_used = n_used, p.n_ff_expert = ff_expert;
  p.n_layer_dense_lead = lead, p.n_expert_shared = 1, p.expert_weights_scale = scale;
  p.qk_norm = qk_norm;
  return p;
}

// gpt-oss (config.json of openai/gpt-oss-20b and -120b): hidden 2880, 64
// heads of 64, 8 KV heads, experts of FFN 2880 (4 used), vocabulary 201088,
// context 131072; sliding window 128 on every other layer; RoPE base 150000
// with YaRN factor 32 over an original context of 4096.
SyntheticPreset gpt_oss(std::string name, int32_t embd, int32_t layers, int32_t heads, int32_t kv, int32_t hd,
                        int32_t ff, int32_t vocab, int32_t n_expert, int32_t window) {
  SyntheticPreset p = family(std::move(name), "gpt-oss", embd, layers, heads, kv, hd, ff, vocab, 131072, 150000.0f,
                             false, 1e-5f);
  p.n_expert = n_expert;
  p.n_expert_used = 4;
  p.n_ff_expert = ff;
  p.sliding_window = window;
  p.yarn_factor = 32.0f;
  p.yarn_orig_ctx = 4096;
  return p;
}

SyntheticPreset experts(SyntheticPreset p, int32_t n_expert, int32_t n_used, int32_t n_ff_expert = 0) {
  p.n_expert = n_expert;
  p.n_expert_used = n_used;
  p.n_ff_expert = n_ff_expert;
  return p;
}

std::vector<SyntheticPreset> presets() {
  std::vector<SyntheticPreset> v = {
      llama("llama3-8b", 4096, 32, 32, 8, 14336, 128256, 8192, 500000.0f, false),
      llama("llama3-8b-4l", 4096, 4, 32, 8, 14336, 128256, 8192, 500000.0f, false),
      // Llama-3-70B: 8192 / 80 layers / 64 heads, 8 KV / 28672 / 128256
      // (141 GB in f16: for --load-format dummy; too big to write casually).
      llama("llama3-70b", 8192, 80, 64, 8, 28672, 128256, 8192, 500000.0f, false),
      // One rank's share of llama3-8b at --tp 2 (half the heads, KV heads,
      // FFN and vocabulary; head size 128) on one GPU: the same kernels as
      // a TP=2 rank runs, without the all-reduces and the rank exchanges.
      family("llama3-8b-tp2-share", "llama", 4096, 32, 16, 4, 128, 7168, 64128, 8192, 500000.0f, false, 1e-5f),
      llama("llama2-7b", 4096, 32, 32, 32, 11008, 32000, 4096, 10000.0f, false),
      llama("llama-1b", 2048, 16, 32, 8, 8192, 128256, 8192, 500000.0f, true),
      llama("tiny", 256, 2, 4, 2, 512, 1024, 2048, 10000.0f, false),
      // Qwen2.5-7B: 3584 / 28 layers / 28 heads, 4 KV / 128 / 18944 / 152064.
      family("qwen2.5-7b", "qwen2", 3584, 28, 28, 4, 128, 18944, 152064, 32768, 1e6f, false, 1e-6f),
      // Qwen3-0.6B: 1024 / 28 / 16, 8 KV / 128 / 3072 / 151936, tied embeddings.
      family("qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 151936, 40960, 1e6f, true, 1e-6f),
      // Qwen3-8B: 4096 / 36 / 32, 8 KV / 128 / 12288 / 151936.
      family("qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288, 151936, 40960, 1e6f, false, 1e-6f),
      // Gemma-2-9B: 3584 / 42 / 16, 8 KV / 256 / 14336 / 256000; window 4096 on
      // every other layer, soft-caps 50 and 30, tied embeddings.
      family("gemma2-9b", "gemma2", 3584, 42, 16, 8, 256, 14336, 256000, 8192, 10000.0f, true, 1e-6f),
      // Gemma-3-12B: 3840 / 48 / 16, 8 KV / 256 / 15360 / 262208; window 1024,
      // 5 local layers to 1 global, global RoPE 1e6 with linear scaling 8.
      family("gemma3-12b", "gemma3", 3840, 48, 16, 8, 256, 15360, 262208, 131072, 1e6f, true, 1e-6f),
      // Phi-3-mini-4k: 3072 / 32 / 32, 32 KV / 96 / 8192 / 32064.
      family("phi3-mini", "phi3", 3072, 32, 32, 32, 96, 8192, 32064, 4096, 10000.0f, false, 1e-5f),
      // GLM-4-9B-0414: 4096 / 40 / 32, 2 KV / 128 / 13696 / 151552; RoPE on
      // half of each head (64 of 128 dims).
      family("glm4-9b", "glm4", 4096, 40, 32, 2, 128, 13696, 151552, 32768, 10000.0f, false, 1e-5f),
      // Mixtral-8x7B: Mistral 7B's attention (4096 / 32 / 32 heads, 8 KV) with
      // 8 experts of FFN 14336 per layer, 2 used; vocabulary 32000.
      experts(family("mixtral-8x7b", "llama", 4096, 32, 32, 8, 0, 14336, 32000, 32768, 1e6f, false, 1e-5f), 8, 2),
      // Qwen3-30B-A3B: 2048 / 48 / 32, 4 KV / 128 / 128 experts of FFN 768, 8
      // used (intermediate_size 6144 as feed_forward_length) / 151936.
      experts(family("qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 128, 6144, 151936, 40960, 1e6f, false, 1e-6f), 128,
              8, 768),
      // GLM-4.5-Air: 4096 / 46 layers / 96 heads, 8 KV / 128 / dense FFN
      // 10944 on the first layer, then 128 experts of FFN 1408 (8 used) and
      // one shared expert / 151552; routed_scaling_factor 1, no q/k norms.
      glm4moe("glm-4.5-air", 4096, 46, 96, 8, 128, 10944, 151552, 128, 8, 1408, 1, 1.0f, false),
      gpt_oss("gpt-oss-20b", 2880, 24, 64, 8, 64, 2880, 201088, 32, 128),
      gpt_oss("gpt-oss-120b", 2880, 36, 64, 8, 64, 2880, 201088, 128, 128),
      // Their first 4 layers: per-layer measurements without the whole file.
      experts(family("mixtral-8x7b-4l", "llama", 4096, 4, 32, 8, 0, 14336, 32000, 32768, 1e6f, false, 1e-5f), 8, 2),
      experts(family("qwen3-30b-a3b-4l", "qwen3moe", 2048, 4, 32, 4, 128, 6144, 151936, 40960, 1e6f, false, 1e-6f), 128,
              8, 768),
      // Test sizes of each family.
      family("tiny-qwen2", "qwen2", 256, 2, 4, 2, 64, 512, 1024, 2048, 1e6f, true, 1e-6f),
      family("tiny-qwen3", "qwen3", 256, 2, 4, 2, 64, 512, 1024, 2048, 1e6f, false, 1e-6f),
      family("tiny-gemma2", "gemma2", 256, 4, 4, 2, 128, 512, 1024, 2048, 10000.0f, true, 1e-6f),
      family("tiny-gemma3", "gemma3", 256, 6, 4, 2, 128, 512, 1024, 2048, 1e6f, true, 1e-6f),
      family("tiny-phi3", "phi3", 256, 2, 4, 4, 64, 512, 1024, 2048, 10000.0f, false, 1e-5f),
      family("tiny-glm4", "glm4", 256, 2, 4, 2, 64, 512, 1024, 2048, 10000.0f, false, 1e-5f),
      experts(family("tiny-mixtral", "llama", 256, 2, 4, 2, 0, 512, 1024, 2048, 1e6f, false, 1e-5f), 4, 2),
      // 8 experts: q4_k_m's rules for 8-expert models apply.
      experts(family("tiny-qwen3moe", "qwen3moe", 256, 2, 4, 2, 64, 512, 1024, 2048, 1e6f, false, 1e-6f), 8, 2, 256),
      gpt_oss("tiny-gpt-oss", 256, 4, 4, 2, 64, 256, 1024, 8, 16),
      // (q/k norms as in GLM-4.5 355B; the weight scale 2.5 as there)
      glm4moe("tiny-glm4moe", 256, 4, 4, 2, 64, 512, 1024, 8, 2, 256, 1, 2.5f, true),
  };
  for (auto& p : v) {
    if (p.arch == "gemma2") {
      p.sliding_window = p.name == "tiny-gemma2" ? 16 : 4096;
      p.attn_softcap = 50.0f;
      p.final_softcap = 30.0f;
    } else if (p.arch == "gemma3") {
      p.sliding_window = p.name == "tiny-gemma3" ? 16 : 1024;
      p.swa_pattern = p.name == "tiny-gemma3" ? 3 : 6;
      if (p.name == "gemma3-12b") p.rope_scale_linear = 8.0f;
    } else if (p.arch == "phi3") {
      p.sliding_window = p.name == "phi3-mini" ? 2047 : 0;  // in the real file; llama.cpp ignores it
    } else if (p.arch == "glm4") {
      p.n_rot = p.hd() / 2;
    }
  }
  // The first 4 layers of each family's full-size preset, at its real
  // widths: per-layer measurements, and the GPU test of every family's
  // kernels at those widths (CudaFamilyWidths).
  for (const char* name :
       {"qwen2.5-7b", "qwen3-0.6b", "qwen3-8b", "gemma2-9b", "gemma3-12b", "phi3-mini", "glm4-9b", "glm-4.5-air"}) {
    SyntheticPreset p = *std::find_if(v.begin(), v.end(), [&](const SyntheticPreset& q) { return q.name == name; });
    p.name += "-4l";
    p.n_layer = 4;
    v.push_back(p);
  }
  add_hybrid_presets(v);  // Qwen3.5 / Qwen3.6 (model/synthetic_hybrid.cpp)
  add_gemma4_presets(v);  // Gemma 4 (model/synthetic_gemma4.cpp)
  add_deepseek_presets(v);  // DeepSeek V2/V3 (model/synthetic_deepseek.cpp)
  return v;
}

uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = seed;
  for (char c : name) h = splitmix64(h ^ uint8_t(c));
  return h;
}

}  // namespace

int32_t SyntheticPreset::n_tensors() const {
  if (gemma4()) return 2 + (tied_embeddings ? 0 : 1) + gemma4_tensors(*this);
  if (deepseek2()) return 2 + (tied_embeddings ? 0 : 1) + deepseek_tensors(*this);
  if (hybrid()) {
    int32_t n = 2 + (tied_embeddings ? 0 : 1);
    for (int32_t il = 0; il < n_layer + nextn_layers; ++il) n += hybrid_block_tensors(*this, il);
    return n;
  }
  int32_t n = 2 + (tied_embeddings ? 0 : 1);
  for (int32_t il = 0; il < n_layer; ++il) {
    const bool moe = moe_layer(il);
    const int32_t ffn = moe ? 4 + (glm4moe() ? 1 + (n_expert_shared > 0 ? 3 : 0) : 0) : (fused_gate_up ? 1 : 2) + 1;
    n += 2 + (fused_qkv ? 1 : 3) + 1 + (qkv_bias ? 3 : 0) + (qk_norm ? 2 : 0) + (post_norms ? 2 : 0) + ffn +
         (oai_blocks ? 2 + (moe ? 4 : 0) : 0);
  }
  return n;
}

std::optional<SyntheticPreset> synthetic_preset(const std::string& name) {
  for (const auto& p : presets())
    if (p.name == name) return p;
  return std::nullopt;
}

std::string synthetic_preset_names() {
  std::string s;
  for (const auto& p : presets()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

void synthetic_values(uint64_t seed, uint64_t first, float scale, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint64_t idx = first + i;
    const uint64_t r = splitmix64(seed ^ (idx >> 2) * 0x9e3779b97f4a7c15ull);
    const uint32_t bits = uint32_t(r >> (16 * (idx & 3))) & 0xffffu;
    out[i] = (float(bits) + 0.5f) * (2.0f / 65536.0f) - 1.0f;  // (-1, 1), never 0
    out[i] *= scale;
  }
}

void synthetic_rows(ThreadPool& pool, DType type, uint64_t seed, int64_t cols, int64_t n_rows, float scale,
                    uint8_t* dst) {
  const size_t rb = row_bytes(type, uint64_t(cols));
  pool.parallel_for(size_t(n_rows), 1, [&](size_t r0, size_t r1) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (size_t r = r0; r < r1; ++r) {
      synthetic_values(seed, r * uint64_t(cols), scale, row.data(), row.size());
      quantize_row(type, row.data(), dst + r * rb, row.size());
    }
  });
}

namespace {

// The model's metadata and tensors (filled when written).
void describe(gguf::Writer& w, const SyntheticPreset& p, const QuantPlan& plan, uint64_t seed, ThreadPool& pool) {
  const std::string a = p.arch + ".";
  const int64_t hd = p.hd();
  w.set_string("general.architecture", p.arch);
  w.set_string("general.name", "synthetic " + p.name);
  w.set_u32("general.file_type", uint32_t(plan.file_type));
  w.set_u32(a + "context_length", uint32_t(p.n_ctx));
  w.set_u32(a + "embedding_length", uint32_t(p.n_embd));
  w.set_u32(a + "block_count", uint32_t(p.n_layer + p.nextn_layers));  // MTP blocks counted in (llama.cpp)
  if (p.n_ff > 0) w.set_u32(a + "feed_forward_length", uint32_t(p.n_ff));
  w.set_u32(a + "attention.head_count", uint32_t(p.n_head));
  w.set_u32(a + "attention.head_count_kv", uint32_t(p.n_head_kv));
  if (p.head_dim > 0) {
    w.set_u32(a + "attention.key_length", uint32_t(hd));
    w.set_u32(a + "attention.value_length", uint32_t(hd));
  }
  w.set_f32(a + "attention.layer_norm_rms_epsilon", p.rms_eps);
  w.set_f32(a + "rope.freq_base", p.rope_base);
  w.set_u32(a + "rope.dimension_count", uint32_t(p.n_rot > 0 ? p.n_rot : hd));
  if (p.rope_scale_linear > 0) {
    w.set_string(a + "rope.scaling.type", "linear");
    w.set_f32(a + "rope.scaling.factor", p.rope_scale_linear);
  }
  if (p.yarn_factor > 0) {
    w.set_string(a + "rope.scaling.type", "yarn");
    w.set_f32(a + "rope.scaling.factor", p.yarn_factor);
    w.set_u32(a + "rope.scaling.original_context_length", uint32_t(p.yarn_orig_ctx));
    w.set_f32(a + "rope.scaling.yarn_beta_fast", 32.0f);
    w.set_f32(a + "rope.scaling.yarn_beta_slow", 1.0f);
  }
  if (p.sliding_window > 0) w.set_u32(a + "attention.sliding_window", uint32_t(p.sliding_window));
  if (p.swa_pattern > 0) w.set_u32(a + "attention.sliding_window_pattern", uint32_t(p.swa_pattern));
  if (p.attn_softcap > 0) w.set_f32(a + "attn_logit_softcapping", p.attn_softcap);
  if (p.final_softcap > 0) w.set_f32(a + "final_logit_softcapping", p.final_softcap);
  w.set_u32(a + "vocab_size", uint32_t(p.n_vocab));
  if (p.n_expert > 0) {
    w.set_u32(a + "expert_count", uint32_t(p.n_expert));
    w.set_u32(a + "expert_used_count", uint32_t(p.n_expert_used));
    if (p.n_ff_expert > 0) w.set_u32(a + "expert_feed_forward_length", uint32_t(p.n_ff_expert));
  }
  if (p.glm4moe()) {
    w.set_u32(a + "expert_shared_count", uint32_t(p.n_expert_shared));
    w.set_u32(a + "leading_dense_block_count", uint32_t(p.n_layer_dense_lead));
    w.set_u32(a + "expert_gating_func", 2);  // sigmoid
    w.set_f32(a + "expert_weights_scale", p.expert_weights_scale);
    w.set_bool(a + "expert_weights_norm", true);
  }
  if (p.hybrid()) describe_hybrid_metadata(w, p);
  if (p.gemma4()) describe_gemma4_metadata(w, p);
  if (p.deepseek2()) describe_deepseek_metadata(w, p);

  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(size_t(p.n_vocab));
  for (const char* s : {"<unk>", "<s>", "</s>"}) tokens.push_back(s);
  types = {2, 3, 3};
  char buf[16];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  for (int i = 0; int32_t(tokens.size()) < p.n_vocab; ++i) {
    tokens.push_back("\xe2\x96\x81t" + std::to_string(i));
    types.push_back(1);
  }
  scores.resize(tokens.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -float(i);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_f32s("tokenizer.ggml.scores", scores);
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);

  // A matrix [cols, rows], or `stack` of them as one 3-D tensor [cols, rows,
  // stack] (experts).
  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows, int64_t stack = 0) {
    const int n_dims = stack > 0 ? 3 : 2;
    const DType t = plan_tensor_type(plan, name, cols, n_dims, p.n_layer, p.tied_embeddings, p.n_expert,
                                     p.n_head / p.n_head_kv);
    const uint64_t tseed = name_seed(seed, name);
    // Uniform in (-a, a) with standard deviation 1/sqrt(cols): unit-scale outputs.
    const float scale = std::sqrt(3.0f / float(cols));
    std::vector<uint64_t> dims = {uint64_t(cols), uint64_t(rows)};
    if (stack > 0) dims.push_back(uint64_t(stack));
    const int64_t all_rows = rows * std::max<int64_t>(stack, 1);
    w.add_tensor(name, t, dims,
                 [=, &pool](uint8_t* dst) { synthetic_rows(pool, t, tseed, cols, all_rows, scale, dst); });
  };
  // Norm weights near 1; biases near 0.
  auto vec = [&](const std::string& name, int64_t n, float offset) {
    const uint64_t tseed = name_seed(seed, name);
    w.add_tensor(name, DType::F32, {uint64_t(n)}, [=](uint8_t* dst) {
      std::vector<float> v(static_cast<size_t>(n));
      synthetic_values(tseed, 0, 0.1f, v.data(), v.size());
      for (auto& x : v) x += offset;
      std::memcpy(dst, v.data(), v.size() * 4);
    });
  };
  auto norm = [&](const std::string& name, int64_t n) { vec(name, n, 1.0f); };
  // Biases per expert: f32 [n, stack], near 0.
  auto bias_matrix = [&](const std::string& name, int64_t n, int64_t stack) {
    const uint64_t tseed = name_seed(seed, name);
    w.add_tensor(name, DType::F32, {uint64_t(n), uint64_t(stack)}, [=](uint8_t* dst) {
      std::vector<float> v(static_cast<size_t>(n * stack));
      synthetic_values(tseed, 0, 0.1f, v.data(), v.size());
      std::memcpy(dst, v.data(), v.size() * 4);
    });
  };
  const int64_t q_dim = p.n_head * hd, kv_dim = p.n_head_kv * hd;
  matrix("token_embd.weight", p.n_embd, p.n_vocab);
  norm("output_norm.weight", p.n_embd);
  if (!p.tied_embeddings) matrix("output.weight", p.n_embd, p.n_vocab);
  if (p.hybrid()) {
    TensorSink sink;
    sink.matrix = matrix;
    sink.vec = vec;
    sink.f32_matrix = [&](const std::string& name, int64_t cols, int64_t rows) {
      const uint64_t tseed = name_seed(seed, name);
      const float scale = std::sqrt(3.0f / float(cols));
      w.add_tensor(name, DType::F32, {uint64_t(cols), uint64_t(rows)}, [=](uint8_t* dst) {
        std::vector<float> v(static_cast<size_t>(cols * rows));
        synthetic_values(tseed, 0, scale, v.data(), v.size());
        std::memcpy(dst, v.data(), v.size() * 4);
      });
    };
    for (int32_t il = 0; il < p.n_layer + p.nextn_layers; ++il) describe_hybrid_block(sink, p, il);
    return;
  }
  if (p.deepseek2()) {
    TensorSink sink;
    sink.matrix = matrix;
    sink.vec = vec;
    describe_deepseek_tensors(sink, p);
    return;
  }
  if (p.gemma4()) {
    TensorSink sink;
    sink.matrix = matrix;
    sink.vec = vec;
    sink.f32_values = [&](const std::string& name, std::vector<float> values) {
      w.add_tensor(name, DType::F32, {uint64_t(values.size())},
                   [values](uint8_t* dst) { std::memcpy(dst, values.data(), values.size() * 4); });
    };
    describe_gemma4_tensors(sink, p);
    return;
  }
  for (int l = 0; l < p.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    norm(b + "attn_norm.weight", p.n_embd);
    if (p.fused_qkv) {
      matrix(b + "attn_qkv.weight", p.n_embd, q_dim + 2 * kv_dim);
    } else {
      matrix(b + "attn_q.weight", p.n_embd, q_dim);
      matrix(b + "attn_k.weight", p.n_embd, kv_dim);
      matrix(b + "attn_v.weight", p.n_embd, kv_dim);
    }
    if (p.qkv_bias) {
      vec(b + "attn_q.bias", q_dim, 0.0f);
      vec(b + "attn_k.bias", kv_dim, 0.0f);
      vec(b + "attn_v.bias", kv_dim, 0.0f);
    }
    if (p.qk_norm) {
      norm(b + "attn_q_norm.weight", hd);
      norm(b + "attn_k_norm.weight", hd);
    }
    matrix(b + "attn_output.weight", q_dim, p.n_embd);
    if (p.oai_blocks) {
      vec(b + "attn_output.bias", p.n_embd, 0.0f);
      vec(b + "attn_sinks.weight", p.n_head, 0.0f);
    }
    if (p.post_norms) norm(b + "post_attention_norm.weight", p.n_embd);
    norm(b + (p.oai_blocks || p.glm4moe() ? "post_attention_norm.weight" : "ffn_norm.weight"), p.n_embd);
    if (p.moe_layer(l)) {
      const int64_t ff = p.expert_ff();
      matrix(b + "ffn_gate_inp.weight", p.n_embd, p.n_expert);
      if (p.glm4moe()) {
        vec(b + "exp_probs_b.bias", p.n_expert, 0.0f);
        if (p.n_expert_shared > 0) {
          const int64_t sh = ff * p.n_expert_shared;
          matrix(b + "ffn_gate_shexp.weight", p.n_embd, sh);
          matrix(b + "ffn_up_shexp.weight", p.n_embd, sh);
          matrix(b + "ffn_down_shexp.weight", sh, p.n_embd);
        }
      }
      matrix(b + "ffn_gate_exps.weight", p.n_embd, ff, p.n_expert);
      matrix(b + "ffn_up_exps.weight", p.n_embd, ff, p.n_expert);
      matrix(b + "ffn_down_exps.weight", ff, p.n_embd, p.n_expert);
      if (p.oai_blocks) {
        vec(b + "ffn_gate_inp.bias", p.n_expert, 0.0f);
        bias_matrix(b + "ffn_gate_exps.bias", ff, p.n_expert);
        bias_matrix(b + "ffn_up_exps.bias", ff, p.n_expert);
        bias_matrix(b + "ffn_down_exps.bias", p.n_embd, p.n_expert);
      }
    } else {
      if (p.fused_gate_up) {
        matrix(b + "ffn_up.weight", p.n_embd, 2 * int64_t(p.n_ff));
      } else {
        matrix(b + "ffn_gate.weight", p.n_embd, p.n_ff);
        matrix(b + "ffn_up.weight", p.n_embd, p.n_ff);
      }
      matrix(b + "ffn_down.weight", p.n_ff, p.n_embd);
    }
    if (p.post_norms) norm(b + "post_ffw_norm.weight", p.n_embd);
  }
}

}  // namespace

void write_synthetic_model(const SyntheticPreset& p, const QuantPlan& plan, const std::string& path, uint64_t seed,
                           ThreadPool& pool, const std::function<void(uint64_t, uint64_t)>& progress) {
  gguf::Writer w;
  describe(w, p, plan, seed, pool);
  w.write(path, [&](size_t done, size_t total) {
    if (progress) progress(done, total);
  });
}

std::vector<uint8_t> synthetic_header(const SyntheticPreset& p, const QuantPlan& plan) {
  gguf::Writer w;
  ThreadPool pool(1);  // (the fills that would use it are never called)
  describe(w, p, plan, 0, pool);
  return w.header();
}

}  // namespace rf
