// Vocabulary-parallel sampling on a GPU rank: the protocol of
// backend/vocab_parallel_sample.h over this backend's kernels
// (sample_shard.cu). Each primitive uploads the rows' small inputs, runs
// one kernel over the rank's logits and reads the per-row results back
// (the protocol exchanges them between ranks on the host); the logits never
// leave the device. Buffers: gpu::ShardLayout, allocated by reserve() for
// tensor-parallel ranks.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/vocab_parallel_sample.h"
#include "core/error.h"

namespace rf {
class CudaBackend::ShardOps final : public VocabShardOps {
 public:
  ShardOps(CudaBackend& b, const Tensor& logits, int64_t first, int n_rows)
      : b_(b), I_(*b.impl_), logits_(logits.ptr<float>()), first_(int(first)), local_(int(logits.cols())),
        n_(n_rows), layout_(size_t(b.limits_.max_logits)) {
    RF_CHECK(I_.shard_dev && I_.shard_host, "cuda sample_vocab_parallel: this backend was not reserved for a "
             "tensor-parallel rank (its vocabulary is whole)");
  }

  void prepare(std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
               std::vector<ShardSummary>& sums) override {
    b_.upload_sample_rows(rows, penalties);
    auto* prep = dev<gpu::ShardPrepDevice>(layout_.prep);
    gpu::shard_prepare(logits_, n_, local_, first_, I_.rows_dev, I_.pen_dev, I_.mask_dev, I_.sample_work, prep,
                       b_.ctx());
    fetch(layout_.prep, size_t(n_) * sizeof(gpu::ShardPrepDevice));
    const auto* h = host<gpu::ShardPrepDevice>(layout_.prep);
    for (int r = 0; r < n_; ++r) {
      ShardSummary& sm = sums[size_t(r)];
      sm.raw_max = h[r].raw_max;
      sm.top = h[r].top;
      sm.raw_sum = h[r].raw_sum;
      sm.best = ShardCandidate{h[r].best_v, h[r].best_i};
      sm.best_raw = h[r].best_raw;
      for (int j = 0; j < kMaxTopLogprobs; ++j) sm.tops[j] = ShardCandidate{h[r].top_v[j], h[r].top_i[j]};
    }
  }

  void histogram(std::span<const uint8_t> want, std::span<const uint32_t> floor, std::span<const uint32_t> prefix,
                 uint32_t mask, int shift, bool by_mass, std::span<const float> top,
                 std::vector<double>& hist) override {
    put_rows([&](gpu::ShardRowDevice& d, size_t r) {
      d.want = want[r];
      d.floor = floor[r];
      d.prefix = prefix[r];
      d.top = top[r];
    });
    gpu::shard_histogram(I_.sample_work, n_, local_, rows_in(), mask, shift, by_mass, dev<double>(layout_.hist),
                         b_.ctx());
    fetch(layout_.hist, size_t(n_) * 256 * sizeof(double));
    const double* h = host<double>(layout_.hist);
    for (size_t r = 0; r < size_t(n_); ++r)
      if (want[r]) std::copy(h + r * 256, h + r * 256 + 256, hist.begin() + ptrdiff_t(r * 256));
  }

  void kept_mass(std::span<const uint8_t> want, std::span<const uint32_t> floor, std::span<const float> top,
                 std::vector<double>& out) override {
    put_rows([&](gpu::ShardRowDevice& d, size_t r) {
      d.want = want[r];
      d.floor = floor[r];
      d.top = top[r];
    });
    gpu::shard_kept_mass(I_.sample_work, n_, local_, rows_in(), dev<double>(layout_.vals), b_.ctx());
    read_vals(out);
    for (size_t r = 0; r < out.size(); ++r)
      if (!want[r]) out[r] = 0.0;
  }

  void pick(std::span<const uint8_t> want, std::span<const uint32_t> floor, std::span<const float> top,
            std::span<const double> before, std::span<const double> u, std::span<const uint8_t> owner,
            std::vector<ShardCandidate>& picks) override {
    put_rows([&](gpu::ShardRowDevice& d, size_t r) {
      d.want = want[r];
      d.floor = floor[r];
      d.top = top[r];
      d.before = before[r];
      d.u = u[r];
      d.owner = owner[r];
    });
    auto* d = dev<gpu::ShardPickDevice>(layout_.picks);
    gpu::shard_pick(logits_, I_.sample_work, n_, local_, first_, rows_in(), d, b_.ctx());
    fetch(layout_.picks, size_t(n_) * 2 * sizeof(gpu::ShardPickDevice));
    const auto* h = host<gpu::ShardPickDevice>(layout_.picks);
    for (size_t r = 0; r < size_t(n_) * 2; ++r)
      if (want[r / 2]) picks[r] = ShardCandidate{h[r].raw, h[r].id};
  }

 private:
  template <typename T> T* dev(size_t offset) const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(I_.shard_dev) + offset);
  }
  template <typename T> T* host(size_t offset) const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(I_.shard_host) + offset);
  }
  gpu::ShardRowDevice* rows_in() const { return dev<gpu::ShardRowDevice>(layout_.rows_in); }

  // Fills every row's inputs (zeroed first) and uploads them.
  template <typename F> void put_rows(F&& fill) {
    auto* h = host<gpu::ShardRowDevice>(layout_.rows_in);
    for (size_t r = 0; r < size_t(n_); ++r) {
      h[r] = gpu::ShardRowDevice{};
      fill(h[r], r);
    }
    RF_GPU_CHECK(gpuMemcpyAsync(rows_in(), h, size_t(n_) * sizeof(gpu::ShardRowDevice), gpuMemcpyHostToDevice,
                                as_stream(b_.stream_)));
  }
  // Copies `bytes` at `offset` back to the host and waits.
  void fetch(size_t offset, size_t bytes) {
    RF_GPU_CHECK(gpuMemcpyAsync(host<uint8_t>(offset), dev<uint8_t>(offset), bytes, gpuMemcpyDeviceToHost,
                                as_stream(b_.stream_)));
    RF_GPU_CHECK(gpuStreamSynchronize(as_stream(b_.stream_)));
  }
  void read_vals(std::vector<double>& out) {
    fetch(layout_.vals, size_t(n_) * sizeof(double));
    const double* h = host<double>(layout_.vals);
    out.assign(h, h + n_);
  }

  CudaBackend& b_;
  Impl& I_;
  const float* logits_;
  int first_, local_, n_;
  gpu::ShardLayout layout_;
};

void CudaBackend::sample_vocab_parallel(const Tensor& logits, int64_t first, int64_t vocab_total,
                                        std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
                                        Communicator& comm, std::vector<SampleResult>& out) {
  RF_CHECK(logits.type == DType::F32 && logits.cols() <= limits_.vocab && int64_t(rows.size()) <= limits_.max_logits &&
               first >= 0 && first + logits.cols() <= vocab_total,
           "cuda sample_vocab_parallel: bad logits");
  gpu::OpProfiler::Scope timer(profiler(), "sample");
  ShardOps ops(*this, logits, first, int(rows.size()));
  rf::sample_vocab_parallel(ops, vocab_total, rows, penalties, comm, out);
}

}  // namespace rf
