// DraftProposer: proposals for speculative decoding (engine/speculative.h)
// from a small draft model with the target's vocabulary, run greedily: for
// each sequence given a proposal budget k, the draft model first computes
// the sequence's tokens it has not seen (the prompt at first, then the last
// round's accepted tokens and the target's own), drawing its first
// proposal from the last one's logits, then k - 1 single-token steps, one
// proposal each — every sequence of the round in the same batches.
//
// The draft model has its own backend (on the target's device; loaded there
// by the caller), StepRunner and KV cache (planned like the host default:
// max_seqs full contexts, at most 4 GiB; on a GPU the target's share of
// device memory is reduced by what the draft took) and BlockPool; each
// sequence holds a block table per draft KV group (every block of its
// context, sliding windows included) and how many of its tokens have draft
// KV. After verification the engine tells it how many tokens stand
// (verified): KV past them is forgotten and the blocks past them are
// returned. A sequence whose blocks the draft pool cannot hold gets no
// proposal that round (it decodes one token a step); finished sequences'
// blocks go back (release). No prefix caching in the draft cache.
//
// Refused: draft models with recurrent layers, tensor parallelism (the
// draft runs on one backend), and a vocabulary that differs from the
// target's in size or in any token's text.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/batch.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "model/model.h"
#include "model/step_runner.h"
#include "tokenizer/tokenizer.h"

namespace rf {

class DraftProposer {
 public:
  // `target_tok`: the target's tokenizer, whose vocabulary the draft must
  // share; `backend`: the draft model's own.
  DraftProposer(const Model& draft, const Tokenizer& target_tok, int32_t target_vocab, Backend& backend,
                int32_t max_seqs, int32_t max_tokens, int32_t max_model_len, int32_t block_size);
  ~DraftProposer();

  struct Job {
    uint64_t id;                       // the sequence
    std::span<const int32_t> tokens;   // its tokens (the last one pending in the target)
    int32_t k;                         // proposals wanted, >= 1
    std::vector<int32_t>* out;         // replaced with up to k proposals (empty: none this round)
  };
  // One round for every job, batched.
  void propose(std::span<Job> jobs);
  // After verification: only the first `n_valid` tokens of sequence `id` stand.
  void verified(uint64_t id, int32_t n_valid);
  // The sequence ended: its draft blocks go back.
  void release(uint64_t id);

  int32_t num_blocks() const { return pool_->num_blocks(); }
  int32_t free_blocks() const { return pool_->num_free(); }

 private:
  struct Seq {
    std::vector<BlockTable> tables;  // per draft KV group
    int32_t n_computed = 0;          // leading tokens with draft KV
  };
  // Runs the batch and draws each logit row greedily into `drawn`.
  void run(std::vector<int32_t>& drawn);

  std::unique_ptr<StepRunner> runner_;
  std::unique_ptr<BlockPool> pool_;
  int32_t block_size_, max_tokens_;
  std::unordered_map<uint64_t, Seq> seqs_;
  Batch batch_;
  std::vector<std::span<const int32_t>> group_blocks_;
  std::vector<SampleRow> rows_;
  std::vector<SampleResult> results_;
};

}  // namespace rf
