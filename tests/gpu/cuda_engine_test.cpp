// The engine on the CUDA backend: batch invariance of greedy output (alone
// vs among 32 concurrent requests, under a KV cache small enough to force
// preemption, with chunked prefill, decode graphs and GPU sampling) on
// stories260K, every qtest model and a synthetic f16 model; and, for the
// synthetic model and the hybrids, logits of a sequence alone vs in a batch
// of 32 (mixed prefill and decode) within relative L2 1e-2, or
// f16_tolerance() of a model that sensitive to f16 rounding. GPU kernels may reduce in a
// different order for different batch shapes, so greedy outputs may part
// only where the alone run's two best tokens were within 1e-2 nats of each
// other (near_tie_nats(): more for a model more sensitive to f16 rounding;
// checked with its logprobs) and the batch took the runner-up;
// anywhere else is a failure -- except, for MoE models, after a routing
// decision the CPU finds closer than kMinRoutingMargin in the text both runs
// saw (routing_margin.h). (Seen on an H200: 0-3 of 33 requests per model
// part, at gaps of 1e-5 to 4e-3 nats.)
// Explicit small memory budgets (KV blocks, dequant scratch) so that GPU
// tests can run side by side.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "gpu/f16_sensitivity.h"
#include "gpu/gpu_test_util.h"
#include "gpu/near_tie.h"
#include "gpu/routing_margin.h"
#include "model/runner.h"
#include "model/synthetic.h"
#include "model/temp_model.h"
#include "unit/engine_test_util.h"

namespace rf {
namespace {

using test::TempModel;

// Greedy, with the two best alternatives' logprobs when `logprobs`.
Request greedy_req(std::vector<int32_t> prompt, int32_t max_tokens, bool logprobs) {
  Request r = test::greedy(std::move(prompt), max_tokens);
  r.ignore_eos = true;  // random-weight models: lengths stay as asked
  r.logprobs = logprobs;
  r.sampling.top_logprobs = logprobs ? 4 : 0;  // (near_tie.h: a parting to any of them within the tie)
  return r;
}

class CudaEngineBatch : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaEngineBatch, GreedyAloneEqualsAmong32) {
  RF_REQUIRE_GPU();
  // "MODEL" or "MODEL:fp8" (an e4m3 KV cache).
  const std::string param = GetParam();
  const bool fp8 = param.size() > 4 && param.substr(param.size() - 4) == ":fp8";
  const std::string name = fp8 ? param.substr(0, param.size() - 4) : param;
  auto engine_config = [&](int32_t blocks, int32_t batch_tokens, int32_t seqs, bool prefix) {
    EngineConfig c = test::config(blocks, 16, batch_tokens, seqs, prefix);
    if (fp8) c.kv_cache_dtype = KVCacheDType::Fp8;
    return c;
  };
  std::unique_ptr<TempModel> temp;
  std::string path;
  if (name.rfind("synthetic-tiny-", 0) == 0) {  // synthetic-tiny-TYPE: the tiny preset quantized to TYPE
    temp = std::make_unique<TempModel>("tiny", name.substr(15));
    path = temp->path();
  } else {
    RF_REQUIRE_TESTDATA(name);
    path = test::testdata_path(name);
  }
  // FP8 weights keep f16 activations here: by default batches past 8 rows
  // multiply e4m3 activations (Tuning::fp8_gemm_min_rows), so a
  // sequence's activations are rounded among 32 and not alone, by design.
  auto gpu = test::make_gpu(/*fp8_activations=*/false);
  auto model = Model::load(path, *gpu, false);
  auto tok = Tokenizer::from_gguf(model->file());
  const int32_t vocab = model->config().n_vocab;

