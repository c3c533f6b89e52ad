// Engine test helpers: the real stories260K model on the CPU backend, an
// engine per test with explicit small KV budgets, and clients that read a
// request's stream to the end. Outputs collect every event of a stream so
// tests can check tokens, text and the final accounting together.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/model.h"
#include "testdata.h"
#include "tokenizer/tokenizer.h"

namespace rf {
// Readable finish reasons in assertion messages.
inline void PrintTo(FinishReason r, std::ostream* os) { *os << finish_reason_name(r); }
}  // namespace rf

namespace rf::test {

struct Output {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;  // parallel to tokens when requested
  std::string text;
  std::vector<std::string> texts;  // per event
  FinishReason reason = FinishReason::None;
  std::string error;
  int32_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  bool finished = false;
};

// Reads the events available now; with `wait`, blocks until the finish.
inline void read_events(RequestStream& h, Output& o, bool wait) {
  while (!o.finished) {
    auto ev = wait ? h.next() : h.next(std::chrono::milliseconds(0));
    if (!ev) return;
    o.tokens.insert(o.tokens.end(), ev->tokens.begin(), ev->tokens.end());
    o.logprobs.insert(o.logprobs.end(), ev->logprobs.begin(), ev->logprobs.end());
    o.text += ev->text;
    o.texts.push_back(ev->text);
    if (ev->finished) {
      o.finished = true;
      o.reason = ev->finish_reason;
      o.error = ev->error;
      o.prompt_tokens = ev->prompt_tokens;
      o.completion_tokens = ev->completion_tokens;
      o.cached_tokens = ev->cached_prompt_tokens;
    }
  }
}

inline Output read_all(RequestStream& h) {
  Output o;
  read_events(h, o, true);
  return o;
}

// The model and tokenizer, loaded once per test.
class Stories {
 public:
  Stories() : backend_(1) {
    model_ = Model::load(testdata_path("stories260K.gguf"), backend_, false);
    tok_ = Tokenizer::from_gguf(model_->file());
  }
  // An engine with this tokenizer, or another one (e.g. other EOG tokens).
  std::unique_ptr<Engine> engine(const EngineConfig& cfg, const Tokenizer* tok = nullptr) {
    return std::make_unique<Engine>(*model_, tok ? *tok : *tok_, backend_, cfg);
  }
  const Model& model() const { return *model_; }
  const Tokenizer& tok() const { return *tok_; }
  CpuBackend& backend() { return backend_; }

 private:
  CpuBackend backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
};

inline EngineConfig config(int32_t num_blocks, int32_t block_size = 16, int32_t max_batch_tokens = 256,
                           int32_t max_seqs = 64, bool prefix_caching = true) {
  EngineConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.max_num_batched_tokens = max_batch_tokens;
  c.max_num_seqs = max_seqs;
  c.prefix_caching = prefix_caching;
  c.max_model_len = 512;
  return c;
}

inline Request greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

// Submits every request, steps the engine until idle, reads every stream.
inline std::vector<Output> run_all(Engine& engine, const std::vector<Request>& reqs) {
  std::vector<RequestHandle> hs;
  for (const auto& r : reqs) hs.push_back(engine.submit(r));
  engine.run_until_idle();
  std::vector<Output> out;
  for (auto& h : hs) {
    Output o;
    read_events(*h, o, false);
    EXPECT_TRUE(o.finished) << "request " << h->id() << " did not finish";
    out.push_back(std::move(o));
  }
  return out;
}

inline Output run_one(Engine& engine, const Request& r) { return run_all(engine, {r})[0]; }

// The engine is idle and every KV block is back in the pool (hybrid
// models: every state slot too, no checkpoint row left reserved).
inline void expect_idle(const Engine& e) {
  EXPECT_EQ(e.active_requests(), 0u);
  EXPECT_EQ(e.free_blocks(), e.num_blocks());
  if (const StatePool* sp = e.state_pool()) {
    EXPECT_EQ(sp->num_free_slots(), sp->n_slots()) << "state slots leaked";
    EXPECT_EQ(sp->num_reserved(), 0) << "checkpoint rows left reserved";
  }
}

struct Golden {
  std::string prompt;
  std::vector<int32_t> prompt_tokens, greedy_tokens;
  std::string greedy_text;
};

inline std::vector<Golden> read_golden() {
  std::ifstream in(testdata_path("stories260K.golden.jsonl"));
  std::vector<Golden> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    out.push_back({j["prompt"].get<std::string>(), j["prompt_tokens"].get<std::vector<int32_t>>(),
                   j["greedy_tokens"].get<std::vector<int32_t>>(), j["greedy_text"].get<std::string>()});
  }
  return out;
}

}  // namespace rf::test
