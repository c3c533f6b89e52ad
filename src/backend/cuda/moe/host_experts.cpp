// HostExperts: a host-memory layer's expert FFN between two copies in the
// GPU stream's order (see host_experts.h).
#include "backend/cuda/moe/host_experts.h"

#include <thread>

#include "backend/cpu/cpu_qdot.h"
#include "backend/cuda/gpu.h"
#include "core/error.h"
#include "core/fp16.h"

namespace rf::gpu {

HostExperts::HostExperts(const BackendLimits& lim, size_t n_threads)
    : max_tokens_(lim.max_tokens),
      n_embd_(lim.n_embd),
      n_used_(lim.n_expert_used),
      pool_(n_threads),
      kernels_(cpu::best_kernels()) {
  RF_CHECK(lim.max_tokens > 0 && lim.n_embd > 0 && lim.n_expert_used > 0, "host experts: bad limits");
  scratch_.reserve(lim);
  const size_t rows = size_t(max_tokens_), d = size_t(n_embd_), k = size_t(n_used_);
  RF_GPU_CHECK(gpuHostAlloc(reinterpret_cast<void**>(&x_pin_), rows * d * 2, gpuHostAllocDefault));
  RF_GPU_CHECK(gpuHostAlloc(reinterpret_cast<void**>(&ids_pin_), rows * k * 4, gpuHostAllocDefault));
  RF_GPU_CHECK(gpuHostAlloc(reinterpret_cast<void**>(&weights_pin_), rows * k * 4, gpuHostAllocDefault));
  RF_GPU_CHECK(gpuHostAlloc(reinterpret_cast<void**>(&out_pin_), rows * d * 2, gpuHostAllocDefault));
  x_f32_.resize(rows * d);
  out_f32_.resize(rows * d);
  gpuEvent_t e = nullptr;
  RF_GPU_CHECK(gpuEventCreateWithFlags(&e, gpuEventBlockingSync | gpuEventDisableTiming));
  done_event_ = e;
}

HostExperts::~HostExperts() {
  for (void* p : {static_cast<void*>(x_pin_), static_cast<void*>(ids_pin_), static_cast<void*>(weights_pin_),
                  static_cast<void*>(out_pin_)})
    if (p) (void)gpuFreeHost(p);
  if (done_event_) (void)gpuEventDestroy(static_cast<gpuEvent_t>(done_event_));
}

void HostExperts::wait(void* stream) {
  RF_GPU_CHECK(gpuEventRecord(static_cast<gpuEvent_t>(done_event_), static_cast<gpuStream_t>(stream)));
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

void HostExperts::run(void* stream, bool capturing, const Tensor& x, const Tensor& ids, const Tensor& weights,
                      const ExpertWeights& w, const MoeParams& p, Tensor& out) {
  check();
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
    // The previous call of this layer reads the Job until its host function
    // has run (in practice long done: a step ends by reading its tokens).
    while (job->pending.load(std::memory_order_acquire)) std::this_thread::yield();
    job->pending.store(true, std::memory_order_relaxed);
  }
  job->owner = this;
  job->w = w;
  job->p = p;
  job->n = n;
  job->d = d;
  const gpuStream_t s = static_cast<gpuStream_t>(stream);
  RF_GPU_CHECK(gpuMemcpyAsync(x_pin_, x.data, size_t(n * d) * 2, gpuMemcpyDeviceToHost, s));
  RF_GPU_CHECK(gpuMemcpyAsync(ids_pin_, ids.data, size_t(n * k) * 4, gpuMemcpyDeviceToHost, s));
  RF_GPU_CHECK(gpuMemcpyAsync(weights_pin_, weights.data, size_t(n * k) * 4, gpuMemcpyDeviceToHost, s));
#if defined(RF_HIP)
  // HIP 5.2 has no hipLaunchHostFunc: a stream callback runs the host function.
  RF_GPU_CHECK(hipStreamAddCallback(
      s, [](hipStream_t, hipError_t, void* job) { HostExperts::host_fn(job); }, job, 0));
#else
  RF_GPU_CHECK(gpuLaunchHostFunc(s, &HostExperts::host_fn, job));
#endif
  RF_GPU_CHECK(gpuMemcpyAsync(out.data, out_pin_, size_t(n * d) * 2, gpuMemcpyHostToDevice, s));
}

void HostExperts::host_fn(void* arg) {
  Job& j = *static_cast<Job*>(arg);
  HostExperts& h = *j.owner;
  try {
    h.compute(j);
  } catch (...) {
    // The step's result is zeros; the error reaches the caller at its next
    // check (a host function may not call the runtime or unwind into it).
    std::fill(h.out_pin_, h.out_pin_ + j.n * j.d, uint16_t(0));
    std::lock_guard<std::mutex> lock(h.error_mu_);
    if (!h.error_) h.error_ = std::current_exception();
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
