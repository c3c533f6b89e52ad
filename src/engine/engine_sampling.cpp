// Engine: the step's sample rows and what comes of them — speculative
// proposals before the step (engine/speculative.h has the design), each
// scheduled sequence's rows with their penalties and RNG counters, the
// token masks, and after sampling the verification, rollback, completion
// and the tokens handed out.
#include <algorithm>
#include <chrono>

#include "engine/engine.h"
#include "engine/engine_active.h"

namespace rf {

using Clock = std::chrono::steady_clock;

void Engine::settle_drafts() {
  for (uint64_t id : draft_unsettled_)
    if (const auto it = active_.find(id); it != active_.end()) draft_model_->verified(id, it->second->seq.n_computed);
  draft_unsettled_.clear();
}

void Engine::propose_drafts() {
  if (!proposer_ && !draft_model_) return;
  if (draft_model_) settle_drafts();
  const SpeculativeConfig& spec = config_.speculative;
  draft_jobs_.clear();
  for (auto& [id, p] : active_) {
    Active& a = *p;
    Sequence& s = a.seq;
    if (!a.speculates || s.status != SeqStatus::Running || s.n_pending() != 1 || s.n_draft != 0) continue;
    // No round may emit a token past max_tokens or the context.
    const int32_t k = std::min({spec.draft_max, a.req.max_tokens - s.n_generated() - 1,
                                config_.max_model_len - s.n_tokens() - 1});
    if (k < spec.draft_min) continue;
    if (draft_model_) {  // batched below
      draft_jobs_.push_back({id, s.tokens, k, nullptr});
      continue;
    }
    proposer_->propose(s.tokens, k, draft_);
    if (int32_t(draft_.size()) < spec.draft_min) continue;
    s.tokens.insert(s.tokens.end(), draft_.begin(), draft_.end());
    s.n_draft = int32_t(draft_.size());
  }
  if (draft_jobs_.empty()) return;
  if (draft_outs_.size() < draft_jobs_.size()) draft_outs_.resize(draft_jobs_.size());
  for (size_t i = 0; i < draft_jobs_.size(); ++i) draft_jobs_[i].out = &draft_outs_[i];
  draft_model_->propose(draft_jobs_);
  for (const DraftProposer::Job& j : draft_jobs_) {
    draft_unsettled_.push_back(j.id);  // its draft KV may now hold proposals
    if (int32_t(j.out->size()) < spec.draft_min) continue;
    Sequence& s = active_.at(j.id)->seq;
    s.tokens.insert(s.tokens.end(), j.out->begin(), j.out->end());
    s.n_draft = int32_t(j.out->size());
  }
}

void Engine::add_sample_rows(Active& a, const ScheduledSeq& e, size_t entry, int32_t si) {
  const Sequence& s = *e.seq;
  const int32_t k = e.n_draft;
  const int32_t* draft = s.tokens.data() + (s.n_tokens() - k);
  const int32_t generated = s.n_generated() - k;  // before this round
  const bool penalized = a.req.sampling.has_penalties();
  if (k > 0 && penalized) draft_penalties_ = a.penalties;
  sampled_seqs_.push_back({&a, entry, int32_t(rows_.size()), 0});
  const int32_t first_token = batch_.seq_starts[size_t(si) + 1] - (k + 1);
  for (int32_t i = 0; i <= k; ++i) {
    // Row i: the token after the first i proposals, as plain decoding would draw it.
    if (k > 0) batch_.logits_rows.push_back(first_token + i);
    SampleRow row;
    row.params = a.req.sampling;
    row.rng_counter = uint64_t(generated + i);
    row.penalty_offset = int32_t(penalties_.size());
    for (const auto& [t, bias] : a.req.logit_bias) penalties_.push_back(PenaltyToken{t, 0, 0, 0, bias});
    if (penalized)
      for (const auto& [tok, p] : k > 0 ? draft_penalties_ : a.penalties) penalties_.push_back(p);
    // Before min_tokens, end-of-generation tokens cannot be drawn.
    if (generated + i < a.req.min_tokens && !a.req.ignore_eos) {
      for (int32_t t : eog_tokens_) penalties_.push_back(PenaltyToken{t, 0, 0, 1});
      for (int32_t t : a.req.stop_token_ids) penalties_.push_back(PenaltyToken{t, 0, 0, 1});
    }
    row.penalty_count = int32_t(penalties_.size()) - row.penalty_offset;
    rows_.push_back(row);
    sampled_.push_back(&a);
    if (i < k && penalized) {  // the next row counts proposal i as output
      auto [it, fresh] = draft_penalties_.try_emplace(draft[i], PenaltyToken{draft[i], 0, 1});
      it->second.output_count++;
    }
  }
}

void Engine::take_tokens(std::vector<ScheduledSeq>& sched) {
  // Verification and rollback first: complete() must hash no block that
  // holds a rejected token.
  for (SampledSeq& q : sampled_seqs_) {
    ScheduledSeq& e = sched[q.entry];
    if (e.n_draft == 0) continue;
    const std::span<const int32_t> draft(e.seq->tokens.data() + (e.seq->n_tokens() - e.n_draft), size_t(e.n_draft));
    const int32_t n = accepted_prefix(
        draft, std::span<const SampleResult>(results_.data() + q.first_row, size_t(e.n_draft) + 1));
    scheduler_->accept(e, n);
    q.accepted = n;
    metrics_.spec_drafts++;
    metrics_.spec_draft_tokens += uint64_t(e.n_draft);
    metrics_.spec_accepted_tokens += uint64_t(n);
  }
  scheduler_->complete(sched);
  if (draft_model_) settle_drafts();  // the draft's KV holds no more than the target's verified tokens
  for (const SampledSeq& q : sampled_seqs_) {
    const ScheduledSeq& e = sched[q.entry];
    // The accepted proposals are handed out again, one by one, like decoded
    // tokens (their KV stays: n_computed already counts them).
    if (e.n_draft > 0) e.seq->tokens.resize(size_t(e.start) + 1);
    for (int32_t j = 0; j <= q.accepted; ++j)
      if (!process_token(*q.a, results_[size_t(q.first_row + j)])) break;
  }
}

void Engine::token_masks() {
  const auto t0 = Clock::now();
  const size_t words = (size_t(model_.config().n_vocab) + 31) / 32;
  if (masks_.size() < rows_.size()) masks_.resize(rows_.size());
  if (grammars_) grammars_->trim(kGrammarMemoryBytes);
  bool any = false;
  for (size_t i = 0; i < rows_.size(); ++i) {
    Active& a = *sampled_[i];
    if (const int32_t forced = a.thinking.forced_next(); forced >= 0) {  // a thinking budget is spent
      std::vector<uint32_t>& buf = masks_[i];
      buf.assign(words, 0u);
      buf[size_t(forced) / 32] |= 1u << (forced % 32);
      rows_[i].allowed = buf.data();
      continue;
    }
    if (!a.grammar) continue;
    any = true;
    grammar::TokenMasker& masker = a.grammar->masker();
    const grammar::MaskStats before = masker.stats();
    const std::vector<uint32_t>& m = masker.mask(a.gcursor.current(a.grammar->automaton()));
    metrics_.grammar_masks_computed += masker.stats().computed - before.computed;
    metrics_.grammar_mask_cache_hits += masker.stats().cache_hits - before.cache_hits;
    std::vector<uint32_t>& buf = masks_[i];
    buf.assign(words, 0u);  // ids past the tokenizer's vocabulary: never
    std::copy(m.begin(), m.begin() + std::min(m.size(), words), buf.begin());
    rows_[i].allowed = buf.data();
  }
  if (any) metrics_.observe_grammar_step(std::chrono::duration<double>(Clock::now() - t0).count());
}

}  // namespace rf
