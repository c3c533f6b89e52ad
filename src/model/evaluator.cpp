// Greedy evaluation with first-step logits (see evaluator.h).
#include "model/evaluator.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "kv/block_table.h"

namespace rf {

Evaluator::Evaluator(const Model& model, Backend& backend, const EvalOptions& options)
    : Evaluator(model, std::span<Backend* const>(std::array<Backend*, 1>{&backend}), {}, options) {}

Evaluator::Evaluator(const Model& model, std::span<Backend* const> backends, std::span<Communicator* const> comms,
                     const EvalOptions& options)
    : model_(model), options_(options) {
  const ModelConfig& c = model.config();
  RF_CHECK(options.max_prompt > 0 && options.max_context >= options.max_prompt && options.block_size > 0,
           "eval: bad sizes (prompt ", options.max_prompt, ", context ", options.max_context, ")");
  RF_CHECK(options.max_context <= c.n_ctx_train, "eval: ", options.max_context,
           " tokens do not fit the model's context of ", c.n_ctx_train);
  const int32_t n_blocks = (options.max_context + options.block_size - 1) / options.block_size;
  BackendLimits lim;
  lim.max_tokens = options.prefill_chunk > 0 ? std::min(options.prefill_chunk, options.max_prompt) : options.max_prompt;
  lim.max_seqs = 1;
  RF_CHECK(options.max_logits >= 1, "eval: bad logit rows per step ", options.max_logits);
  lim.max_logits = options.max_logits;
  lim.max_blocks_per_seq = n_blocks;
  const int32_t n_groups = kv_group_layout(c).n_groups();
  KVBudget budget;
  budget.num_blocks = n_blocks * n_groups;
  budget.state_rows = c.has_recurrent() ? 1 : 0;  // the one sequence's recurrent-state row
  runner_ = std::make_unique<StepRunner>(model, backends, comms, lim, budget, options.block_size,
                                         options.kv_cache_dtype);
  blocks_.resize(size_t(n_groups));
  for (int32_t g = 0; g < n_groups; ++g)
    for (int32_t b = 0; b < n_blocks; ++b) blocks_[size_t(g)].push_back(g * n_blocks + b);
  host_logits_.resize(size_t(c.n_vocab));
}

Evaluator::~Evaluator() = default;

void Evaluator::check_tokens(std::span<const int32_t> tokens) const {
  const int32_t vocab = model_.config().n_vocab;
  for (int32_t t : tokens) RF_CHECK(t >= 0 && t < vocab, "eval: token id ", t, " out of range (vocab ", vocab, ")");
}

void Evaluator::add_tokens(Batch& b, std::span<const int32_t> tokens, int32_t done, int32_t end, bool want_logits) {
  const KVGroupLayout& groups = runner_->kv_groups();
  b.reset(options_.block_size, int32_t(blocks_[0].size()), groups.n_groups());
  std::vector<std::span<const int32_t>> spans(blocks_.size());
  tables_.resize(blocks_.size());
  for (size_t g = 0; g < blocks_.size(); ++g) {
    tables_[g] = blocks_[g];
    const int32_t first = first_needed_block(groups.window(int32_t(g)), done, options_.block_size);
    std::fill(tables_[g].begin(), tables_[g].begin() + first, kNullBlock);
    spans[g] = tables_[g];
  }
  b.add_sequence(tokens.subspan(size_t(done), size_t(end - done)), done, spans, want_logits,
                 model_.config().has_recurrent() ? 0 : -1);
}

EvalResult Evaluator::run(std::span<const int32_t> prompt, int32_t n_predict, std::span<const int32_t> eog) {
  const int32_t n_prompt = int32_t(prompt.size());
  RF_CHECK(n_prompt > 0, "eval: empty prompt");
  RF_CHECK(n_prompt <= options_.max_prompt && n_prompt + n_predict <= options_.max_context, "eval: prompt of ",
           n_prompt, " tokens + ", n_predict, " does not fit the evaluator's sizes");
  check_tokens(prompt);
  EvalResult r;
  r.prompt_tokens.assign(prompt.begin(), prompt.end());
  std::vector<int32_t> tokens = r.prompt_tokens;
  Batch b;
  // Feeds tokens[done, end) and returns the argmax of the last one's logits.
  auto step = [&](int32_t done, int32_t end) {
    add_tokens(b, tokens, done, end, true);
    runner_->forward(b);
    runner_->copy_logits(0, host_logits_.data());
    return int32_t(std::max_element(host_logits_.begin(), host_logits_.end()) - host_logits_.begin());
  };
  const int32_t chunk = options_.prefill_chunk > 0 ? options_.prefill_chunk : n_prompt;
  int32_t next = 0;
  for (int32_t done = 0; done < n_prompt; done += chunk) {
    const int32_t end = std::min(n_prompt, done + chunk);
    if (end < n_prompt) {
      // Intermediate chunks: no logits are needed, but forward wants a row.
      step(done, end);
      continue;
    }
    next = step(done, end);
  }
  r.first_step_logits = host_logits_;
  for (int32_t i = 0; i < n_predict; ++i) {
    if (i > 0) {
      const int32_t pos = int32_t(tokens.size()) - 1;
      next = step(pos, pos + 1);
    }
    r.greedy_tokens.push_back(next);
    tokens.push_back(next);
    if (std::find(eog.begin(), eog.end(), next) != eog.end()) break;
  }
  return r;
}

void Evaluator::score(std::span<const int32_t> tokens, int32_t first,
                      const std::function<void(int32_t, std::span<const float>)>& row) {
  const int32_t n = int32_t(tokens.size());
  RF_CHECK(n > 0 && n <= options_.max_prompt && n <= options_.max_context, "score: ", n,
           " tokens do not fit the evaluator's sizes");
  RF_CHECK(first >= 0 && first < n, "score: first scored position ", first, " of ", n);
  check_tokens(tokens);
  const int32_t chunk = std::min(options_.prefill_chunk > 0 ? options_.prefill_chunk : n, options_.max_logits);
  Batch b;
  for (int32_t done = 0; done < n; done += chunk) {
    const int32_t end = std::min(n, done + chunk);
    const int32_t from = std::max(done, first);
    add_tokens(b, tokens, done, end, from >= end);  // forward wants a row even where none is scored
    for (int32_t j = from; j < end; ++j) b.logits_rows.push_back(j - done);
    runner_->forward(b);
    for (int32_t j = from; j < end; ++j) {
      runner_->copy_logits(j - from, host_logits_.data());
      row(j, host_logits_);
    }
  }
}

}  // namespace rf
