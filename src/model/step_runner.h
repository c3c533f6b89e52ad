// StepRunner: what the engine and the evaluator run a step on — the model's
// Transformer and KV cache on one backend, or one of each per
// tensor-parallel rank (model/shard.h), each rank on its own thread with its
// own backend and communicator, all running the same step together. The
// scheduler above stays one: every rank's KV cache has the same blocks (a
// rank holds its KV heads of each), so one block table serves them all.
// Sampling is vocabulary-parallel across ranks (Backend::
// sample_vocab_parallel); results come from rank 0.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "kv/memory_plan.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/transformer.h"

namespace rf {

class StepRunner {
 public:
  // One rank per backend (model loaded onto the same backends, in order);
  // comms: none for one rank, else one communicator per rank. The KV cache
  // is planned from `budget` (device memory fields are filled in from rank
  // 0's backend, after the workspace is allocated), its elements as
  // `kv_dtype` says.
  StepRunner(const Model& model, std::span<Backend* const> backends, std::span<Communicator* const> comms,
             const BackendLimits& limits, KVBudget budget, int32_t block_size,
             KVCacheDType kv_dtype = KVCacheDType::Auto);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  int32_t n_ranks() const { return int32_t(ranks_.size()); }
  const BackendLimits& limits() const { return ranks_[0].tf->limits(); }
  const KVGroupLayout& kv_groups() const { return ranks_[0].kv->groups(); }
  int32_t num_blocks() const { return ranks_[0].kv->num_blocks(); }
  size_t kv_bytes() const;  // over all ranks
  // Hybrid models: one recurrent-state row (a rank's), and all the rows over all ranks.
  size_t state_row_bytes() const { return ranks_[0].kv->state_row_bytes(); }
  size_t state_bytes() const;
  DType kv_type() const { return ranks_[0].kv->type(); }

  // Runs the step on every rank (queued on GPUs); the logits stay on the ranks.
  // `hidden_states`: every token's final normed hidden state is kept too
  // (Transformer::forward), for copy_hidden.
  void forward(const Batch& batch, bool hidden_states = false);
  // Whether forward() returns with the step queued on a device, not done.
  bool forward_queues() const { return ranks_[0].backend->device() != DeviceKind::CPU; }
  // Samples the last forward's logit rows.
  void sample(std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
              std::vector<SampleResult>& out);
  // Copies logit row `row` of the last forward, all n_vocab of it, to the host.
  void copy_logits(int32_t row, float* out);
  // Copies token rows [first, first + n) of the last forward's final hidden
  // states (a forward with hidden_states) to the host as f32, n * n_embd values.
  void copy_hidden(int32_t first, int32_t n, float* out);

 private:
  struct Rank {
    Backend* backend;
    Communicator* comm;
    std::unique_ptr<Transformer> tf;
    std::unique_ptr<KVCache> kv;
    Tensor logits;
    std::vector<SampleResult> results;
  };
  // Runs fn(r) for every rank at once (rank 0 on the calling thread) and
  // waits; a rank that throws aborts the communicators, and the first
  // error is rethrown. The group is then gone for good: later calls fail at
  // once, naming that error, rather than replay graphs whose collectives
  // belong to aborted communicators.
  void on_ranks(const std::function<void(int32_t)>& fn);
  void worker(int32_t r);
  void stop_workers();
  void note_error(std::exception_ptr err, bool aborted);  // under mu_

  int64_t n_vocab_;
  std::vector<Rank> ranks_;
  std::vector<std::thread> threads_;  // ranks 1..n-1
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int32_t)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int32_t pending_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;   // the step's first error, a rank's own before an abort's
  bool error_aborted_ = false;
  std::string broken_;  // tensor parallel: why the group was aborted (empty: it was not)
};

}  // namespace rf
