// Perplexity and KL-divergence statistics over the scored positions of a
// text (what `rocmforge perplexity` reports, with llama.cpp's perplexity
// tool's conventions): each position's log-softmax in double precision, the
// negative log-likelihood of the true next token, and — against the
// log-probabilities of a base run — KL(base || this) and whether the most
// likely token agrees.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rf {

// out[i] = logits[i] - log(sum(exp(logits))), in double.
void log_softmax(std::span<const float> logits, std::vector<double>& out);

class PerplexityStats {
 public:
  void add(double nll) {
    sum_ += nll;
    sum_sq_ += nll * nll;
    ++count_;
  }
  int64_t count() const { return count_; }
  double mean_nll() const;
  double ppl() const;        // exp(mean negative log-likelihood)
  double ppl_error() const;  // its standard error (delta method)

 private:
  double sum_ = 0, sum_sq_ = 0;
  int64_t count_ = 0;
};

class KlStats {
 public:
  // One position: base and this run's log-probabilities over the vocabulary.
  void add(std::span<const float> base_logprobs, std::span<const double> logprobs);
  int64_t count() const { return int64_t(kl_.size()); }
  double mean() const;
  double mean_error() const;    // standard error of the mean
  double quantile(double q) const;  // q in [0, 1], of the per-position KLs
  double max() const { return quantile(1.0); }
  double same_top() const;      // share of positions whose most likely token agrees

 private:
  std::vector<double> kl_;
  int64_t same_top_ = 0;
};

}  // namespace rf
