// Engine generation on the CPU with the real stories260K model, against
// llama.cpp's golden greedy tokens and text: whole and chunked prefill,
// max_tokens, stop strings (across token boundaries, several, earliest
// wins), stop token ids, end-of-generation tokens with ignore_eos and
// min_tokens (a tokenizer whose EOG set includes a token the greedy output
// contains, so the golden file says where generation must end), and logit
// biases (a forced token, a forced end of generation, a banned golden token).
#include <gtest/gtest.h>

#include <algorithm>

#include "model/runner.h"
#include "tokenizer/vocab.h"
#include "unit/engine_test_util.h"

namespace rf {
namespace {

using test::config;
using test::greedy;
using test::Output;

std::string pieces(const Tokenizer& tok, const std::vector<int32_t>& ids, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += tok.token_to_piece(ids[i]);
  return s;
}

TEST(EngineGeneration, GoldenGreedyTokensAndText) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto golden = test::read_golden();
  ASSERT_FALSE(golden.empty());
  // Whole prompts in one step, and prompts in 2-token chunks.
  for (int32_t budget : {256, 2}) {
    auto engine = st.engine(config(64, 16, budget));
    std::vector<Request> reqs;
    for (const auto& g : golden) reqs.push_back(greedy(g.prompt_tokens, int32_t(g.greedy_tokens.size())));
    const auto outs = test::run_all(*engine, reqs);
    for (size_t i = 0; i < golden.size(); ++i) {
      SCOPED_TRACE(golden[i].prompt + ", budget " + std::to_string(budget));
      EXPECT_EQ(outs[i].tokens, golden[i].greedy_tokens);
      EXPECT_EQ(outs[i].text, golden[i].greedy_text);
      EXPECT_EQ(outs[i].reason, FinishReason::Length);
      EXPECT_EQ(outs[i].prompt_tokens, int32_t(golden[i].prompt_tokens.size()));
      EXPECT_EQ(outs[i].completion_tokens, int32_t(golden[i].greedy_tokens.size()));
    }
    EXPECT_EQ(engine->metrics().generation_tokens.load(), 64u * golden.size());
    // The steps' wall time by phase: the CPU's forward passes took some.
    EXPECT_GT(engine->metrics().step_micros[EngineMetrics::kForward].load(), 0u);
    const std::string text = engine->metrics().prometheus_text();
    for (const char* phase : {"schedule", "forward", "sample", "tokens"})
      EXPECT_NE(text.find(std::string("rocmforge_engine_step_seconds_total{phase=\"") + phase + "\"}"),
                std::string::npos)
          << phase;
    // Every step by the prompt tokens it carried: some carried the prompts
    // (none of more than the budget), the rest only decodes.
    uint64_t shaped = 0, with_prompt = 0;
    for (int i = 0; i < EngineMetrics::kStepShapes; ++i) {
      shaped += engine->metrics().shape_steps[size_t(i)].load();
      if (i > 0) with_prompt += engine->metrics().shape_steps[size_t(i)].load();
      if (i > EngineMetrics::step_shape(budget)) EXPECT_EQ(engine->metrics().shape_steps[size_t(i)].load(), 0u) << i;
    }
    EXPECT_EQ(shaped, engine->metrics().steps.load());
    EXPECT_GT(with_prompt, 0u);
    EXPECT_GT(engine->metrics().shape_steps[0].load(), 0u);
    EXPECT_NE(text.find("rocmforge_engine_steps_by_prompt_tokens_total{prompt_tokens=\"0\"}"), std::string::npos);
    test::expect_idle(*engine);
  }
}

TEST(EngineGeneration, MaxTokens) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto g = test::read_golden()[0];
  auto engine = st.engine(config(32));
  for (int32_t n : {1, 2, 7}) {
    const Output o = test::run_one(*engine, greedy(g.prompt_tokens, n));
    EXPECT_EQ(o.tokens, std::vector<int32_t>(g.greedy_tokens.begin(), g.greedy_tokens.begin() + n));
    EXPECT_EQ(o.text, pieces(st.tok(), g.greedy_tokens, size_t(n)));
    EXPECT_EQ(o.reason, FinishReason::Length);
    EXPECT_EQ(o.completion_tokens, n);
  }
  test::expect_idle(*engine);
}

// Expected result of greedy generation with stop strings: the tokens up to
// the first one whose text completes a stop string, the text before the
// earliest match in the text so far.
struct StopExpect {
  size_t n_tokens;
  std::string text;
};
StopExpect expect_stop(const Tokenizer& tok, const test::Golden& g, const std::vector<std::string>& stops) {
  for (size_t k = 1; k <= g.greedy_tokens.size(); ++k) {
    const std::string t = pieces(tok, g.greedy_tokens, k);
    size_t at = std::string::npos;
    for (const auto& s : stops) at = std::min(at, t.find(s));
    if (at != std::string::npos) return {k, t.substr(0, at)};
  }
  return {g.greedy_tokens.size(), g.greedy_text};
}

