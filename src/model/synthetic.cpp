// Writing synthetic models (see synthetic.h).
#include "model/synthetic.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "core/rng.h"
#include "gguf/writer.h"

namespace rf {
namespace {

constexpr SyntheticPreset kPresets[] = {
    {"llama3-8b", 4096, 32, 32, 8, 14336, 128256, 8192, 500000.0f, false},
    {"llama3-8b-4l", 4096, 4, 32, 8, 14336, 128256, 8192, 500000.0f, false},
    {"llama2-7b", 4096, 32, 32, 32, 11008, 32000, 4096, 10000.0f, false},
    {"llama-1b", 2048, 16, 32, 8, 8192, 128256, 8192, 500000.0f, true},
    {"tiny", 256, 2, 4, 2, 512, 1024, 2048, 10000.0f, false},
};

uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = seed;
  for (char c : name) h = splitmix64(h ^ uint8_t(c));
  return h;
}

}  // namespace

std::optional<SyntheticPreset> synthetic_preset(const std::string& name) {
  for (const auto& p : kPresets)
    if (p.name == name) return p;
  return std::nullopt;
}

std::string synthetic_preset_names() {
  std::string s;
  for (const auto& p : kPresets) s += (s.empty() ? "" : ", ") + p.name;
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

void write_synthetic_model(const SyntheticPreset& p, const QuantPlan& plan, const std::string& path, uint64_t seed,
                           ThreadPool& pool, const std::function<void(uint64_t, uint64_t)>& progress) {
  gguf::Writer w;
  const std::string a = "llama.";
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "synthetic " + p.name);
  w.set_u32("general.file_type", uint32_t(plan.file_type));
  w.set_u32(a + "context_length", uint32_t(p.n_ctx));
  w.set_u32(a + "embedding_length", uint32_t(p.n_embd));
  w.set_u32(a + "block_count", uint32_t(p.n_layer));
  w.set_u32(a + "feed_forward_length", uint32_t(p.n_ff));
  w.set_u32(a + "attention.head_count", uint32_t(p.n_head));
  w.set_u32(a + "attention.head_count_kv", uint32_t(p.n_head_kv));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32(a + "rope.freq_base", p.rope_base);
  w.set_u32(a + "rope.dimension_count", uint32_t(p.n_embd / p.n_head));
  w.set_u32(a + "vocab_size", uint32_t(p.n_vocab));

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

  const int64_t hd = p.n_embd / p.n_head;
  auto matrix = [&](const std::string& name, int64_t cols, int64_t rows) {
    const DType t = plan_tensor_type(plan, name, cols, 2, p.n_layer);
    const uint64_t tseed = name_seed(seed, name);
    // Uniform in (-a, a) with standard deviation 1/sqrt(cols): unit-scale outputs.
    const float scale = std::sqrt(3.0f / float(cols));
    w.add_tensor(name, t, {uint64_t(cols), uint64_t(rows)}, [=, &pool](uint8_t* dst) {
      const size_t rb = row_bytes(t, uint64_t(cols));
      pool.parallel_for(size_t(rows), 64, [&](size_t r0, size_t r1) {
        std::vector<float> row(static_cast<size_t>(cols));
        for (size_t r = r0; r < r1; ++r) {
          synthetic_values(tseed, r * uint64_t(cols), scale, row.data(), row.size());
          quantize_row(t, row.data(), dst + r * rb, row.size());
        }
      });
    });
  };
  auto norm = [&](const std::string& name, int64_t n) {
    const uint64_t tseed = name_seed(seed, name);
    w.add_tensor(name, DType::F32, {uint64_t(n)}, [=](uint8_t* dst) {
      std::vector<float> v(static_cast<size_t>(n));
      synthetic_values(tseed, 0, 0.1f, v.data(), v.size());
      for (auto& x : v) x += 1.0f;
      std::memcpy(dst, v.data(), v.size() * 4);
    });
  };
  matrix("token_embd.weight", p.n_embd, p.n_vocab);
  norm("output_norm.weight", p.n_embd);
  if (!p.tied_embeddings) matrix("output.weight", p.n_embd, p.n_vocab);
  for (int l = 0; l < p.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    norm(b + "attn_norm.weight", p.n_embd);
    matrix(b + "attn_q.weight", p.n_embd, p.n_head * hd);
    matrix(b + "attn_k.weight", p.n_embd, p.n_head_kv * hd);
    matrix(b + "attn_v.weight", p.n_embd, p.n_head_kv * hd);
    matrix(b + "attn_output.weight", p.n_head * hd, p.n_embd);
    norm(b + "ffn_norm.weight", p.n_embd);
    matrix(b + "ffn_gate.weight", p.n_embd, p.n_ff);
    matrix(b + "ffn_up.weight", p.n_embd, p.n_ff);
    matrix(b + "ffn_down.weight", p.n_ff, p.n_embd);
  }
  w.write(path, [&](size_t done, size_t total) {
    if (progress) progress(done, total);
  });
}

}  // namespace rf
