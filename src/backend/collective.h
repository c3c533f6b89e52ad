// Communicator: the collectives that join tensor-parallel ranks (DESIGN.md,
// "Backends": each GPU is its own backend over its shard). A rank's
// communicator works on its own backend's memory and stream, so on GPUs the
// collectives are queued like any op (and captured inside graphs); small
// host-side exchanges serve the vocabulary-parallel sampler. Every rank
// calls the same collectives in the same order; results are identical on
// every rank (sums in rank order).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/tensor.h"
#include "core/error.h"

namespace rf {

// Thrown by a collective that gave up because another rank failed (abort()):
// that rank's own error is the one worth reporting.
class CollectiveAborted : public Error {
 public:
  CollectiveAborted() : Error("tensor parallel: another rank failed") {}
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int32_t rank() const = 0;
  virtual int32_t size() const = 0;

  // x = the sum of every rank's x, elementwise, in place; x lies in this
  // rank's backend memory (f32 or f16, contiguous).
  virtual void all_reduce_sum(Tensor& x) = 0;
  // all_reduce_sum(partial) fused with the backend op that follows it at
  // the end of a layer block: x += the sum over ranks of partial (RMS-
  // normed with *post_norm first, if given), out = RMSNorm(x) * w —
  // Backend::add_rms_norm / add_post_norm_rms_norm; partial is consumed
  // (its contents afterwards are unspecified). Returns false, having done
  // nothing, where this communicator has no fused form for these tensors
  // (the caller then runs the two steps).
  virtual bool all_reduce_add_rms_norm(Tensor& partial, Tensor& x, const Tensor* post_norm, const Tensor& w,
                                       float eps, Tensor& out) {
    (void)partial, (void)x, (void)post_norm, (void)w, (void)eps, (void)out;
    return false;
  }
  // Host memory: out = every rank's `bytes` of `in`, in rank order (out
  // holds size() * bytes). Waits for the data.
  virtual void all_gather_host(const void* in, size_t bytes, void* out) = 0;
  // Makes every rank's later collectives fail at once (a rank that failed
  // mid-step calls it so that the others do not wait for it forever).
  virtual void abort() = 0;
};

}  // namespace rf
