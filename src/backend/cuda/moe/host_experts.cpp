// HostExperts: a host-memory layer's expert FFN, served by a host thread
// between two kernels of the GPU's stream (see host_experts.h).
#include "backend/cuda/moe/host_experts.h"

#include "backend/cpu/cpu_qdot.h"
#include "backend/cuda/gpu.h"
#include "core/error.h"
#include "core/fp16.h"

namespace rf::gpu {
namespace {

template <typename T>
T* host_alloc_mapped(size_t count) {
  void* p = nullptr;
  RF_GPU_CHECK(gpuHostAlloc(&p, count * sizeof(T), gpuHostAllocMapped | gpuHostAllocPortable));
  return static_cast<T*>(p);
}

}  // namespace

HostExperts::HostExperts(const BackendLimits& lim, size_t n_threads, void* stream)
    : max_tokens_(lim.max_tokens),
      n_embd_(lim.n_embd),
      n_used_(lim.n_expert_used),
      stream_(stream),
      pool_(n_threads),
      kernels_(cpu::best_kernels()) {
  RF_CHECK(lim.max_tokens > 0 && lim.n_embd > 0 && lim.n_expert_used > 0, "host experts: bad limits");
  scratch_.reserve(lim);
  const size_t rows = size_t(max_tokens_), d = size_t(n_embd_), k = size_t(n_used_);
  mailbox_ = host_alloc_mapped<HostMailbox>(1);
  *mailbox_ = HostMailbox{};
  x_pin_ = host_alloc_mapped<uint16_t>(rows * d);
  ids_pin_ = host_alloc_mapped<int32_t>(rows * k);
  weights_pin_ = host_alloc_mapped<float>(rows * k);
  out_pin_ = host_alloc_mapped<uint16_t>(rows * d);
  RF_GPU_CHECK(gpuMalloc(reinterpret_cast<void**>(&calls_dev_), sizeof(uint32_t)));
  const uint32_t zero = 0;
  RF_GPU_CHECK(gpuMemcpy(calls_dev_, &zero, sizeof(zero), gpuMemcpyHostToDevice));
  x_f32_.resize(rows * d);
  out_f32_.resize(rows * d);
  gpuEvent_t e = nullptr;
  RF_GPU_CHECK(gpuEventCreateWithFlags(&e, gpuEventBlockingSync | gpuEventDisableTiming));
  done_event_ = e;
  server_ = std::thread([this] { serve(); });
}

HostExperts::~HostExperts() {
  // The calls still in the stream are served (the owner destroys this
  // before its stream); then nothing may wait on the host any more.
  if (stream_) (void)gpuStreamSynchronize(static_cast<gpuStream_t>(stream_));
  std::atomic_ref<uint32_t>(mailbox_->abort).store(1, std::memory_order_release);
  stop_.store(true, std::memory_order_release);
  arm();
  server_.join();
  if (calls_dev_) (void)gpuFree(calls_dev_);
  for (void* p : {static_cast<void*>(mailbox_), static_cast<void*>(x_pin_), static_cast<void*>(ids_pin_),
                  static_cast<void*>(weights_pin_), static_cast<void*>(out_pin_)})
    if (p) (void)gpuFreeHost(p);
  if (done_event_) (void)gpuEventDestroy(static_cast<gpuEvent_t>(done_event_));
}

void HostExperts::arm() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    woken_ = true;
  }
  wake_cv_.notify_one();
}

void HostExperts::wait() {
  RF_GPU_CHECK(gpuEventRecord(static_cast<gpuEvent_t>(done_event_), static_cast<gpuStream_t>(stream_)));
  RF_GPU_CHECK(gpuEventSynchronize(static_cast<gpuEvent_t>(done_event_)));
  check();
}

void HostExperts::check() {
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    e = std::exchange(error_, nullptr);
  }
  if (e) std::rethrow_exception(e);
}

