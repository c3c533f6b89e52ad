// CPU sampling of one row — the reference the GPU sampler follows. After
// penalties: temperature 0 is the argmax (lowest id on ties). Otherwise the
// logits are divided by the temperature and the kept set is every token
// whose scaled logit is at least each threshold in turn:
//   top-k:  the k-th largest scaled logit (ties kept),
//   top-p:  the smallest probability p* such that tokens with p >= p* hold
//           at least top_p of the (top-k) mass,
//   min-p:  min_p times the largest probability.
// The draw is the inverse CDF of the kept probabilities in token-id order,
// at u = uniform01(seed, counter) — a pure function of its inputs.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace rf::cpu {

void sample_row(const float* logits, int32_t vocab, const SampleRow& row, const PenaltyToken* pen, SampleResult& out) {
  const SamplingParams& p = row.params;
  thread_local std::vector<float> work;
  thread_local std::vector<float> sorted;
  work.assign(logits, logits + vocab);
  apply_penalties(work.data(), p, pen, row.penalty_count);
  if (row.allowed)
    for (int32_t i = 0; i < vocab; ++i)
      if (!((row.allowed[i >> 5] >> (i & 31)) & 1u)) work[size_t(i)] = -INFINITY;

  // Raw model log-probabilities (before penalties and temperature).
  double mx = -INFINITY;
  for (int32_t i = 0; i < vocab; ++i) mx = std::max(mx, double(logits[i]));
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  const double log_z = mx + std::log(sum);
  auto raw_logprob = [&](int32_t id) { return float(double(logits[id]) - log_z); };

  int32_t chosen = 0;
  if (p.greedy()) {
    for (int32_t i = 1; i < vocab; ++i)
      if (work[i] > work[chosen]) chosen = i;
  } else {
    const float inv_t = 1.0f / p.temperature;
    for (float& x : work) x *= inv_t;
    const float top = *std::max_element(work.begin(), work.end());
    float threshold = -INFINITY;
    if (p.top_k > 0 && p.top_k < vocab) {
      sorted.assign(work.begin(), work.end());
      std::nth_element(sorted.begin(), sorted.begin() + (p.top_k - 1), sorted.end(), std::greater<float>());
      threshold = sorted[size_t(p.top_k - 1)];
    }
    if (p.top_p < 1.0f) {
      sorted.clear();
      for (float x : work)
        if (x >= threshold) sorted.push_back(x);
      std::sort(sorted.begin(), sorted.end(), std::greater<float>());
      double z = 0;
      for (float x : sorted) z += std::exp(double(x) - top);
      double cum = 0;
      for (size_t i = 0; i < sorted.size(); ++i) {
        cum += std::exp(double(sorted[i]) - top);
        if (cum >= double(p.top_p) * z) {
          threshold = std::max(threshold, sorted[i]);
          break;
        }
      }
    }
    if (p.min_p > 0.0f) threshold = std::max(threshold, float(double(top) + std::log(double(p.min_p))));
    double mass = 0;
    for (int32_t i = 0; i < vocab; ++i)
      if (work[i] >= threshold) mass += std::exp(double(work[i]) - top);
    const double u = double(uniform01(p.seed, row.rng_counter)) * mass;
    double cum = 0;
    chosen = -1;
    for (int32_t i = 0; i < vocab; ++i) {
      if (work[i] < threshold) continue;
      cum += std::exp(double(work[i]) - top);
      chosen = i;
      if (u < cum) break;
    }
    RF_CHECK(chosen >= 0, "sampling: no token left to draw (all logits were -inf?)");
  }
  out.token = chosen;
  out.logprob = raw_logprob(chosen);
  out.top.clear();
  if (p.top_logprobs > 0) {
    const int32_t k = std::min<int32_t>(std::min(p.top_logprobs, kMaxTopLogprobs), vocab);
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    for (int32_t i = 0; i < vocab; ++i) ids[size_t(i)] = i;
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (int32_t i = 0; i < k; ++i) out.top.emplace_back(ids[size_t(i)], raw_logprob(ids[size_t(i)]));
  }
}

}  // namespace rf::cpu
