// Vocabulary-parallel sampling: sample()'s rules (backend/cpu/cpu_sample.cpp
// is the reference) when each tensor-parallel rank holds the logits of a
// range of token ids, with only per-row summaries crossing between ranks —
// never the logits. The protocol lives here, once; each backend supplies
// the per-rank primitives (VocabShardOps) over its own logits. Per step,
// for all rows at once:
//   1. each rank adjusts its logits (biases, penalties, bans, mask — global
//      ids translated to its range — and the temperature) and shares one
//      summary per row: maxima, sum of exp(raw - max) (the raw
//      log-normalizer), its best token with its raw logit, its top raw
//      logits. Greedy rows are done here: one exchange per step;
//   2. top-k and top-p thresholds by radix selection over the float bits:
//      four rounds of 256-bin histograms (counts, or masses exp(x - top))
//      summed over ranks, each round fixing one byte of the threshold key;
//      min-p from the global largest value;
//   3. each rank's kept mass; ranks hold consecutive ids, so id order is
//      rank order and the draw u falls in one rank's share, which picks
//      (and reports the token's raw logit).
// Every rank computes the same results (sums over ranks in rank order).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/collective.h"
#include "core/sampling.h"

namespace rf {

struct ShardCandidate {
  float value = -INFINITY;
  int32_t id = -1;  // -1: none
};

// One rank's summary of one row: all a greedy row needs, and the start of
// a sampled one.
struct ShardSummary {
  float raw_max = -INFINITY;  // of the raw logits
  float top = -INFINITY;      // the largest adjusted (and temperature-scaled) logit
  double raw_sum = 0;         // sum of exp(raw - raw_max)
  ShardCandidate best;        // the best adjusted logit, lowest id on ties
  float best_raw = -INFINITY; // the raw logit of best.id
  ShardCandidate tops[kMaxTopLogprobs];  // the top raw logits (rows asking for top logprobs; else id -1)
};

// Order-preserving map of floats to unsigned keys (larger float, larger key).
inline uint32_t order_key(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// A rank's primitives over its logits of the step ([rows, its range]).
// `want` selects the rows an op computes (others are left as they are).
class VocabShardOps {
 public:
  virtual ~VocabShardOps() = default;
  // Adjusts each row into the rank's work copy and summarizes it.
  virtual void prepare(std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
                       std::vector<ShardSummary>& sums) = 0;
  // 256 bins per row: the weight of the adjusted values whose key k has
  // k >= floor[r] and (k & mask) == prefix[r], by (k >> shift) & 255;
  // weight 1, or by_mass exp(x - top[r]).
  virtual void histogram(std::span<const uint8_t> want, std::span<const uint32_t> floor,
                         std::span<const uint32_t> prefix, uint32_t mask, int shift, bool by_mass,
                         std::span<const float> top, std::vector<double>& hist) = 0;
  // Per row: the mass exp(x - top[r]) of the kept values (key >= floor[r]).
  virtual void kept_mass(std::span<const uint8_t> want, std::span<const uint32_t> floor, std::span<const float> top,
                         std::vector<double>& out) = 0;
  // Per row, two candidates with their raw logits: [0] where owner[r], the
  // first kept id (in id order) at which before[r] plus the kept mass up to
  // and including it exceeds u[r] (its last kept id if none does); [1] the
  // last kept id.
  virtual void pick(std::span<const uint8_t> want, std::span<const uint32_t> floor, std::span<const float> top,
                    std::span<const double> before, std::span<const double> u, std::span<const uint8_t> owner,
                    std::vector<ShardCandidate>& picks) = 0;
};

// Samples every row; the same results on every rank.
void sample_vocab_parallel(VocabShardOps& ops, int64_t vocab_total, std::span<const SampleRow> rows,
                           std::span<const PenaltyToken> penalties, Communicator& comm,
                           std::vector<SampleResult>& out);

}  // namespace rf