TEST(EngineGeneration, StopStrings) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto g = test::read_golden()[0];  // ", there was a little girl named Lily. She loved to play outside in the park..."
  ASSERT_EQ(pieces(st.tok(), g.greedy_tokens, g.greedy_tokens.size()), g.greedy_text);
  auto engine = st.engine(config(32));
  const std::vector<std::vector<std::string>> cases = {
      {"Lily"},                   // inside the text
      {"girl named"},             // across two tokens
      {"e was a lit"},            // starting and ending mid-token
      {"park", "named", "zzz"},   // several: the first to complete
      {"ball", "Lily. She"},      // the earlier start wins over a later short one
      {"not in the text"},        // never matches: held text is released
      {", there"},                // at the very start
  };
  for (const auto& stops : cases) {
    SCOPED_TRACE(stops[0]);
    const StopExpect want = expect_stop(st.tok(), g, stops);
    Request r = greedy(g.prompt_tokens, int32_t(g.greedy_tokens.size()));
    r.stop = stops;
    const Output o = test::run_one(*engine, r);
    EXPECT_EQ(o.tokens, std::vector<int32_t>(g.greedy_tokens.begin(), g.greedy_tokens.begin() + long(want.n_tokens)));
    EXPECT_EQ(o.text, want.text);
    const bool found = want.n_tokens < g.greedy_tokens.size() || want.text != g.greedy_text;
    EXPECT_EQ(o.reason, found ? FinishReason::Stop : FinishReason::Length);
    for (const auto& s : stops)
      for (const auto& t : o.texts) EXPECT_EQ(t.find(s), std::string::npos) << "streamed part of a stop string";
  }
  test::expect_idle(*engine);
}

TEST(EngineGeneration, StopTokenIds) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto g = test::read_golden()[0];
  auto engine = st.engine(config(32));
  const int32_t stop_tok = g.greedy_tokens[5];
  const size_t at = size_t(std::find(g.greedy_tokens.begin(), g.greedy_tokens.end(), stop_tok) - g.greedy_tokens.begin());
  Request r = greedy(g.prompt_tokens, 64);
  r.stop_token_ids = {stop_tok};
  Output o = test::run_one(*engine, r);
  // The stop token is reported as a token, but its text is not emitted.
  EXPECT_EQ(o.tokens, std::vector<int32_t>(g.greedy_tokens.begin(), g.greedy_tokens.begin() + long(at) + 1));
  EXPECT_EQ(o.text, pieces(st.tok(), g.greedy_tokens, at));
  EXPECT_EQ(o.reason, FinishReason::Stop);
  // Before min_tokens the stop token cannot be drawn.
  r.min_tokens = int32_t(at) + 3;
  o = test::run_one(*engine, r);
  EXPECT_GE(int32_t(o.tokens.size()), r.min_tokens);
  EXPECT_EQ(std::count(o.tokens.begin(), o.tokens.begin() + r.min_tokens, stop_tok), 0);
  EXPECT_EQ(std::vector<int32_t>(o.tokens.begin(), o.tokens.begin() + long(at)),
            std::vector<int32_t>(g.greedy_tokens.begin(), g.greedy_tokens.begin() + long(at)));
  test::expect_idle(*engine);
}

// A tokenizer like the model's whose end-of-generation set also holds `eog`.
std::unique_ptr<Tokenizer> tokenizer_with_eog(const Model& m, int32_t eog) {
  Vocab v = Vocab::from_gguf(m.file());
  v.eog_ids.push_back(eog);
  std::sort(v.eog_ids.begin(), v.eog_ids.end());
  return std::make_unique<Tokenizer>(std::move(v));
}

