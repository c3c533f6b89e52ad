// Perplexity and KL-divergence statistics (see perplexity.h).
#include "model/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rf {

void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  RF_CHECK(!logits.empty(), "log_softmax of no logits");
  double top = -INFINITY;
  for (float v : logits) top = std::max(top, double(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v) - top);
  const double lse = top + std::log(sum);
  out.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - lse;
}

double PerplexityStats::mean_nll() const { return count_ ? sum_ / double(count_) : 0.0; }

double PerplexityStats::ppl() const { return std::exp(mean_nll()); }

double PerplexityStats::ppl_error() const {
  if (count_ < 2) return 0.0;
  const double m = mean_nll();
  const double var = std::max(0.0, sum_sq_ / double(count_) - m * m) * double(count_) / double(count_ - 1);
  return ppl() * std::sqrt(var / double(count_));
}

void KlStats::add(std::span<const float> base_logprobs, std::span<const double> logprobs) {
  RF_CHECK(base_logprobs.size() == logprobs.size(), "KL divergence: ", base_logprobs.size(), " base values, ",
           logprobs.size(), " here");
  double kl = 0;
  size_t base_top = 0, top = 0;
  for (size_t i = 0; i < logprobs.size(); ++i) {
    const double b = double(base_logprobs[i]);
    kl += std::exp(b) * (b - logprobs[i]);
    if (b > double(base_logprobs[base_top])) base_top = i;
    if (logprobs[i] > logprobs[top]) top = i;
  }
  kl_.push_back(std::max(0.0, kl));  // rounding can leave a tiny negative sum
  same_top_ += base_top == top;
}

double KlStats::mean() const {
  double s = 0;
  for (double v : kl_) s += v;
  return kl_.empty() ? 0.0 : s / double(kl_.size());
}

double KlStats::mean_error() const {
  const size_t n = kl_.size();
  if (n < 2) return 0.0;
  const double m = mean();
  double ss = 0;
  for (double v : kl_) ss += (v - m) * (v - m);
  return std::sqrt(ss / double(n - 1) / double(n));
}

double KlStats::quantile(double q) const {
  if (kl_.empty()) return 0.0;
  std::vector<double> v = kl_;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(std::llround(q * double(v.size() - 1))));
  return v[i];
}

double KlStats::same_top() const { return kl_.empty() ? 0.0 : double(same_top_) / double(kl_.size()); }

}  // namespace rf
