// Metrics rendering.
#include "engine/metrics.h"

#include <cstdio>

namespace rf {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), buckets_(bounds_.size()) {}

void Histogram::observe(double v) {
  for (size_t i = 0; i < bounds_.size(); ++i)
    if (v <= bounds_[i]) {
      buckets_[i].fetch_add(1);
      break;
    }
  count_.fetch_add(1);
  sum_micros_.fetch_add(uint64_t(v * 1e6));
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  char line[256];
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += buckets_[i].load();
    std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name.c_str(), bounds_[i], (unsigned long long)cum);
    out += line;
  }
  std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name.c_str(),
                (unsigned long long)count_.load(), name.c_str(), double(sum_micros_.load()) / 1e6, name.c_str(),
                (unsigned long long)count_.load());
  out += line;
}

void EngineMetrics::observe_grammar_step(double seconds) {
  grammar_mask.observe(seconds);
  const auto us = uint64_t(seconds * 1e6);
  uint64_t prev = grammar_mask_max_micros.load();
  while (us > prev && !grammar_mask_max_micros.compare_exchange_weak(prev, us)) {
  }
}

void EngineMetrics::observe_step_phase(StepPhase phase, double seconds) {
  step_micros[size_t(phase)].fetch_add(uint64_t(seconds * 1e6));
}

int EngineMetrics::step_shape(int64_t prompt_tokens) {
  if (prompt_tokens <= 0) return 0;
  int shape = 1;
  for (int64_t bound = 256; shape < kStepShapes - 1 && prompt_tokens > bound; bound *= 2) ++shape;
  return shape;
}

const char* EngineMetrics::step_shape_name(int shape) {
  static constexpr const char* kNames[kStepShapes] = {"0", "1-256", "257-512", "513-1024", "1025-2048", ">2048"};
  return kNames[shape];
}

void EngineMetrics::observe_step_shape(int64_t prompt_tokens, int64_t decode_rows, double seconds) {
  const size_t i = size_t(step_shape(prompt_tokens));
  shape_steps[i].fetch_add(1);
  shape_micros[i].fetch_add(uint64_t(seconds * 1e6));
  shape_decode_rows[i].fetch_add(uint64_t(decode_rows));
}

const char* EngineMetrics::step_phase_name(StepPhase phase) {
  static constexpr const char* kNames[kStepPhases] = {"schedule", "forward", "sample", "tokens"};
  return kNames[phase];
}

double EngineMetrics::spec_mean_acceptance_length() const {
  const uint64_t rounds = spec_drafts.load();
  return rounds > 0 ? 1.0 + double(spec_accepted_tokens.load()) / double(rounds) : 0.0;
}

