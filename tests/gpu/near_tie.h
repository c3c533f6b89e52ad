// Comparing greedy outputs of GPU runs whose batch shapes differ: kernels
// may reduce in another order for another shape, so two runs may part where
// the reference run's two best tokens were nearly tied.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>

#include "unit/engine_test_util.h"

namespace rf::test {

// Same tokens, or they first differ where the batched run took a token of
// the alone run's top logprobs within `tie` nats of its best.
inline ::testing::AssertionResult same_up_to_near_tie(const Output& alone, const Output& batched, double tie,
                                                     int* near_ties) {
  if (alone.tokens == batched.tokens) return ::testing::AssertionSuccess();
  size_t k = 0;
  while (k < alone.tokens.size() && k < batched.tokens.size() && alone.tokens[k] == batched.tokens[k]) ++k;
  if (k >= alone.tokens.size() || k >= batched.tokens.size() || k >= alone.logprobs.size())
    return ::testing::AssertionFailure() << "lengths differ: " << alone.tokens.size() << " alone, "
                                         << batched.tokens.size() << " batched";
  const auto& top = alone.logprobs[k].top;
  if (top.size() < 2) return ::testing::AssertionFailure() << "no top logprobs at token " << k;
  for (const auto& [token, logprob] : top) {
    const double behind = double(top[0].second) - double(logprob);
    if (token != batched.tokens[k] || behind > tie) continue;
    ++*near_ties;
    std::printf("  parted at token %zu of %zu: best %d, taken %d, %.2e nats behind\n", k, alone.tokens.size(),
                top[0].first, token, behind);
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "token " << k << ": alone " << alone.tokens[k] << ", batched "
                                       << batched.tokens[k] << "; alone's best two " << top[0].first << " ("
                                       << top[0].second << "), " << top[1].first << " (" << top[1].second
                                       << "): gap " << double(top[0].second) - double(top[1].second);
}

}  // namespace rf::test
