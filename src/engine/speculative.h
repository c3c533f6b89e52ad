// Speculative decoding: the engine's configuration of it and the rule that
// verifies a proposal.
//
// How a round works (engine_sampling.cpp drives it; the scheduler, kv and
// backends see nothing new but more tokens and logit rows):
// 1. Before the step is scheduled, each running sequence that decodes (one
//    pending token) and may speculate gets up to k proposed tokens from the
//    proposer (proposer_ngram.h), appended to its tokens as Sequence::
//    n_draft. k is at most draft_max, and small enough that the round can
//    emit no token past max_tokens or the context (k <= max_tokens -
//    generated - 1); a proposal shorter than draft_min is not used.
// 2. The scheduler schedules the pending token with its proposals like a
//    prompt chunk (scheduler.h says how they are cut or dropped first when
//    budget or blocks are short). The forward pass is the ordinary one — a
//    chunk of k + 1 tokens of one sequence, with a logit row for each of
//    them — so it runs on every backend through the same kernels as a
//    prefill chunk (never the decode graphs, which take one token a
//    sequence).
// 3. Each of the k + 1 rows is sampled by the backend's own sampler, row i
//    exactly as plain decoding would sample the token after the sequence
//    with the first i proposals appended: the same parameters, penalties
//    counting those i proposals as output, min_tokens bans, and the RNG
//    counter of that token (generated count + i).
// 4. Verification (accepted_prefix): proposal i is accepted while row i drew
//    exactly it; the first row that drew something else gives the round's
//    last token (the target's own), and if all k were accepted row k gives a
//    bonus token. The rejected proposals leave the sequence, the blocks only
//    they reached go back to the pool (Scheduler::accept), and only then are
//    full blocks hashed for the prefix cache. The tokens are then handed out
//    one by one like decoded ones, so stop strings, EOS, max_tokens and
//    cancellation cut a round exactly where plain decoding would stop.
//
// Why the output distribution is the target's: a deterministic proposer's
// proposal distribution is a point mass at x, for which the standard rule —
// accept x with probability p(x), on rejection draw from p with x removed
// and renormalised — is the same as drawing y ~ p and accepting when y == x
// (P(y = x) = p(x); given y != x, y is distributed as p restricted to the
// other tokens, renormalised). Drawing y with the plain sampler at the
// token's own RNG counter makes it more than equal in distribution: with the
// same logits, the tokens emitted are exactly those plain decoding with the
// same seed emits, greedy or sampled (rows' logits of a chunk equal a decode
// step's up to the backend's rounding).
//
// Proposers: prompt lookup (proposer_ngram.h), or a small draft model with
// the same vocabulary run greedily for k steps (proposer_draft.h), its own
// KV cache rolled back like the target's after each verification.
//
// What does not speculate (these sequences decode one token a step inside
// the same batches): requests with a grammar (the mask of each position
// would need the grammar advanced through the proposals), with a thinking
// budget (a forced close may land inside a round), embeddings, and requests
// that opt out (Request::speculative, the API's "speculative": false).
// Hybrid models (recurrent layers) refuse speculation at start-up: their
// state after the accepted tokens cannot be recovered once the rejected
// ones ran through it, and there are no per-position state checkpoints.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/sampling.h"

namespace rf {

class Backend;
class Model;

enum class SpecType { None, Ngram, Draft };
const char* spec_type_name(SpecType t);                       // "none", "ngram", "draft"
std::optional<SpecType> spec_type_from_name(const std::string& name);

struct SpeculativeConfig {
  SpecType type = SpecType::None;
  int32_t draft_max = 4;   // proposed tokens per round at most (--draft-max)
  int32_t draft_min = 1;   // a shorter proposal is not verified (--draft-min)
  // N-gram lookup: the suffix lengths matched, longest first
  // (--spec-ngram-min / --spec-ngram-max, vLLM's prompt_lookup_min / max).
  int32_t ngram_min = 2;
  int32_t ngram_max = 3;
  // SpecType::Draft: the draft model (engine/proposer_draft.h), loaded by the
  // caller on a backend of its own (a backend holds one engine's step
  // buffers and graphs) on the target's device; both outlive the engine.
  const Model* draft = nullptr;
  Backend* draft_backend = nullptr;

  bool enabled() const { return type != SpecType::None && draft_max > 0; }
  // Throws rf::Error naming the bad value.
  void validate() const;
};

// The proposals accepted: the leading run of `draft` that the rows drew
// (drawn[i]: the token sampled at row i; drawn has draft.size() + 1 entries).
int32_t accepted_prefix(std::span<const int32_t> draft, std::span<const SampleResult> drawn);

}  // namespace rf
