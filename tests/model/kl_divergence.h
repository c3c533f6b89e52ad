// KL divergence of the next-token distributions two logit rows give (the
// model tests' measure of how far a lossy format moves a model).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace rf::test {

// KL(p || q) of the softmaxes of two logit rows, in nats.
inline double kl_divergence(const std::vector<float>& p_logits, const std::vector<float>& q_logits) {
  auto log_softmax = [](const std::vector<float>& x) {
    double mx = -INFINITY, z = 0;
    for (float v : x) mx = std::max(mx, double(v));
    for (float v : x) z += std::exp(double(v) - mx);
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = double(x[i]) - mx - std::log(z);
    return out;
  };
  const auto lp = log_softmax(p_logits), lq = log_softmax(q_logits);
  double kl = 0;
  for (size_t i = 0; i < lp.size(); ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
  return kl;
}

}  // namespace rf::test
