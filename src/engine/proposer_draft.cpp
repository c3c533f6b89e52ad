// Draft-model proposals (see proposer_draft.h).
#include "engine/proposer_draft.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace rf {

DraftProposer::DraftProposer(const Model& draft, const Tokenizer& target_tok, int32_t target_vocab,
                             Backend& backend, int32_t max_seqs, int32_t max_tokens, int32_t max_model_len,
                             int32_t block_size)
    : block_size_(block_size), max_tokens_(max_tokens) {
  const ModelConfig& dc = draft.config();
  RF_CHECK(draft.n_ranks() == 1, "the draft model (--model-draft) runs on one backend: tensor parallelism is not "
                                 "supported with it");
  RF_CHECK(!dc.has_recurrent(), "the draft model (", dc.arch, ") has recurrent layers: not supported as a draft");
  RF_CHECK(dc.n_vocab == target_vocab, "the draft model's vocabulary has ", dc.n_vocab, " tokens, the model's ",
           target_vocab, ": a draft model must share the vocabulary");
  const auto draft_tok = Tokenizer::from_gguf(draft.file());
  RF_CHECK(draft_tok->n_vocab() == target_tok.n_vocab(), "the draft model's tokenizer has ", draft_tok->n_vocab(),
           " tokens, the model's ", target_tok.n_vocab());
  for (int32_t t = 0; t < target_tok.n_vocab(); ++t)
    RF_CHECK(draft_tok->token_text(t) == target_tok.token_text(t), "the draft model's token ", t, " is '",
             draft_tok->token_text(t), "', the model's '", target_tok.token_text(t),
             "': a draft model must share the vocabulary");
  BackendLimits limits;
  limits.max_tokens = max_tokens;
  limits.max_seqs = max_seqs;
  limits.max_logits = max_seqs;
  limits.max_blocks_per_seq = (max_model_len + block_size - 1) / block_size;
  KVBudget budget;  // the host default: max_seqs full contexts, at most 4 GiB
  budget.max_seqs = max_seqs;
  budget.max_model_len = max_model_len;
  budget.max_chunk = max_tokens;
  Backend* const one[1] = {&backend};
  runner_ = std::make_unique<StepRunner>(draft, std::span<Backend* const>(one), std::span<Communicator* const>(),
                                         limits, budget, block_size);
  pool_ = std::make_unique<BlockPool>(runner_->num_blocks(), block_size);
  group_blocks_.resize(size_t(runner_->kv_groups().n_groups()));
}

DraftProposer::~DraftProposer() {
  for (auto& [id, s] : seqs_)
    for (BlockTable& t : s.tables) t.release_all(*pool_);
}

void DraftProposer::run(std::vector<int32_t>& drawn) {
  drawn.clear();
  runner_->forward(batch_);
  if (batch_.n_logits() == 0) return;
  rows_.assign(size_t(batch_.n_logits()), SampleRow{});
  for (SampleRow& r : rows_) r.params.temperature = 0.0f;  // greedy
  runner_->sample(rows_, {}, results_);
  for (const SampleResult& r : results_) drawn.push_back(r.token);
}

void DraftProposer::propose(std::span<Job> jobs) {
  const int32_t bs = block_size_, n_groups = runner_->kv_groups().n_groups();
  const int32_t max_blocks = runner_->limits().max_blocks_per_seq;
  std::vector<Job*> live;
  for (Job& j : jobs) {
    j.out->clear();
    Seq& s = seqs_[j.id];
    if (s.tables.empty()) s.tables.assign(size_t(n_groups), BlockTable{});
    const int32_t n = int32_t(j.tokens.size());
    s.n_computed = std::min(s.n_computed, n - 1);
    // Positions [0, n + k - 1): the tokens and all proposals but the last.
    const int32_t end = n + j.k - 1;
    int32_t need = 0;
    for (const BlockTable& t : s.tables) need += t.blocks_needed(0, end, bs);
    if (j.k < 1 || (end + bs - 1) / bs > max_blocks || !pool_->can_allocate(need)) continue;
    for (BlockTable& t : s.tables) t.grow(0, end, bs, *pool_);
    live.push_back(&j);
  }
  std::vector<int32_t> drawn;
  // The tokens the draft has not seen, in chunks within the token budget;
  // a sequence's last chunk draws its first proposal.
  for (bool more = true; more;) {
    more = false;
    batch_.reset(bs, max_blocks, n_groups);
    std::vector<Job*> drawing;
    int32_t budget = max_tokens_;
    for (Job* j : live) {
      Seq& s = seqs_[j->id];
      const int32_t n = int32_t(j->tokens.size());
      if (s.n_computed >= n) continue;
      if (budget <= 0 || int32_t(batch_.n_seqs()) >= runner_->limits().max_seqs) {
        more = true;
        continue;
      }
      const int32_t take = std::min(n - s.n_computed, budget);
      for (int32_t g = 0; g < n_groups; ++g) group_blocks_[size_t(g)] = s.tables[size_t(g)].blocks;
      const bool last = s.n_computed + take == n;
      batch_.add_sequence(j->tokens.subspan(size_t(s.n_computed), size_t(take)), s.n_computed, group_blocks_, last);
      if (last) drawing.push_back(j);
      else more = true;
      s.n_computed += take;
      budget -= take;
    }
    if (batch_.n_seqs() == 0) break;
    run(drawn);
    for (size_t i = 0; i < drawing.size(); ++i) drawing[i]->out->push_back(drawn[i]);
  }
  // Then one token a step: each proposal drawn from the one before it.
  for (int32_t step = 1;; ++step) {
    batch_.reset(bs, max_blocks, n_groups);
    std::vector<Job*> drawing;
    for (Job* j : live) {
      if (j->k <= step || int32_t(j->out->size()) != step) continue;
      Seq& s = seqs_[j->id];
      const int32_t pos = int32_t(j->tokens.size()) + step - 1;
      for (int32_t g = 0; g < n_groups; ++g) group_blocks_[size_t(g)] = s.tables[size_t(g)].blocks;
      const std::array<int32_t, 1> tok = {j->out->back()};
      batch_.add_sequence(tok, pos, group_blocks_, true);
      s.n_computed = pos + 1;
      drawing.push_back(j);
    }
    if (drawing.empty()) break;
    run(drawn);
    for (size_t i = 0; i < drawing.size(); ++i) drawing[i]->out->push_back(drawn[i]);
  }
}

void DraftProposer::verified(uint64_t id, int32_t n_valid) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Seq& s = it->second;
  s.n_computed = std::min(s.n_computed, n_valid);
  // Blocks past the standing tokens' KV held only rejected proposals.
  for (BlockTable& t : s.tables) t.release_from((n_valid + block_size_ - 1) / block_size_, *pool_);
}

void DraftProposer::release(uint64_t id) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  for (BlockTable& t : it->second.tables) t.release_all(*pool_);
  seqs_.erase(it);
}

}  // namespace rf