TEST(EngineGeneration, EndOfGenerationIgnoreEosAndMinTokens) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto g = test::read_golden()[0];
  const int32_t eog = g.greedy_tokens[10];  // "." in the golden text
  const size_t at = size_t(std::find(g.greedy_tokens.begin(), g.greedy_tokens.end(), eog) - g.greedy_tokens.begin());
  ASSERT_GT(at, 1u);
  auto tok = tokenizer_with_eog(st.model(), eog);
  auto engine = st.engine(config(32), tok.get());
  const std::vector<int32_t> before(g.greedy_tokens.begin(), g.greedy_tokens.begin() + long(at));

  // Ends at the EOG token (reported, its text not emitted).
  Output o = test::run_one(*engine, greedy(g.prompt_tokens, 64));
  std::vector<int32_t> want = before;
  want.push_back(eog);
  EXPECT_EQ(o.tokens, want);
  EXPECT_EQ(o.text, pieces(st.tok(), g.greedy_tokens, at));
  EXPECT_EQ(o.reason, FinishReason::Stop);

  // ignore_eos: the golden continuation, EOG tokens and all.
  Request r = greedy(g.prompt_tokens, 64);
  r.ignore_eos = true;
  o = test::run_one(*engine, r);
  EXPECT_EQ(o.tokens, g.greedy_tokens);
  EXPECT_EQ(o.reason, FinishReason::Length);

  // min_tokens: the EOG token cannot be drawn before; at its place comes the
  // best other token (an independent forward pass says which).
  r = greedy(g.prompt_tokens, 64);
  r.min_tokens = int32_t(at) + 4;
  o = test::run_one(*engine, r);
  ASSERT_GE(int32_t(o.tokens.size()), r.min_tokens);
  EXPECT_EQ(std::vector<int32_t>(o.tokens.begin(), o.tokens.begin() + long(at)), before);
  EXPECT_EQ(std::count(o.tokens.begin(), o.tokens.begin() + r.min_tokens, eog), 0);
  test::ModelRunner runner(test::testdata_path("stories260K.gguf"), st.backend());
  test::ModelRunner::Seq s;
  s.tokens = g.prompt_tokens;
  s.tokens.insert(s.tokens.end(), before.begin(), before.end());
  auto logits = runner.step({&s})[0];
  runner.release(s);
  logits[size_t(eog)] = -1e30f;
  logits[2] = -1e30f;  // the model's own EOS
  EXPECT_EQ(o.tokens[at], test::ModelRunner::argmax(logits));
  // After min_tokens, generation ends at the next EOG token.
  if (o.reason == FinishReason::Stop) {
    EXPECT_EQ(o.tokens.back(), eog);
  }
  EXPECT_EQ(std::count(o.tokens.begin(), o.tokens.end() - 1, eog), 0);
  test::expect_idle(*engine);
}

TEST(EngineGeneration, LogitBias) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto g = test::read_golden()[0];
  auto engine = st.engine(config(32));
  // +100 forces a token at every step; its text is the output.
  const int32_t forced = g.greedy_tokens[3];
  Request r = greedy(g.prompt_tokens, 5);
  r.logit_bias = {{forced, 100.0f}};
  Output o = test::run_one(*engine, r);
  EXPECT_EQ(o.tokens, std::vector<int32_t>(5, forced));
  EXPECT_EQ(o.reason, FinishReason::Length);
  // Forcing the end-of-generation token ends at once: one token, no text.
  r.logit_bias = {{st.tok().eos(), 100.0f}};
  o = test::run_one(*engine, r);
  EXPECT_EQ(o.tokens, std::vector<int32_t>{st.tok().eos()});
  EXPECT_EQ(o.text, "");
  EXPECT_EQ(o.reason, FinishReason::Stop);
  // -100 on the first golden token: the output differs from the golden one
  // there and never holds it.
  r = greedy(g.prompt_tokens, 4);
  r.logit_bias = {{g.greedy_tokens[0], -100.0f}};
  o = test::run_one(*engine, r);
  ASSERT_FALSE(o.tokens.empty());
  EXPECT_EQ(std::count(o.tokens.begin(), o.tokens.end(), g.greedy_tokens[0]), 0);
  // Outside the vocabulary: refused at submit.
  r.logit_bias = {{st.tok().n_vocab(), 1.0f}};
  EXPECT_THROW(engine->submit(r), Error);
  test::expect_idle(*engine);
}

TEST(EngineGeneration, MinTokensDefersStopStrings) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  const auto g = test::read_golden()[0];
  auto engine = st.engine(config(32));
  // ", there" completes at the 2nd token. With min_tokens 0 or 1 the first
  // token is generated anyway, so the stop applies; with 3 it is ignored.
  for (int32_t min_tokens : {0, 1, 2}) {
    SCOPED_TRACE(min_tokens);
    Request r = greedy(g.prompt_tokens, 16);
    r.stop = {", there"};
    r.min_tokens = min_tokens;
    const Output o = test::run_one(*engine, r);
    EXPECT_EQ(o.reason, FinishReason::Stop);
    EXPECT_EQ(o.text, "");
    EXPECT_EQ(o.tokens.size(), 2u);
  }
  Request r = greedy(g.prompt_tokens, 16);
  r.stop = {", there"};
  r.min_tokens = 3;
  const Output o = test::run_one(*engine, r);
  EXPECT_EQ(o.reason, FinishReason::Length);
  EXPECT_EQ(o.tokens, std::vector<int32_t>(g.greedy_tokens.begin(), g.greedy_tokens.begin() + 16));
  EXPECT_EQ(o.text, pieces(st.tok(), g.greedy_tokens, 16));
  test::expect_idle(*engine);
}

}  // namespace
}  // namespace rf
