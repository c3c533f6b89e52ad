// Routing near-ties of mixture-of-experts models, seen on the CPU backend:
// RoutingMarginCpu notes the smallest gap between the last chosen and the
// best unchosen choice score (routing_margin: the router logits, or the
// biased probabilities and the group sums, as a change of the logits
// relative to the row's largest |logit|) of every routing decision it makes. Routing is a discrete choice: where that
// gap is below kMinRoutingMargin, a GPU run (f16 activations; batched
// steps reduce in other orders) may pick the other expert, and the two
// runs part for good. GPU tests use it to choose prompts clear of such
// ties, or to tell such a parting from a bug.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/runner.h"

namespace rf::test {

// The router sees f16 activations and, in batches, f16 weights: ~1e-3 each.
constexpr float kMinRoutingMargin = 5e-3f;

// What a routing decision ranks (backend.h moe_route): the logits for
// plain routing; else probability (softmax or sigmoid) + choice bias, and
// with groups the sums of each group's two best scores. The margin of a
// row: the gap between the last chosen and the best unchosen score (among
// the chosen groups), and between the last chosen and the best unchosen
// group, as the relative change of the router logits that could close it
// — relative to the row's largest |logit|: a logit gap as it is; a
// probability moves at most 1/4 as far as its logit (sigmoid' and the
// softmax's p (1 - p) are at most 1/4), so a score gap g needs a logit
// change of 4 g between the two (2 g for a gap of two-score group sums).
inline float routing_margin(const float* logits, const MoeParams& p) {
  const int n = p.n_expert;
  std::vector<float> s(logits, logits + n);
  float scale = 0.0f;
  for (float v : s) scale = std::max(scale, std::abs(v));
  const float per_gap = p.plain_routing() ? 1.0f : 4.0f;
  if (!p.plain_routing()) {
    const float mx = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (float v : s) z += std::exp(double(v) - mx);
    for (int e = 0; e < n; ++e) {
      const double pr = p.gating == MoeGating::Sigmoid ? 1.0 / (1.0 + std::exp(-double(logits[e])))
                                                      : std::exp(double(logits[e]) - mx) / z;
      s[size_t(e)] = float(pr) + (p.choice_bias.data ? p.choice_bias.ptr<float>()[e] : 0.0f);
    }
  }
  float margin = INFINITY;
  if (p.grouped()) {
    const int per = n / p.n_group;
    std::vector<std::pair<float, int>> g;
    for (int gi = 0; gi < p.n_group; ++gi) {
      std::vector<float> m(s.begin() + gi * per, s.begin() + (gi + 1) * per);
      std::sort(m.begin(), m.end(), std::greater<float>());
      g.push_back({m[0] + m[1], gi});
    }
    std::stable_sort(g.begin(), g.end(), [](auto a, auto b) { return a.first > b.first; });
    if (p.n_group_used < p.n_group)
      margin = 2.0f * (g[size_t(p.n_group_used) - 1].first - g[size_t(p.n_group_used)].first) / scale;
    std::vector<bool> in(size_t(p.n_group), false);
    for (int j = 0; j < p.n_group_used; ++j) in[size_t(g[size_t(j)].second)] = true;
    for (int e = 0; e < n; ++e)
      if (!in[size_t(e / per)]) s[size_t(e)] = -INFINITY;
  }
  std::sort(s.begin(), s.end(), std::greater<float>());
  if (p.n_used < n && std::isfinite(s[size_t(p.n_used)]))
    margin = std::min(margin, per_gap * (s[size_t(p.n_used) - 1] - s[size_t(p.n_used)]) / scale);
  return margin;
}

class RoutingMarginCpu : public CpuBackend {
 public:
  using CpuBackend::CpuBackend;
  float min_margin = INFINITY;
  Handoff moe_route(const Tensor& logits, const MoeParams& p, Tensor& ids, Tensor& weights) override {
    const Handoff h = CpuBackend::moe_route(logits, p, ids, weights);
    for (int64_t r = 0; r < logits.rows(); ++r)
      min_margin = std::min(min_margin, routing_margin(logits.ptr<float>() + r * p.n_expert, p));
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

// The first of up to `draws` random prompts of `length` tokens (drawn from
// rng) whose CPU run — the prompt, then `steps` greedy tokens — routes
// every token with a margin of at least kMinRoutingMargin (models without
// experts: the first draw). Empty if none does; `draw`, if given, gets the
// draw's index.
inline std::vector<int32_t> clear_routing_prompt(const std::string& path, RoutingMarginCpu& cpu, std::mt19937& rng,
                                                 int length, int steps, int draws, int* draw = nullptr) {
  for (int attempt = 0; attempt < draws; ++attempt) {
    ModelRunner probe(path, cpu);
    std::vector<int32_t> prompt;
    for (int i = 0; i < length; ++i) prompt.push_back(int32_t(rng() % uint32_t(probe.vocab())));
    cpu.min_margin = INFINITY;
    ModelRunner::Seq s;
    s.tokens = prompt;
    for (int step = 0; step < steps; ++step) s.tokens.push_back(ModelRunner::argmax(probe.step({&s})[0]));
    if (cpu.min_margin >= kMinRoutingMargin) {
      if (draw) *draw = attempt;
      return prompt;
    }
  }
  return {};
}

}  // namespace rf::test