  // The first request, then 32 others of random lengths (prompts up to 60
  // tokens, up to 64 new), some sharing a 40-token prefix.
  std::mt19937 rng(11);
  auto rand_tokens = [&](int n) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back(3 + int32_t(rng() % uint32_t(vocab - 3)));
    return v;
  };
  const auto shared = rand_tokens(40);
  std::vector<std::vector<int32_t>> prompts = {rand_tokens(12)};
  std::vector<int32_t> lens = {64};
  for (int i = 0; i < 32; ++i) {
    auto p = i % 3 == 0 ? shared : rand_tokens(1 + int(rng() % 60));
    if (i % 3 == 0) {
      const auto tail = rand_tokens(int(rng() % 10));
      p.insert(p.end(), tail.begin(), tail.end());
    }
    prompts.push_back(p);
    lens.push_back(1 + int32_t(rng() % 64));
  }

  // Blocks for the longest request (124 tokens) alone: 8, or more where
  // sliding-window KV groups split the layers over several blocks.
  const int32_t one = int32_t(kv_group_layout(model->config()).max_blocks_per_sequence(124, 16, 256));
  std::vector<test::Output> alone;
  {
    auto engine = std::make_unique<Engine>(*model, *tok, *gpu, engine_config(std::max(16, one), 256, 1, false));
    for (size_t i = 0; i < prompts.size(); ++i)
      alone.push_back(test::run_one(*engine, greedy_req(prompts[i], lens[i], true)));
    test::expect_idle(*engine);
  }
  // 48 blocks of 16 (at least the longest request's and 8 more) for 33
  // requests of up to 124 tokens: preemption; 128 tokens per step: chunked
  // prefill beside decode tokens.
  auto engine = std::make_unique<Engine>(*model, *tok, *gpu, engine_config(std::max(48, one + 8), 128, 64, true));
  std::vector<Request> reqs;
  for (size_t i = 0; i < prompts.size(); ++i) reqs.push_back(greedy_req(prompts[i], lens[i], false));
  const auto batched = test::run_all(*engine, reqs);
  EXPECT_GT(engine->metrics().preemptions.load(), 0u);
  EXPECT_GT(engine->metrics().prefix_cache_hit_tokens.load(), 0u);
  int near_ties = 0, routing_ties = 0;
  // (A model more sensitive to f16 rounding: near-ties within more nats,
  // and as many more of them; near_tie_nats.)
  const double tie = test::near_tie_nats(test::f16_sensitivity(path, prompts[0], 8));
  const int max_ties = std::min(int(prompts.size()), int(8 * tie / 1e-2));
  if (tie > 1e-2) std::printf("  %s: near-ties within %.2e nats (f16 sensitivity)\n", name.c_str(), tie);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(batched[i].reason, FinishReason::Length) << name << " request " << i;
    EXPECT_EQ(batched[i].tokens.size(), size_t(lens[i])) << name << " request " << i;
    ::testing::AssertionResult same = test::same_up_to_near_tie(alone[i], batched[i], tie, &near_ties);
    if (!same && model->config().has_experts()) {
      // MoE: a parting explained by a routing near-tie in the text both
      // runs saw (prompt and the tokens before the parting) is not a bug.
      size_t k = 0;
      while (k < alone[i].tokens.size() && k < batched[i].tokens.size() && alone[i].tokens[k] == batched[i].tokens[k])
        ++k;
      std::vector<int32_t> seen = prompts[i];
      seen.insert(seen.end(), alone[i].tokens.begin(), alone[i].tokens.begin() + std::ptrdiff_t(k));
      const float margin = test::cpu_routing_margin(path, seen);
      if (margin < test::kMinRoutingMargin) {
        ++routing_ties;
        std::printf("  parted at token %zu after a routing near-tie (CPU margin %.1e)\n", k, double(margin));
        same = ::testing::AssertionSuccess();
      }
    }
    EXPECT_TRUE(same) << name << " request " << i;
  }
  // On an H200, 0 to 3 of the 33 part per model, all within 4e-3 nats.
  EXPECT_LE(near_ties, max_ties) << name << ": too many requests parted, even at near-ties";
  EXPECT_LE(routing_ties, 8) << name << ": too many requests parted, even at routing near-ties";
  if (near_ties > 0) std::printf("%s: %d request(s) parted at a near-tie\n", name.c_str(), near_ties);
  test::expect_idle(*engine);
}