std::string EngineMetrics::prometheus_text() const {
  std::string out;
  char line[512];
  auto metric = [&](const char* name, const char* type, const char* help, double v) {
    std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
    out += line;
  };
  metric("rocmforge_requests_total", "counter", "Requests submitted.", double(requests_total.load()));
  metric("rocmforge_requests_finished_total", "counter", "Requests finished (any reason).",
         double(requests_finished.load()));
  metric("rocmforge_requests_cancelled_total", "counter", "Requests cancelled by the client.",
         double(requests_cancelled.load()));
  metric("rocmforge_requests_failed_total", "counter", "Requests that ended with an error.",
         double(requests_failed.load()));
  metric("rocmforge_prompt_tokens_total", "counter", "Prompt tokens received.", double(prompt_tokens.load()));
  metric("rocmforge_generation_tokens_total", "counter", "Tokens generated.", double(generation_tokens.load()));
  metric("rocmforge_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
         double(prefix_cache_queried_tokens.load()));
  metric("rocmforge_prefix_cache_hits_total", "counter", "Prompt tokens served from the prefix cache.",
         double(prefix_cache_hit_tokens.load()));
  const double q = double(prefix_cache_queried_tokens.load());
  metric("rocmforge_prefix_cache_hit_rate", "gauge", "Share of looked-up prompt tokens found in the cache.",
         q > 0 ? double(prefix_cache_hit_tokens.load()) / q : 0.0);
  metric("rocmforge_preemptions_total", "counter", "Sequences preempted for KV space.", double(preemptions.load()));
  metric("rocmforge_engine_steps_total", "counter", "Engine steps run.", double(steps.load()));
  out += "# HELP rocmforge_engine_step_seconds_total Engine step wall time by phase (sample waits for the device).\n"
         "# TYPE rocmforge_engine_step_seconds_total counter\n";
  for (int ph = 0; ph < kStepPhases; ++ph) {
    std::snprintf(line, sizeof line, "rocmforge_engine_step_seconds_total{phase=\"%s\"} %.6f\n",
                  step_phase_name(StepPhase(ph)), double(step_micros[size_t(ph)].load()) / 1e6);
    out += line;
  }
  out += "# HELP rocmforge_engine_steps_by_prompt_tokens_total Engine steps by the prompt tokens they carried.\n"
         "# TYPE rocmforge_engine_steps_by_prompt_tokens_total counter\n";
  for (int i = 0; i < kStepShapes; ++i) {
    std::snprintf(line, sizeof line, "rocmforge_engine_steps_by_prompt_tokens_total{prompt_tokens=\"%s\"} %llu\n",
                  step_shape_name(i), (unsigned long long)shape_steps[size_t(i)].load());
    out += line;
  }
  out += "# HELP rocmforge_engine_step_seconds_by_prompt_tokens_total Engine step wall time by the prompt tokens carried.\n"
         "# TYPE rocmforge_engine_step_seconds_by_prompt_tokens_total counter\n";
  for (int i = 0; i < kStepShapes; ++i) {
    std::snprintf(line, sizeof line, "rocmforge_engine_step_seconds_by_prompt_tokens_total{prompt_tokens=\"%s\"} %.6f\n",
                  step_shape_name(i), double(shape_micros[size_t(i)].load()) / 1e6);
    out += line;
  }
  metric("rocmforge_queue_depth", "gauge", "Requests waiting to be scheduled.", double(queue_depth.load()));
  metric("rocmforge_running_sequences", "gauge", "Sequences being generated.", double(running.load()));
  metric("rocmforge_kv_blocks_total", "gauge",
         "KV cache blocks (one holds block-size tokens of one KV group's layers; every group draws on them).",
         double(kv_blocks_total.load()));
  metric("rocmforge_kv_blocks_free", "gauge", "KV cache blocks free (cached ones included).",
         double(kv_blocks_free.load()));
  metric("rocmforge_kv_blocks_used", "gauge", "KV cache blocks held by sequences, in all KV groups.",
         double(kv_blocks_total.load() - kv_blocks_free.load()));
  metric("rocmforge_kv_window_blocks_released_total", "counter",
         "KV blocks of sliding-window groups released as the window moved past them.",
         double(kv_window_releases.load()));
  metric("rocmforge_grammar_masks_computed_total", "counter",
         "Structured output: token masks computed by walking the vocabulary trie.",
         double(grammar_masks_computed.load()));
  metric("rocmforge_grammar_mask_cache_hits_total", "counter",
         "Structured output: token masks served from a grammar's cache.", double(grammar_mask_cache_hits.load()));
  metric("rocmforge_grammar_mask_step_max_seconds", "gauge",
         "Structured output: the longest time one step spent computing token masks.",
         double(grammar_mask_max_micros.load()) / 1e6);
  metric("rocmforge_spec_decode_num_drafts_total", "counter",
         "Speculative decoding: proposals verified (one sequence's proposed tokens in one step).",
         double(spec_drafts.load()));
  metric("rocmforge_spec_decode_num_draft_tokens_total", "counter", "Speculative decoding: tokens proposed.",
         double(spec_draft_tokens.load()));
  metric("rocmforge_spec_decode_num_accepted_tokens_total", "counter",
         "Speculative decoding: proposed tokens the model accepted.", double(spec_accepted_tokens.load()));
  const double proposed = double(spec_draft_tokens.load());
  metric("rocmforge_spec_decode_acceptance_rate", "gauge", "Speculative decoding: share of proposed tokens accepted.",
         proposed > 0 ? double(spec_accepted_tokens.load()) / proposed : 0.0);
  metric("rocmforge_spec_decode_mean_acceptance_length", "gauge",
         "Speculative decoding: tokens a verified proposal yields on average (1 + accepted per proposal).",
         spec_mean_acceptance_length());
  grammar_mask.render(out, "rocmforge_grammar_mask_step_seconds",
                      "Structured output: time each step spent computing token masks (on the CPU, overlapped with "
                      "the forward pass).");
  ttft.render(out, "rocmforge_time_to_first_token_seconds", "Time from request arrival to its first token.");
  tpot.render(out, "rocmforge_time_per_output_token_seconds", "Time between consecutive output tokens.");
  e2e.render(out, "rocmforge_request_latency_seconds", "Time from request arrival to its last token.");
  return out;
}

}  // namespace rf
