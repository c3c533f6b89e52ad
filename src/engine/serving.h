// ServingEngine: the narrow interface a front end (the HTTP server) sees of a
// running engine — submit a request and read its handle, the tokenizer for
// prompts and text, the limits requests are checked against, and a metrics
// snapshot. The model, the backend and the step loop stay behind it.
// Every method is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace rf {

// submit() refuses a request because the queue is full (HTTP 503).
class EngineBusy : public Error {
 public:
  using Error::Error;
};

struct ServingLimits {
  int32_t max_model_len = 0;  // prompt + generated tokens per sequence
  int32_t n_vocab = 0;        // valid token ids are [0, n_vocab)
  int32_t max_num_seqs = 0;   // sequences generated at once
  int32_t max_queue = 0;      // requests that may wait for a sequence slot
  int32_t n_embd = 0;         // an embedding's dimensions
  Pooling pooling = Pooling::Last;  // the model's pooling for embedding requests
};

class ServingEngine {
 public:
  virtual ~ServingEngine() = default;

  // Validates and queues a request. Throws rf::Error for an invalid request
  // (message suitable for a 400) and EngineBusy when full.
  virtual RequestHandle submit(Request request) = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  virtual ServingLimits limits() const = 0;
  // The metrics in the Prometheus text format, as of now.
  virtual std::string metrics_text() const = 0;
  // Requests submitted and not yet finished.
  virtual size_t active_requests() const = 0;
};

}  // namespace rf
