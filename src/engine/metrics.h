// Engine metrics: counters, gauges and latency histograms, updated by the
// engine thread and read from any thread (all atomics), rendered in the
// Prometheus text format by prometheus_text().
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace rf {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends "<name>_bucket{le=...}", _sum and _count lines.
  void render(std::string& out, const std::string& name, const std::string& help) const;
  uint64_t count() const { return count_.load(); }

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<uint64_t>> buckets_;  // cumulative at render time
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_micros_{0};
};

struct EngineMetrics {
  std::atomic<uint64_t> requests_total{0};
  std::atomic<uint64_t> requests_finished{0};
  std::atomic<uint64_t> requests_cancelled{0};
  std::atomic<uint64_t> requests_failed{0};
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> generation_tokens{0};
  std::atomic<uint64_t> prefix_cache_queried_tokens{0};
  std::atomic<uint64_t> prefix_cache_hit_tokens{0};
  std::atomic<uint64_t> preemptions{0};
  std::atomic<uint64_t> steps{0};
  // Where the steps' wall time went, in microseconds: scheduling and batch
  // building, queuing the forward pass, sampling (which waits for the
  // device), and handing out the tokens.
  enum StepPhase { kSchedule, kForward, kSample, kTokens, kStepPhases };
  std::array<std::atomic<uint64_t>, kStepPhases> step_micros{};
  void observe_step_phase(StepPhase phase, double seconds);
  static const char* step_phase_name(StepPhase phase);
  // Steps by the prompt tokens they carry (chunks of more than one token):
  // bucket 0 none (decode only), then up to 256, 512, 1024, 2048, more.
  // Per bucket: steps, their wall microseconds, their single-token rows.
  static constexpr int kStepShapes = 6;
  static int step_shape(int64_t prompt_tokens);
  static const char* step_shape_name(int shape);
  std::array<std::atomic<uint64_t>, kStepShapes> shape_steps{}, shape_micros{}, shape_decode_rows{};
  void observe_step_shape(int64_t prompt_tokens, int64_t decode_rows, double seconds);
  std::atomic<int64_t> queue_depth{0};
  std::atomic<int64_t> running{0};
  std::atomic<int64_t> kv_blocks_total{0};
  std::atomic<int64_t> kv_blocks_free{0};
  std::atomic<uint64_t> kv_window_releases{0};  // blocks released as sliding windows moved
  // Speculative decoding: rounds verified (a sequence's proposals in one
  // step), tokens proposed, and of those accepted.
  std::atomic<uint64_t> spec_drafts{0};
  std::atomic<uint64_t> spec_draft_tokens{0};
  std::atomic<uint64_t> spec_accepted_tokens{0};
  // Tokens a round yields on average: 1 + accepted / rounds (0 before the first).
  double spec_mean_acceptance_length() const;
  Histogram ttft{{0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30}};
  Histogram tpot{{0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1}};
  Histogram e2e{{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120}};
  // Structured output: the CPU time of each step's token masks (steps with a
  // grammar row only), masks computed by a trie walk and served from cache.
  Histogram grammar_mask{{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1}};
  std::atomic<uint64_t> grammar_mask_max_micros{0};
  std::atomic<uint64_t> grammar_masks_computed{0};
  std::atomic<uint64_t> grammar_mask_cache_hits{0};
  void observe_grammar_step(double seconds);

  std::string prometheus_text() const;
};

}  // namespace rf
