// Routing near-ties of mixture-of-experts models, seen on the CPU backend:
// RoutingMarginCpu notes the smallest gap between the last chosen and the
// best unchosen router logit (relative to the row's largest |logit|) of
// every routing decision it makes. Routing is a discrete choice: where that
// gap is below kMinRoutingMargin, a GPU run (f16 activations; batched
// steps reduce in other orders) may pick the other expert, and the two
// runs part for good. GPU tests use it to choose prompts clear of such
// ties, or to tell such a parting from a bug.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/runner.h"

namespace rf::test {

// The router sees f16 activations and, in batches, f16 weights: ~1e-3 each.
constexpr float kMinRoutingMargin = 5e-3f;

class RoutingMarginCpu : public CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  float min_margin = INFINITY;
  Handoff moe_route(const Tensor& logits, const MoeParams& p, Tensor& ids, Tensor& weights) override {
    const Handoff h = CpuBackend::moe_route(logits, p, ids, weights);
    for (int64_t r = 0; r < logits.rows(); ++r) {
      std::vector<float> l(logits.ptr<float>() + r * p.n_expert, logits.ptr<float>() + (r + 1) * p.n_expert);
      float scale = 0.0f;
      for (float v : l) scale = std::max(scale, std::abs(v));
      std::sort(l.begin(), l.end(), std::greater<float>());
      if (p.n_used < p.n_expert) min_margin = std::min(min_margin, (l[size_t(p.n_used) - 1] - l[size_t(p.n_used)]) / scale);
    }
    return h;
  }
};

// The smallest routing margin of the CPU's forward pass over `tokens`.
inline float cpu_routing_margin(const std::string& path, const std::vector<int32_t>& tokens) {
  RoutingMarginCpu cpu(2);
  ModelRunner runner(path, cpu, std::max<int32_t>(256, int32_t(tokens.size())), 1);
  ModelRunner::Seq s;
  s.tokens = tokens;
  runner.step({&s});
  return cpu.min_margin;
}

}  // namespace rf::test
