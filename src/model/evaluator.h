// Evaluator: greedy generation from token-id prompts that also keeps the
// first step's full logits — what `rocmforge eval` prints, one JSON line per
// prompt with the fields of llama.cpp's golden files (prompt_tokens,
// greedy_tokens, first_step_logits), so any engine's output can be diffed
// against it — and the logits at every position of a text (score(): what
// `rocmforge perplexity` reads). One sequence at a time over a StepRunner of its own (one backend or
// tensor-parallel ranks) and its paged KV cache; the prompt goes in one batch (or in chunks of
// `prefill_chunk` tokens), then one token per step. Each KV group has its
// own blocks; a sliding-window group's table entries before the window of
// the step's first token are null (kv/block_table.h), as the engine
// leaves them after releasing them, so kernels that read them would fail
// the golden checks. Hybrid models keep the sequence's recurrent state in
// the one state row; each prompt starts from position 0 (the zero state).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "model/step_runner.h"

namespace rf {

struct EvalResult {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> greedy_tokens;      // an end-of-generation token ends them and is included
  std::vector<float> first_step_logits;   // [n_vocab], after the whole prompt
};

struct EvalOptions {
  int32_t max_context = 0;    // longest prompt + n_predict to be run (sizes the KV cache)
  int32_t max_prompt = 0;     // longest prompt (sizes the step's workspace)
  int32_t prefill_chunk = 0;  // tokens per prefill step; 0: the whole prompt at once
  int32_t max_logits = 1;     // logit rows per step that score() may ask for
  int32_t block_size = 16;
  KVCacheDType kv_cache_dtype = KVCacheDType::Auto;
};

class Evaluator {
 public:
  Evaluator(const Model& model, Backend& backend, const EvalOptions& options);
  // Tensor parallel: the model loaded onto `backends`, joined by `comms`.
  Evaluator(const Model& model, std::span<Backend* const> backends, std::span<Communicator* const> comms,
            const EvalOptions& options);
  ~Evaluator();

  // Greedy (argmax, lowest id on ties) continuation of `prompt` by up to
  // n_predict tokens, stopping after a token in `eog` (sorted or not).
  EvalResult run(std::span<const int32_t> prompt, int32_t n_predict, std::span<const int32_t> eog);
  // Feeds `tokens` (at most max_prompt) as a new sequence, prefill_chunk
  // tokens per step, and calls row(j, logits) for every position j in
  // [first, tokens.size()): the n_vocab logits after tokens[0..j], in order.
  void score(std::span<const int32_t> tokens, int32_t first,
             const std::function<void(int32_t, std::span<const float>)>& row);

 private:
  // Appends tokens[done, end) of the one sequence to b (its block tables,
  // with sliding-window groups' entries before the window released).
  void add_tokens(Batch& b, std::span<const int32_t> tokens, int32_t done, int32_t end, bool want_logits);
  void check_tokens(std::span<const int32_t> tokens) const;

  const Model& model_;
  EvalOptions options_;
  std::unique_ptr<StepRunner> runner_;
  std::vector<std::vector<int32_t>> blocks_;  // [n_groups][blocks per sequence]
  std::vector<float> host_logits_;
  std::vector<std::vector<int32_t>> tables_;  // the step's block tables, per group
};

}  // namespace rf
