// Host-side sampling helpers shared by backends.
#include "core/sampling.h"

#include <cmath>

namespace rf {

void apply_penalties(float* logits, const SamplingParams& p, const PenaltyToken* pen, int32_t n_pen) {
  for (int32_t i = 0; i < n_pen; ++i)
    if (!pen[i].banned) logits[pen[i].token] += pen[i].bias;
  for (int32_t i = 0; i < n_pen; ++i) {
    if (!pen[i].penalized()) continue;
    float& l = logits[pen[i].token];
    if (pen[i].in_context && p.repetition_penalty != 1.0f)
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    if (pen[i].output_count > 0) l -= p.presence_penalty + p.frequency_penalty * float(pen[i].output_count);
  }
  for (int32_t i = 0; i < n_pen; ++i)
    if (pen[i].banned) logits[pen[i].token] = -INFINITY;
}

}  // namespace rf