TEST(CudaEngineBatch, StoriesGoldenAmong32) {
  RF_REQUIRE_GPU();
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  auto gpu = test::make_gpu();
  auto model = Model::load(test::testdata_path("stories260K.gguf"), *gpu, false);
  auto tok = Tokenizer::from_gguf(model->file());
  const auto golden = test::read_golden();
  std::vector<Request> reqs;
  for (int i = 0; i < 33; ++i) {
    const auto& g = golden[size_t(i) % golden.size()];
    reqs.push_back(test::greedy(g.prompt_tokens, 16 + 48 * (i % 2)));
  }
  auto engine = std::make_unique<Engine>(*model, *tok, *gpu, test::config(64, 16, 128, 64, true));
  const auto outs = test::run_all(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& g = golden[i % golden.size()];
    EXPECT_EQ(outs[i].tokens, std::vector<int32_t>(g.greedy_tokens.begin(),
                                                   g.greedy_tokens.begin() + long(reqs[i].max_tokens)))
        << g.prompt;
    EXPECT_EQ(g.greedy_text.rfind(outs[i].text, 0), 0u) << "text is not a prefix of the golden text: " << g.prompt;
  }
  test::expect_idle(*engine);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaEngineBatch,
                         ::testing::Values("stories260K.gguf", "synthetic-tiny-f16", "quant/qtest-f16.gguf",
                                           "quant/qtest-q8_0.gguf", "quant/qtest-q4_0.gguf", "quant/qtest-q4_1.gguf",
                                           "quant/qtest-q5_0.gguf", "quant/qtest-q5_1.gguf", "quant/qtest-q2_k.gguf",
                                           "quant/qtest-q3_k.gguf", "quant/qtest-q4_k.gguf", "quant/qtest-q5_k.gguf",
                                           "quant/qtest-q6_k.gguf", "quant/qtest-q4_k_m.gguf",
                                           "arch/tiny-qwen2.gguf", "arch/tiny-qwen3.gguf", "arch/tiny-gemma2.gguf",
                                           "arch/tiny-gemma3.gguf", "arch/tiny-phi3.gguf", "arch/tiny-glm4.gguf",
                                           "arch/tiny-mixtral.gguf", "arch/tiny-qwen3moe.gguf",
                                           "arch/tiny-qwen35.gguf", "arch/tiny-qwen35moe.gguf",
                                           "arch/tiny-gemma4.gguf", "arch/tiny-gemma4moe.gguf",
                                           "arch/tiny-glm4moe.gguf", "arch/tiny-deepseek2.gguf",
                                           "synthetic-tiny-f16:fp8", "arch/tiny-gemma2.gguf:fp8", "synthetic-tiny-fp8"),
                         [](const auto& info) { return test::param_name(info.param); });

// Logits of sequences 0 and 31 alone vs in a batch of 32: prefill, decode
// steps, and decode steps beside new prompt chunks of other sequences; and
// the batch's logits of every sequence against the CPU's, fed the same
// tokens (the CPU's matmuls are the same row by row in any batch). Models:
// the synthetic tiny preset, and the hybrids, whose DeltaNet layers carry a
// state row per sequence through the same steps.
class CudaEngineLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaEngineLogits, AloneVsBatchOf32) {
  RF_REQUIRE_GPU();
  const std::string name = GetParam();
  std::unique_ptr<TempModel> temp;
  std::string path;
  if (name == "synthetic-tiny-f16") {
    temp = std::make_unique<TempModel>("tiny", "f16");
    path = temp->path();
  } else {
    RF_REQUIRE_TESTDATA(name);
    path = test::testdata_path(name);
  }
  auto gpu = test::make_gpu();
  test::ModelRunner runner(path, *gpu, 2048, 32, 768, 16);
  runner.warmup();
  CpuBackend cpu(int(std::max(2u, std::thread::hardware_concurrency())));
  test::ModelRunner ref(path, cpu, 2048, 32, 768, 16);
  // The same rounding as the GPU (f16_sensitivity.h): the run's bound
  // against the CPU.
  test::F16RoundedCpu cpu16(int(std::max(2u, std::thread::hardware_concurrency())));
  test::ModelRunner ref16(path, cpu16, 2048, 32, 768, 16);
  const uint32_t vocab = uint32_t(runner.vocab());
  std::mt19937 rng(21);
  std::vector<test::ModelRunner::Seq> seqs(32), cseqs(32), c16seqs(32);
  for (auto& s : seqs)
    for (int i = 0, n = 5 + int(rng() % 40); i < n; ++i) s.tokens.push_back(int32_t(rng() % vocab));
  for (size_t i = 0; i < 32; ++i) c16seqs[i].tokens = cseqs[i].tokens = seqs[i].tokens;
  std::vector<std::vector<int32_t>> extra(32);  // prompt chunks appended at step 4
  for (size_t i = 1; i < 32; i += 2)
    for (int j = 0; j < 20; ++j) extra[i].push_back(int32_t(rng() % vocab));

