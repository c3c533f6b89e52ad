// Embedding requests through the engine on the CUDA backend (the tiny Qwen3
// model of arch/): last and mean pooling equal llama.cpp's normalised
// embeddings (arch/tiny-qwen3.embd-*.jsonl) within what f16 activations
// allow, and submitted together — chunked (16 tokens a step), among
// generation requests — they equal the vectors computed alone.
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/gpu_test_util.h"
#include "unit/engine_test_util.h"

namespace rf {
namespace {

struct EmbdLine {
  std::vector<int32_t> prompt;
  std::vector<float> embedding;
};

std::vector<EmbdLine> embd_reference(const std::string& pooling) {
  std::ifstream in(test::testdata_path("arch/tiny-qwen3.embd-" + pooling + ".jsonl"));
  std::vector<EmbdLine> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) {
      const auto j = nlohmann::json::parse(line);
      out.push_back({j["prompt_tokens"].get<std::vector<int32_t>>(), j["embedding"].get<std::vector<float>>()});
    }
  return out;
}

std::vector<float> embedding_of(RequestStream& h) {
  std::vector<float> v;
  while (auto ev = h.next(std::chrono::milliseconds(0)))
    if (ev->finished) {
      EXPECT_EQ(ev->finish_reason, FinishReason::Stop) << ev->error;
      v = ev->embedding;
    }
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(double(a[i]) - double(b[i])));
  return d;
}

TEST(CudaEmbedding, PooledStatesEqualLlamaCppAloneAndBatched) {
  RF_REQUIRE_GPU();
  RF_REQUIRE_TESTDATA("arch/tiny-qwen3.gguf");
  RF_REQUIRE_TESTDATA("arch/tiny-qwen3.embd-last.jsonl");
  auto gpu = test::make_gpu();
  auto model = Model::load(test::testdata_path("arch/tiny-qwen3.gguf"), *gpu, false);
  auto tok = Tokenizer::from_gguf(model->file());
  for (const auto& [name, p] : {std::pair{"last", Pooling::Last}, std::pair{"mean", Pooling::Mean}}) {
    const auto ref = embd_reference(name);
    ASSERT_EQ(ref.size(), 4u);
    std::vector<std::vector<float>> alone;
    {
      Engine engine(*model, *tok, *gpu, test::config(64));
      for (const EmbdLine& line : ref) {
        Request r;
        r.prompt = line.prompt;
        r.pooling = p;
        RequestHandle h = engine.submit(r);
        engine.run_until_idle();
        alone.push_back(embedding_of(*h));
        // f16 activations: components of ~0.1 within a few 1e-3.
        EXPECT_LT(max_abs_diff(alone.back(), line.embedding), 5e-3) << name << ", " << line.prompt.size() << " tokens";
      }
      test::expect_idle(engine);
    }
    Engine engine(*model, *tok, *gpu, test::config(64, 16, 16, 16));
    std::vector<RequestHandle> hs, gen;
    for (const EmbdLine& line : ref) {
      Request r;
      r.prompt = line.prompt;
      r.pooling = p;
      hs.push_back(engine.submit(r));
      gen.push_back(engine.submit(test::greedy(line.prompt, 8)));
    }
    engine.run_until_idle();
    for (size_t i = 0; i < hs.size(); ++i)
      EXPECT_LT(max_abs_diff(embedding_of(*hs[i]), alone[i]), 2e-3) << name << " batched, prompt " << i;
    test::expect_idle(engine);
  }
}

}  // namespace
}  // namespace rf
