// Attention sinks (gpt-oss; AttentionParams::sinks) in the GPU kernels'
// online softmax, host and device code: a head's sink is one more logit in
// the softmax's denominator with no value, folded in where a row's
// statistics are final (max m over its scores, sum l = sum exp(s - m)):
//   m' = max(m, sink),  out = acc * exp(m - m') / (l exp(m - m') + exp(sink - m')).
// Every attention kernel's finalization (unsplit rows) and every sum of
// split-K parts (the combine kernels, the decode cluster's sum) applies it
// through these functions, so the split and unsplit paths agree. A head
// without a sink passes -inf: the plain 1 / l. One home for the device code
// and for the CPU emulation of the tensor-core prefill tile
// (tests/op/cpu_prefill_mma_emulation_test.cpp).
#pragma once

#include <cmath>

#include "core/host_device.h"

namespace rf::gpu {

// Query head h's sink logit, or -inf where the op has none.
RF_HOST_DEVICE inline float sink_logit(const float* sinks, int h) { return sinks ? sinks[h] : -INFINITY; }

// The factor that turns a row's unnormalized sum (max m, sum l) into its
// output, with the sink in the denominator; 0 for a row that saw no key
// (l = 0: its accumulator is 0 too).
RF_HOST_DEVICE inline float softmax_out_scale(float m, float l, float sink) {
  if (!(l > 0.0f)) return 0.0f;
  if (sink == -INFINITY) return 1.0f / l;
  const float mm = fmaxf(m, sink);
  const float c = expf(m - mm);
  return c / fmaf(l, c, expf(sink - mm));
}

// For sums of split parts: the combined max mx (over the parts' maxima)
// raised to the sink (sink_max), and the sink's term exp(sink - mx') of the
// denominator (sink_term, 0 without a sink), mx' being sink_max's result.
RF_HOST_DEVICE inline float sink_max(float mx, float sink) { return fmaxf(mx, sink); }
RF_HOST_DEVICE inline float sink_term(float sink, float mx) { return sink == -INFINITY ? 0.0f : expf(sink - mx); }

}  // namespace rf::gpu