  constexpr int kSteps = 9;
  std::vector<test::ModelRunner::Seq*> ptrs, cptrs, c16ptrs;
  for (auto& s : seqs) ptrs.push_back(&s);
  for (auto& s : cseqs) cptrs.push_back(&s);
  for (auto& s : c16seqs) c16ptrs.push_back(&s);
  // Batched run; the tokens fed after each step are the batch's own argmax.
  std::vector<std::vector<std::vector<float>>> batched(kSteps);  // [step][seq]
  std::vector<std::vector<std::vector<float>>> on_cpu(kSteps);   // [step][seq]
  std::vector<std::vector<int32_t>> start(32);
  double sens = 0.0;  // the f16-rounded CPU's largest distance from the CPU
  for (size_t i = 0; i < 32; ++i) start[i] = seqs[i].tokens;
  for (int step = 0; step < kSteps; ++step) {
    batched[size_t(step)] = runner.step(ptrs);
    on_cpu[size_t(step)] = ref.step(cptrs);
    const auto on_cpu16 = ref16.step(c16ptrs);
    for (size_t i = 0; i < 32; ++i) sens = std::max(sens, test::rel_l2(on_cpu16[i], on_cpu[size_t(step)][i]));
    for (size_t i = 0; i < 32; ++i) {
      const int32_t next = test::ModelRunner::argmax(batched[size_t(step)][i]);
      for (auto* s : {&seqs[i], &cseqs[i], &c16seqs[i]}) {
        s->tokens.push_back(next);
        if (step == 3) s->tokens.insert(s->tokens.end(), extra[i].begin(), extra[i].end());
      }
    }
  }
  // Every sequence and step against the CPU, within the bound of the
  // run's f16 sensitivity.
  const double bound = test::f16_tolerance(sens);
  for (int step = 0; step < kSteps; ++step) {
    double worst = 0.0;
    for (size_t i = 0; i < 32; ++i) {
      const double err = test::rel_l2(batched[size_t(step)][i], on_cpu[size_t(step)][i]);
      worst = std::max(worst, err);
      EXPECT_LT(err, bound) << name << ": sequence " << i << " step " << step << " in the batch, against the CPU";
    }
    std::printf("  %s step %d: worst rel. L2 of the batch against the CPU %.2e (bound %.2e)\n", name.c_str(), step,
                worst, bound);
  }
  const std::vector<std::vector<int32_t>> fed = [&] {
    std::vector<std::vector<int32_t>> f;
    for (auto& s : seqs) f.push_back(s.tokens);
    return f;
  }();
  for (auto& s : seqs) runner.release(s);
  // Each of sequences 0 and 31 alone, fed exactly the same tokens per step.
  for (size_t i : {size_t(0), size_t(31)}) {
    test::ModelRunner::Seq s;
    s.tokens = start[i];
    size_t pos = start[i].size();
    for (int step = 0; step < kSteps; ++step) {
      const auto logits = runner.step({&s})[0];
      const double err = test::rel_l2(logits, batched[size_t(step)][i]);
      std::printf("  %s sequence %zu step %d: rel. L2 alone vs batched %.2e\n", name.c_str(), i, step, err);
      EXPECT_LT(err, bound) << name << ": sequence " << i << " step " << step;
      const size_t n_next = 1 + (step == 3 ? extra[i].size() : 0);
      s.tokens.insert(s.tokens.end(), fed[i].begin() + long(pos), fed[i].begin() + long(pos + n_next));
      pos += n_next;
    }
    runner.release(s);
  }
  EXPECT_EQ(runner.pool().num_free(), runner.pool().num_blocks());
}

