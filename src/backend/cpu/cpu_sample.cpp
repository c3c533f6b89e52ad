// CPU sampling of one row (the reference for GPU sampling): penalties,
// greedy or temperature -> top-k -> softmax -> top-p -> min-p -> draw.
// Candidates are ordered by (logit desc, token id asc) so the draw is
// reproducible anywhere.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace rf::cpu {

void sample_row(const float* logits, int32_t vocab, const SampleRow& row, const PenaltyToken* pen, SampleResult& out) {
  const SamplingParams& p = row.params;
  thread_local std::vector<float> work;
  thread_local std::vector<int32_t> ids;
  thread_local std::vector<double> probs;
  work.assign(logits, logits + vocab);
  apply_penalties(work.data(), p, pen, row.penalty_count);

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
    ids.resize(size_t(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    auto better = [&](int32_t a, int32_t b) { return work[a] > work[b] || (work[a] == work[b] && a < b); };
    size_t n = size_t(vocab);
    if (p.top_k > 0 && size_t(p.top_k) < n) {
      std::partial_sort(ids.begin(), ids.begin() + p.top_k, ids.end(), better);
      n = size_t(p.top_k);
    } else {
      std::sort(ids.begin(), ids.end(), better);
    }
    // Softmax at temperature over the candidates, best first.
    const double inv_t = 1.0 / double(p.temperature);
    const double top = double(work[ids[0]]) * inv_t;
    probs.resize(n);
    double z = 0;
    for (size_t i = 0; i < n; ++i) z += (probs[i] = std::exp(double(work[ids[i]]) * inv_t - top));
    for (size_t i = 0; i < n; ++i) probs[i] /= z;
    // Top-p: the shortest prefix whose mass reaches top_p.
    if (p.top_p < 1.0f) {
      double cum = 0;
      size_t keep = n;
      for (size_t i = 0; i < n; ++i) {
        cum += probs[i];
        if (cum >= double(p.top_p)) { keep = i + 1; break; }
      }
      n = keep;
    }
    // Min-p: drop candidates below min_p times the best probability.
    if (p.min_p > 0.0f) {
      const double floor_p = double(p.min_p) * probs[0];
      size_t keep = 1;
      while (keep < n && probs[keep] >= floor_p) ++keep;
      n = keep;
    }
    double mass = 0;
    for (size_t i = 0; i < n; ++i) mass += probs[i];
    const double u = double(uniform01(p.seed, row.rng_counter)) * mass;
    double cum = 0;
    chosen = ids[n - 1];
    for (size_t i = 0; i < n; ++i) {
      cum += probs[i];
      if (u < cum) { chosen = ids[i]; break; }
    }
  }
  out.token = chosen;
  out.logprob = raw_logprob(chosen);
  out.top.clear();
  if (p.top_logprobs > 0) {
    const int32_t k = std::min<int32_t>(std::min(p.top_logprobs, kMaxTopLogprobs), vocab);
    ids.resize(size_t(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (int32_t i = 0; i < k; ++i) out.top.emplace_back(ids[i], raw_logprob(ids[i]));
  }
}

}  // namespace rf::cpu
