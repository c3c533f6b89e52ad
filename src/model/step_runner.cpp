// One step over one backend or over tensor-parallel ranks (see step_runner.h).
#include "model/step_runner.h"

#include "core/error.h"
#include "core/fp16.h"
#include "core/spin_wait.h"

namespace rf {

StepRunner::StepRunner(const Model& model, std::span<Backend* const> backends, std::span<Communicator* const> comms,
                       const BackendLimits& limits, KVBudget budget, int32_t block_size, KVCacheDType kv_dtype)
    : n_vocab_(model.config().n_vocab) {
  const int32_t n = int32_t(backends.size());
  RF_CHECK(n >= 1 && n == model.n_ranks(), "runner: ", n, " backends for a model loaded on ", model.n_ranks());
  RF_CHECK(n == 1 || int32_t(comms.size()) == n, "runner: ", comms.size(), " communicators for ", n, " ranks");
  for (int32_t r = 0; r < n; ++r) {
    Rank k;
    k.backend = backends[size_t(r)];
    k.comm = n > 1 ? comms[size_t(r)] : nullptr;
    RF_CHECK(!k.comm || (k.comm->rank() == r && k.comm->size() == n), "runner: communicator of rank ",
             k.comm ? k.comm->rank() : -1, " given to rank ", r);
    k.backend->bind_thread();
    k.tf = std::make_unique<Transformer>(model.rank_config(r), model.rank_weights(r), *k.backend, limits, k.comm);
    ranks_.push_back(std::move(k));
  }
  // Every rank holds the same blocks: plan once, from rank 0's memory.
  Backend& b0 = *ranks_[0].backend;
  budget.device_total = b0.total_memory();
  budget.device_used = b0.allocated_bytes();
  const DType kv_type = kv_element_type(b0, kv_dtype);
  const KVMemoryPlan plan(kv_geometry(model.rank_config(0), kv_type, block_size), budget);
  for (int32_t r = 0; r < n; ++r) {
    ranks_[size_t(r)].backend->bind_thread();
    ranks_[size_t(r)].kv =
        std::make_unique<KVCache>(*ranks_[size_t(r)].backend, model.rank_config(r), plan, kv_type);
  }
  for (int32_t r = 1; r < n; ++r) threads_.emplace_back([this, r] { worker(r); });
  try {
    on_ranks([&](int32_t r) { ranks_[size_t(r)].tf->warmup(*ranks_[size_t(r)].kv); });
  } catch (...) {
    stop_workers();  // (no destructor runs for a constructor that throws)
    throw;
  }
}

// Each rank's memory is then freed by its own backend (which binds its device).
StepRunner::~StepRunner() { stop_workers(); }

void StepRunner::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

size_t StepRunner::kv_bytes() const {
  size_t total = 0;
  for (const Rank& k : ranks_) total += k.kv->bytes();
  return total;
}

size_t StepRunner::state_bytes() const {
  size_t total = 0;
  for (const Rank& k : ranks_) total += k.kv->state_bytes();
  return total;
}

void StepRunner::worker(int32_t r) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int32_t)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wait_spinning(lock, cv_, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr err;
    bool aborted = false;
    try {
      ranks_[size_t(r)].backend->bind_thread();
      (*job)(r);
    } catch (const CollectiveAborted&) {
      err = std::current_exception();
      aborted = true;
    } catch (...) {
      err = std::current_exception();
      ranks_[size_t(r)].comm->abort();
    }
    std::lock_guard<std::mutex> lock(mu_);
    note_error(err, aborted);
    if (--pending_ == 0) cv_.notify_all();
  }
}

void StepRunner::on_ranks(const std::function<void(int32_t)>& fn) {
  ranks_[0].backend->bind_thread();
  if (ranks_.size() == 1) {
    fn(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    RF_CHECK(broken_.empty(), "tensor parallel: the ranks stopped working together at an earlier step (", broken_,
             "); restart to recover");
    job_ = &fn;
    pending_ = int32_t(ranks_.size()) - 1;
    error_ = nullptr;
    error_aborted_ = false;
    ++generation_;
  }
  cv_.notify_all();
  std::exception_ptr err;
  bool aborted = false;
  try {
    fn(0);
  } catch (const CollectiveAborted&) {
    err = std::current_exception();
    aborted = true;
  } catch (...) {
    err = std::current_exception();
    ranks_[0].comm->abort();
  }
  std::unique_lock<std::mutex> lock(mu_);
  note_error(err, aborted);
  wait_spinning(lock, cv_, [&] { return pending_ == 0; });
  if (!error_) return;
  try {
    std::rethrow_exception(error_);
  } catch (const std::exception& e) {
    broken_ = e.what();
  } catch (...) {
    broken_ = "unknown error";
  }
  std::rethrow_exception(error_);
}

void StepRunner::note_error(std::exception_ptr err, bool aborted) {
  // The failing rank's own error wins over the others' "another rank failed".
  if (err && (!error_ || (error_aborted_ && !aborted))) {
    error_ = err;
    error_aborted_ = aborted;
  }
}

void StepRunner::forward(const Batch& batch, bool hidden_states) {
  on_ranks([&](int32_t r) {
    Rank& k = ranks_[size_t(r)];
    k.logits = k.tf->forward(batch, *k.kv, hidden_states);
  });
}

void StepRunner::copy_hidden(int32_t first, int32_t n, float* out) {
  // Every rank holds the whole hidden state (the residual stream is summed
  // over the ranks): rank 0's is read.
  Rank& k = ranks_[0];
  const Tensor h = k.tf->hidden();
  RF_CHECK(first >= 0 && n >= 0 && first + n <= h.rows(), "runner: hidden rows [", first, ", ", first + n, ") of ",
           h.rows());
  if (n == 0) return;
  const Tensor rows = h.slice_rows(first, n);
  const size_t count = size_t(n) * size_t(h.cols());
  if (rows.type == DType::F32) {
    k.backend->copy_to_host(out, rows.data, count * sizeof(float));
    return;
  }
  RF_CHECK(rows.type == DType::F16 || rows.type == DType::BF16, "runner: hidden states of type ",
           dtype_name(rows.type));
  std::vector<uint16_t> half(count);
  k.backend->copy_to_host(half.data(), rows.data, count * sizeof(uint16_t));
  for (size_t i = 0; i < count; ++i) out[i] = rows.type == DType::F16 ? f16_to_f32(half[i]) : bf16_to_f32(half[i]);
}

void StepRunner::sample(std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
                        std::vector<SampleResult>& out) {
  if (ranks_.size() == 1) {
    ranks_[0].backend->bind_thread();
    ranks_[0].backend->sample(ranks_[0].logits, rows, penalties, out);
    return;
  }
  on_ranks([&](int32_t r) {
    Rank& k = ranks_[size_t(r)];
    const IndexRange v = k.tf->vocab_range();
    std::vector<SampleResult>& res = r == 0 ? out : k.results;
    k.backend->sample_vocab_parallel(k.logits, v.first, n_vocab_, rows, penalties, *k.comm, res);
  });
}

void StepRunner::copy_logits(int32_t row, float* out) {
  for (Rank& k : ranks_) {
    const IndexRange v = k.tf->vocab_range();
    RF_CHECK(row >= 0 && row < k.logits.rows(), "runner: logit row ", row, " of ", k.logits.rows());
    k.backend->copy_to_host(out + v.first, k.logits.slice_rows(row, 1).data, size_t(v.count) * sizeof(float));
  }
}

}  // namespace rf