void HostExperts::run(const LaunchCtx& ctx, bool capturing, const Tensor& x, const Tensor& ids,
                      const Tensor& weights, const ExpertWeights& w, const MoeParams& p, Tensor& out) {
  check();
  RF_CHECK(ctx.stream == static_cast<gpuStream_t>(stream_), "host experts: a call on another stream");
  const int64_t n = x.rows(), d = x.cols(), k = p.n_used;
  RF_CHECK(x.type == DType::F16 && out.type == DType::F16 && ids.type == DType::I32 && weights.type == DType::F32 &&
               out.cols() == d && ids.cols() == k && weights.cols() == k,
           "host experts: bad activations");
  RF_CHECK(n <= max_tokens_ && d <= n_embd_ && k <= n_used_, "host experts: ", n, " tokens of ", d, " x ", k,
           " experts exceed the reserved ", max_tokens_, " of ", n_embd_, " x ", n_used_);
  for (const Tensor* t : {&w.gate, &w.up, &w.down})
    RF_CHECK(t->device == DeviceKind::CPU, "host experts: an expert tensor is not in host memory");
  RF_CHECK(!w.has_biases() || (w.gate_bias.device == DeviceKind::CPU && w.up_bias.device == DeviceKind::CPU &&
                               w.down_bias.device == DeviceKind::CPU),
           "host experts: expert biases are not in host memory");
  Job* job;
  if (capturing) {
    auto& slot = graph_jobs_[{w.gate.data, n}];
    if (!slot) slot = std::make_unique<Job>();
    job = slot.get();
  } else {
    auto& slot = eager_jobs_[w.gate.data];
    if (!slot) slot = std::make_unique<Job>();
    job = slot.get();
    // The previous call of this layer reads the Job until it has been
    // served (in practice long done: a step ends by reading its tokens).
    while (job->pending.load(std::memory_order_acquire)) std::this_thread::yield();
    job->pending.store(true, std::memory_order_relaxed);
  }
  job->w = w;
  job->p = p;
  job->n = n;
  job->d = d;
  const HostHandoff h{mailbox_, calls_dev_, x_pin_, ids_pin_, weights_pin_, out_pin_};
  host_call_post(h, x.data, int(n * d), ids.ptr<int32_t>(), weights.ptr<float>(), int(n * k),
                 uint64_t(reinterpret_cast<uintptr_t>(job)), ctx);
  host_call_wait(h, out.data, int(n * d), ctx);
  if (!capturing) arm();
}

void HostExperts::serve() {
  using Clock = std::chrono::steady_clock;
  std::atomic_ref<uint32_t> request(mailbox_->request), done(mailbox_->done);
  std::atomic_ref<uint64_t> job(mailbox_->job);
  uint32_t served = 0;
  Clock::time_point busy = Clock::now();  // the last call or arm()
  for (;;) {
    const uint32_t call = request.load(std::memory_order_acquire);
    if (call != served) {
      answer(*reinterpret_cast<Job*>(uintptr_t(job.load(std::memory_order_acquire))));
      served = call;
      done.store(call, std::memory_order_release);
      busy = Clock::now();
      continue;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    if (Clock::now() - busy < kSpin) {
      cpu_relax();
      continue;
    }
    std::unique_lock<std::mutex> lock(wake_mu_);
    if (wake_cv_.wait_for(lock, kSleepPoll, [&] { return woken_; })) {
      woken_ = false;
      busy = Clock::now();
    }
  }
}

void HostExperts::answer(Job& j) {
  try {
    compute(j);
  } catch (...) {
    // The call's result is zeros; the error reaches the caller at its next
    // check.
    std::fill(out_pin_, out_pin_ + j.n * j.d, uint16_t(0));
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = std::current_exception();
  }
  j.pending.store(false, std::memory_order_release);
}

void HostExperts::compute(Job& j) {
  const int64_t n = j.n, d = j.d, k = j.p.n_used;
  pool_.parallel_for(size_t(n * d), 4096, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) x_f32_[i] = f16_to_f32(x_pin_[i]);
  });
  const Tensor x = make_tensor(x_f32_.data(), DType::F32, d, n);
  const Tensor ids = make_tensor(ids_pin_, DType::I32, k, n);
  const Tensor weights = make_tensor(weights_pin_, DType::F32, k, n);
  Tensor out = make_tensor(out_f32_.data(), DType::F32, d, n);
  cpu::moe_ffn(pool_, x, ids, weights, j.w, j.p, out, scratch_, kernels_);
  pool_.parallel_for(size_t(n * d), 4096, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) out_pin_[i] = f32_to_f16(out_f32_[i]);
  });
}

}  // namespace rf::gpu
