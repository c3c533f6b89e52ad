// Prompt-lookup proposals (see proposer_ngram.h).
#include "engine/proposer_ngram.h"

#include <algorithm>

#include "core/error.h"

namespace rf {

NgramProposer::NgramProposer(int32_t ngram_min, int32_t ngram_max) : min_(ngram_min), max_(ngram_max) {
  RF_CHECK(min_ >= 1 && min_ <= max_, "n-gram proposer: suffix lengths ", min_, "..", max_);
}

void NgramProposer::propose(std::span<const int32_t> tokens, int32_t max_tokens, std::vector<int32_t>& out) const {
  out.clear();
  const int64_t size = int64_t(tokens.size());
  if (max_tokens <= 0) return;
  // A suffix of n tokens needs an earlier occurrence ending before the last token.
  for (int64_t n = std::min<int64_t>(max_, size - 1); n >= min_; --n) {
    const int32_t* suffix = tokens.data() + (size - n);
    for (int64_t i = size - n - 1; i >= 0; --i) {
      if (!std::equal(suffix, suffix + n, tokens.data() + i)) continue;
      const int64_t from = i + n, to = std::min(size, from + max_tokens);
      out.assign(tokens.begin() + from, tokens.begin() + to);
      return;
    }
  }
}

}  // namespace rf