INSTANTIATE_TEST_SUITE_P(Models, CudaEngineLogits,
                         ::testing::Values("synthetic-tiny-f16", "arch/tiny-qwen35.gguf", "arch/tiny-qwen35moe.gguf"),
                         [](const auto& info) { return test::param_name(info.param); });

// Sliding-window KV groups on the GPU (synthetic tiny-gemma3: window 16,
// 16-token blocks): three 240-token generations at once, prompts in chunks
// of 8, under a cache too small for every layer's full context (window
// blocks released and reused as the windows move, the kernels given tables
// with released entries), equal each one alone with room to spare and the
// whole prompt in one step, and that equals a run that keeps every block
// (test::ModelRunner) — up to near-ties.
TEST(CudaEngineWindow, LongGenerationsWithWindowGroups) {
  RF_REQUIRE_GPU();
  TempModel tm("tiny-gemma3", "f16", 11);
  auto gpu = test::make_gpu();
  auto model = Model::load(tm.path(), *gpu, false);
  auto tok = Tokenizer::from_gguf(model->file());
  const KVGroupLayout groups = kv_group_layout(model->config());
  ASSERT_EQ(groups.group_windows(), (std::vector<int32_t>{16, 16, 0}));
  std::mt19937 rng(31);
  std::vector<std::vector<int32_t>> prompts;
  for (int n : {40, 7, 90}) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(3 + int32_t(rng() % 1000));
    prompts.push_back(p);
  }
  const int32_t n_new = 240;
  std::vector<test::Output> alone;
  {
    auto engine = std::make_unique<Engine>(*model, *tok, *gpu, test::config(200, 16, 256, 1, false));
    for (const auto& p : prompts) alone.push_back(test::run_one(*engine, greedy_req(p, n_new, true)));
    test::expect_idle(*engine);
  }
  // Enough for the three with window groups, far from enough without them.
  int32_t need = 0;
  for (const auto& p : prompts) need += int32_t(groups.max_blocks_per_sequence(int32_t(p.size()) + n_new, 16, 8));
  int32_t without = 0;
  for (const auto& p : prompts) without += 3 * ((int32_t(p.size()) + n_new + 15) / 16);
  ASSERT_LT(need, without / 2);
  auto engine = std::make_unique<Engine>(*model, *tok, *gpu, test::config(need, 16, 8, 4, true));
  std::vector<Request> reqs;
  for (const auto& p : prompts) reqs.push_back(greedy_req(p, n_new, false));
  const auto together = test::run_all(*engine, reqs);
  EXPECT_EQ(engine->metrics().preemptions.load(), 0u);
  EXPECT_GT(engine->metrics().kv_window_releases.load(), 3u * 2 * 10);
  int near_ties = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(together[i].tokens.size(), size_t(n_new));
    EXPECT_TRUE(test::same_up_to_near_tie(alone[i], together[i], 1e-2, &near_ties)) << "request " << i;
  }
  test::expect_idle(*engine);
  engine.reset();
  // Every block kept, nothing released.
  test::ModelRunner runner(tm.path(), *gpu, 256, 1, 32, 16);
  for (size_t i = 0; i < prompts.size(); ++i) {
    test::Output kept;
    kept.tokens = runner.greedy(prompts[i], n_new, -1);
    EXPECT_TRUE(test::same_up_to_near_tie(alone[i], kept, 1e-2, &near_ties)) << "request " << i << " vs every block kept";
  }
  EXPECT_LE(near_ties, 3);
}

}  // namespace
}  // namespace rf
