// The CPU rank's primitives of vocabulary-parallel sampling
// (backend/vocab_parallel_sample.h): plain loops over its logit range,
// masses in double as the reference sampler sums them.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/vocab_parallel_sample.h"
#include "core/error.h"

namespace rf {
namespace {

class CpuShardOps final : public VocabShardOps {
 public:
  CpuShardOps(const Tensor& logits, int64_t first, size_t n_rows)
      : logits_(logits), first_(first), local_(logits.cols()), work_(n_rows) {}

  void prepare(std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
               std::vector<ShardSummary>& sums) override {
    std::vector<PenaltyToken> mine;
    for (size_t r = 0; r < rows.size(); ++r) {
      const SampleRow& row = rows[r];
      const SamplingParams& p = row.params;
      std::vector<float>& w = work_[r];
      w.assign(raw(r), raw(r) + local_);
      mine.clear();
      for (int32_t e = 0; e < row.penalty_count; ++e) {
        PenaltyToken t = penalties[size_t(row.penalty_offset + e)];
        if (t.token < first_ || t.token >= first_ + local_) continue;
        t.token -= int32_t(first_);
        mine.push_back(t);
      }
      apply_penalties(w.data(), p, mine.data(), int32_t(mine.size()));
      if (row.allowed)
        for (int64_t i = 0; i < local_; ++i) {
          const int64_t id = first_ + i;
          if (!((row.allowed[id >> 5] >> (id & 31)) & 1u)) w[size_t(i)] = -INFINITY;
        }
      ShardSummary& sm = sums[r];
      sm.raw_max = *std::max_element(raw(r), raw(r) + local_);
      sm.raw_sum = 0;
      for (int64_t i = 0; i < local_; ++i) sm.raw_sum += std::exp(double(raw(r)[i]) - double(sm.raw_max));
      sm.best = ShardCandidate{w[0], int32_t(first_)};
      for (int64_t i = 1; i < local_; ++i)
        if (w[size_t(i)] > sm.best.value) sm.best = ShardCandidate{w[size_t(i)], int32_t(first_ + i)};
      sm.best_raw = raw(r)[sm.best.id - first_];
      if (!p.greedy()) {
        const float inv_t = 1.0f / p.temperature;
        for (float& x : w) x *= inv_t;
      }
      sm.top = *std::max_element(w.begin(), w.end());
      const int64_t n_top = std::min<int64_t>(std::min(p.top_logprobs, kMaxTopLogprobs), local_);
      if (n_top > 0) {
        std::vector<ShardCandidate> c(static_cast<size_t>(local_));
        for (int64_t i = 0; i < local_; ++i) c[size_t(i)] = ShardCandidate{raw(r)[i], int32_t(first_ + i)};
        std::partial_sort(c.begin(), c.begin() + n_top, c.end(), [](const ShardCandidate& a, const ShardCandidate& b) {
          return a.value > b.value || (a.value == b.value && a.id < b.id);
        });
        std::copy(c.begin(), c.begin() + n_top, sm.tops);
      }
    }
  }

  void histogram(std::span<const uint8_t> want, std::span<const uint32_t> floor, std::span<const uint32_t> prefix,
                 uint32_t mask, int shift, bool by_mass, std::span<const float> top,
                 std::vector<double>& hist) override {
    for (size_t r = 0; r < work_.size(); ++r) {
      if (!want[r]) continue;
      for (float x : work_[r]) {
        const uint32_t key = order_key(x);
        if (key < floor[r] || (key & mask) != prefix[r]) continue;
        hist[r * 256 + ((key >> shift) & 255u)] += by_mass ? std::exp(double(x) - double(top[r])) : 1.0;
      }
    }
  }

  void kept_mass(std::span<const uint8_t> want, std::span<const uint32_t> floor, std::span<const float> top,
                 std::vector<double>& out) override {
    out.assign(work_.size(), 0.0);
    for (size_t r = 0; r < work_.size(); ++r)
      if (want[r])
        for (float x : work_[r])
          if (order_key(x) >= floor[r]) out[r] += std::exp(double(x) - double(top[r]));
  }

  void pick(std::span<const uint8_t> want, std::span<const uint32_t> floor, std::span<const float> top,
            std::span<const double> before, std::span<const double> u, std::span<const uint8_t> owner,
            std::vector<ShardCandidate>& picks) override {
    for (size_t r = 0; r < work_.size(); ++r) {
      if (!want[r]) continue;
      ShardCandidate& pick = picks[2 * r];
      ShardCandidate& last = picks[2 * r + 1];
      double cum = before[r];
      for (int64_t i = 0; i < local_; ++i) {
        const float x = work_[r][size_t(i)];
        if (order_key(x) < floor[r]) continue;
        cum += std::exp(double(x) - double(top[r]));
        last = ShardCandidate{raw(r)[i], int32_t(first_ + i)};
        if (owner[r] && pick.id < 0 && u[r] < cum) pick = last;
      }
      if (owner[r] && pick.id < 0) pick = last;
    }
  }

 private:
  const float* raw(size_t r) const { return logits_.ptr<float>() + r * size_t(local_); }
  const Tensor& logits_;
  int64_t first_, local_;
  std::vector<std::vector<float>> work_;  // [row]: adjusted logits
};

}  // namespace

void CpuBackend::sample_vocab_parallel(const Tensor& logits, int64_t first, int64_t vocab_total,
                                       std::span<const SampleRow> rows, std::span<const PenaltyToken> penalties,
                                       Communicator& comm, std::vector<SampleResult>& out) {
  RF_CHECK(logits.type == DType::F32 && logits.rows() >= int64_t(rows.size()) && first >= 0 &&
               first + logits.cols() <= vocab_total,
           "cpu sample_vocab_parallel: bad shapes");
  CpuShardOps ops(logits, first, rows.size());
  rf::sample_vocab_parallel(ops, vocab_total, rows, penalties, comm, out);
}

}  // namespace rf
