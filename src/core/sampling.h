// Sampling parameters and results shared by the backends. The pipeline, the
// same on every backend: logit biases -> penalties -> bans -> (temperature 0:
// argmax) -> temperature -> top-k -> softmax -> top-p -> min-p -> draw with a
// counter-based RNG.
// Logprobs are of the model's raw distribution (log-softmax of the logits).
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace rf {

struct SamplingParams {
  float temperature = 1.0f;       // 0: greedy
  int32_t top_k = 0;              // 0: off
  float top_p = 1.0f;             // 1: off
  float min_p = 0.0f;             // 0: off
  float repetition_penalty = 1.0f;  // over prompt and output tokens (1: off)
  float presence_penalty = 0.0f;    // over output tokens
  float frequency_penalty = 0.0f;   // over output tokens, times their count
  uint64_t seed = 0;
  int32_t top_logprobs = 0;       // alternatives to report (0..kMaxTopLogprobs)

  bool greedy() const { return temperature <= 0.0f; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

constexpr int32_t kMaxTopLogprobs = 20;

// One token a row's logit adjustments apply to. A token may have several
// entries (e.g. a bias and a penalty); they are applied in passes — every
// bias, then every penalty, then every ban — so their order does not matter,
// but no two entries of one row may both bias, or both penalize, one token.
struct PenaltyToken {
  int32_t token;
  int32_t output_count;  // times it occurs in the generated output
  int32_t in_context;    // 1 if it occurs in the prompt or output (repetition penalty)
  int32_t banned = 0;    // 1: the token cannot be drawn (e.g. EOS before min_tokens)
  float bias = 0.0f;     // added to the logit first (the request's logit_bias)

  RF_HOST_DEVICE bool penalized() const { return !banned && (in_context || output_count > 0); }
};

// One row of logits to sample from.
struct SampleRow {
  SamplingParams params;
  uint64_t rng_counter = 0;  // the sequence's generated-token count: the draw is a pure function of (seed, counter)
  int32_t penalty_offset = 0;  // into the step's PenaltyToken list
  int32_t penalty_count = 0;
  // Structured output: the tokens the row may draw, a bitmask of
  // ceil(vocab / 32) words (bit i % 32 of word i / 32: token i), held by the
  // caller until sample() returns; null: every token. Masked-out tokens
  // cannot be drawn; logprobs stay those of the raw distribution.
  const uint32_t* allowed = nullptr;
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;  // of `token` under the raw model distribution
  std::vector<std::pair<int32_t, float>> top;  // top_logprobs alternatives, best first
};

// Applies the biases, penalties and bans of one row to its logits in place
// (shared by backends that sample on the host, and by the reference tests).
void apply_penalties(float* logits, const SamplingParams& p, const PenaltyToken* pen, int32_t n_pen);

}  // namespace rf
