// NgramProposer: prompt lookup (n-gram) proposals for speculative decoding
// (engine/speculative.h). The sequence's last n tokens (n from ngram_max
// down to ngram_min) are looked for earlier in its tokens, prompt and
// output alike; at the most recent earlier occurrence of the longest suffix
// that has one, the tokens that followed it are proposed, up to the limit.
// Deterministic: a pure function of the tokens. The search is linear in the
// sequence's length per call (for each n, a backwards scan).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rf {

class NgramProposer {
 public:
  NgramProposer(int32_t ngram_min, int32_t ngram_max);

  // Replaces `out` with up to max_tokens proposed tokens to follow `tokens`
  // (empty: no earlier occurrence of any suffix, or max_tokens <= 0).
  void propose(std::span<const int32_t> tokens, int32_t max_tokens, std::vector<int32_t>& out) const;

 private:
  int32_t min_, max_;
};

}  // namespace rf
