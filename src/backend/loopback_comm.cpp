// In-process collectives for CPU ranks (see loopback_comm.h).
#include "backend/loopback_comm.h"

#include <cstring>

#include "core/error.h"
#include "core/spin_wait.h"

namespace rf {

class LoopbackComm final : public Communicator {
 public:
  LoopbackComm(LoopbackGroup& g, int32_t rank) : g_(g), rank_(rank) {}
  int32_t rank() const override { return rank_; }
  int32_t size() const override { return g_.size_; }

  void all_reduce_sum(Tensor& x) override {
    RF_CHECK(x.type == DType::F32 && x.device == DeviceKind::CPU, "loopback all_reduce: f32 host tensors only, not ",
             dtype_name(x.type));
    const size_t n = size_t(x.numel());
    if (sum_.size() < n) sum_.resize(n);  // grows to the largest reduction once
    g_.posted_[size_t(rank_)] = x.data;
    g_.barrier();
    std::memcpy(sum_.data(), g_.posted_[0], n * sizeof(float));
    for (int32_t r = 1; r < g_.size_; ++r) {
      const float* y = static_cast<const float*>(g_.posted_[size_t(r)]);
      for (size_t i = 0; i < n; ++i) sum_[i] += y[i];
    }
    g_.barrier();  // every rank has read every input: each may now overwrite its own
    std::memcpy(x.data, sum_.data(), n * sizeof(float));
  }

  void all_gather_host(const void* in, size_t bytes, void* out) override {
    g_.posted_[size_t(rank_)] = in;
    g_.barrier();
    for (int32_t r = 0; r < g_.size_; ++r)
      std::memcpy(static_cast<uint8_t*>(out) + size_t(r) * bytes, g_.posted_[size_t(r)], bytes);
    g_.barrier();
  }

  void abort() override { g_.abort(); }

 private:
  LoopbackGroup& g_;
  int32_t rank_;
  std::vector<float> sum_;
};

LoopbackGroup::LoopbackGroup(int32_t size) : size_(size), posted_(size_t(size), nullptr) {
  RF_CHECK(size >= 1 && size <= 64, "tensor parallel: bad group size ", size);
  for (int32_t r = 0; r < size; ++r) comms_.push_back(std::make_unique<LoopbackComm>(*this, r));
}

void LoopbackGroup::barrier() {
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) throw CollectiveAborted();
  const uint64_t gen = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  wait_spinning(lock, cv_, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) throw CollectiveAborted();
}

void LoopbackGroup::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

}  // namespace rf
