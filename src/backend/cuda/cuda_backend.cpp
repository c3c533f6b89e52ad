// CudaBackend: construction (the device's tuning and the environment's
// switches, once; the device's one-time kernel setup), device memory and
// weight uploads, and
// CUDA graphs. The ops live with their families (matmul/, attention/,
// norm/, rope/, elementwise/, moe/, sample/: cuda_<family>.cpp), the
// per-step buffers and upload in cuda_step.cpp. Per-op timing is
// op_profiler.h's, the copy-bandwidth probe bandwidth_probe.h's.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cuda/attention/attention.cuh"
#include "backend/cuda/bandwidth_probe.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/gpu.h"
#include "backend/cuda/matmul/blas.h"
#include "backend/cuda/matmul/matmul.cuh"
#include "backend/cuda/moe/moe_scratch.h"
#include "backend/cuda/op_profiler.h"
#include "core/env.h"
#include "core/log.h"

namespace rf {

namespace gpu {
void throw_gpu_error(gpuError_t err, const char* what, const char* file, int line) {
  fail("GPU error '", gpuGetErrorString(err), "' in ", what, " at ", file, ":", line);
}
}  // namespace gpu

namespace {
constexpr size_t kStagingBytes = size_t(64) << 20;
}  // namespace

gpu::LaunchCtx CudaBackend::ctx() const {
  return {as_stream(stream_), tuning_, warp_size_, act_q8_, &impl_->act_q8, nullptr, false, n_sms_};
}

gpu::LaunchCtx CudaBackend::ctx_reading(const Tensor& x, const Handoff& x_in, const char* op) const {
  gpu::LaunchCtx c = ctx();
  if (x_in.copy == 0) return c;
  const gpu::ActQ8Record& r = impl_->act_q8;
  RF_CHECK(x_in.data == x.data && x_in.copy == r.version && r.src == x.data, op,
           ": handed 8-bit activations that were overwritten since (a Handoff given to another op than its reader)");
  c.act_q8_handed = x.data;
  return c;
}

gpu::LaunchCtx CudaBackend::ctx_producing() const {
  gpu::LaunchCtx c = ctx();
  c.act_q8_produce = q8_readers_;
  return c;
}

uint64_t CudaBackend::act_q8_version() const { return impl_->act_q8.version; }

Handoff CudaBackend::act_q8_handoff(const Tensor& t, uint64_t since, const gpu::LaunchCtx& c) const {
  const gpu::ActQ8Record& r = impl_->act_q8;
  const bool wrote = r.version != since, kept = !wrote && c.act_q8_handed == t.data;
  if (!r.src || r.src != t.data || !(wrote || kept)) return {};
  Handoff h;
  h.data = t.data;
  h.copy = r.version;
  return h;
}

void CudaBackend::forget_act_q8() {
  // Memory copied, allocated or freed, or a graph launched, outside any op:
  // whatever row act_q8 holds may have changed.
  impl_->act_q8 = {nullptr, 0, impl_->act_q8.version + 1};
}

const char* CudaBackend::vendor() { return RF_GPU_VENDOR; }

int CudaBackend::device_count() {
  int n = 0;
  if (gpuGetDeviceCount(&n) != gpuSuccess) {
    (void)gpuGetLastError();
    return 0;
  }
  return n;
}

CudaBackend::CudaBackend(const CudaOptions& options) : options_(options), impl_(std::make_unique<Impl>()) {
  const Env& switches = env();  // read and checked once (a bad value throws)
  options_.profile = options_.profile || switches.profile;
  RF_CHECK(device_count() > options.device, "no ", vendor(), " device ", options.device, " (", device_count(),
           " found)");
  RF_GPU_CHECK(gpuSetDevice(options.device));
  // One-time setup of this device for the kernels (shared-memory opt-ins),
  // before any launch. Idempotent: another backend on the device repeats it.
  gpu::gemv_device_setup();
  gpu::mma_device_setup();
  gpu::wgmma_device_setup();
  gpu::attention_device_setup();
  gpuDeviceProp prop;
  RF_GPU_CHECK(gpuGetDeviceProperties(&prop, options.device));
  name_ = str(vendor(), ":", options.device, " (", prop.name, ", ", prop.multiProcessorCount, " SMs, ",
              double(prop.totalGlobalMem) / (1 << 30), " GiB, warp ", prop.warpSize, ")");
  warp_size_ = prop.warpSize;
  // The device's tuning: its row of the table, the caller's adjustment,
  // then the environment's switches.
  gpu::DeviceTraits traits;
#ifdef RF_HIP
  traits.amd = true;
#endif
  traits.cc_major = prop.major;
  traits.cc_minor = prop.minor;
  traits.n_sms = prop.multiProcessorCount;
  traits.warp_size = prop.warpSize;
  tuning_ = gpu::tuning_for(traits);
  if (options_.tune) options_.tune(tuning_);
  gpu::apply_switches(switches, tuning_);
  gpuStream_t s;
  RF_GPU_CHECK(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
  stream_ = s;
  RF_GPU_CHECK(gpuEventCreate(&impl_->meta_copied));
  RF_GPU_CHECK(gpuHostAlloc(&impl_->staging, kStagingBytes, gpuHostAllocDefault));
  if (gpu::Blas::workspace_bytes() > 0) impl_->blas_workspace = alloc(gpu::Blas::workspace_bytes(), "BLAS workspace");
  if (tuning_.kq_stream_rows > 0 || tuning_.kq_stream_q6k_rows > 0)
    act_q8_ = alloc(gpu::act_q8_bytes(), "8-bit activations");
  n_sms_ = prop.multiProcessorCount;
  if (options_.profile) impl_->profiler = std::make_unique<gpu::OpProfiler>(s);
  impl_->blas = std::make_unique<gpu::Blas>(ctx(), impl_->blas_workspace, gpu::Blas::workspace_bytes());
}

CudaBackend::~CudaBackend() {
  (void)gpuSetDevice(options_.device);
  if (stream_) (void)gpuStreamSynchronize(as_stream(stream_));
  if (moe_) moe_->host.reset();  // its thread and mapped memory, while the stream lives
  impl_->profiler.reset();  // prints the op table
  clear_graphs();
  impl_->blas.reset();
  for (void* p : {static_cast<void*>(impl_->staging), static_cast<void*>(impl_->meta_host),
                  static_cast<void*>(impl_->rows_host), static_cast<void*>(impl_->pen_host),
                  static_cast<void*>(impl_->out_host), static_cast<void*>(impl_->mask_host)})
    if (p) (void)gpuFreeHost(p);
  impl_->meta_host = nullptr;
  for (auto& [p, n] : allocations_) (void)gpuFree(p);
  if (impl_->meta_copied) (void)gpuEventDestroy(impl_->meta_copied);
  if (stream_) (void)gpuStreamDestroy(as_stream(stream_));
}

void* CudaBackend::alloc(size_t bytes, const std::string& what) {
  bind();  // memory and set-up calls bind the device themselves; ops rely on bind_thread()
  RF_CHECK(!capturing_, "cuda: allocation of ", what, " during graph capture");
  forget_act_q8();
  void* p = nullptr;
  // Whole 256-byte units (what the allocator hands out anyway), so that
  // vector reads past a buffer's last element stay inside it (NCCL's LL
  // protocol reads 8-byte words of an f16 tensor of odd length).
  const gpuError_t err = gpuMalloc(&p, std::max<size_t>((bytes + 255) / 256 * 256, 256));
  if (err != gpuSuccess) {
    (void)gpuGetLastError();
    fail("cuda: cannot allocate ", double(bytes) / 1e6, " MB for ", what, " (", double(free_memory()) / 1e6,
         " MB free): ", gpuGetErrorString(err));
  }
  std::lock_guard<std::mutex> lock(alloc_mu_);
  allocations_[p] = bytes;
  allocated_ += bytes;
  return p;
}

void CudaBackend::free(void* p) {
  (void)gpuSetDevice(options_.device);  // (called from destructors: no throw)
  if (!p) return;
  std::lock_guard<std::mutex> lock(alloc_mu_);
  auto it = allocations_.find(p);
  if (it == allocations_.end()) return;
  forget_act_q8();
  (void)gpuStreamSynchronize(as_stream(stream_));
  RF_GPU_CHECK(gpuFree(p));
  allocated_ -= it->second;
  allocations_.erase(it);
}

void CudaBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  bind();
  forget_act_q8();
  // Through the pinned staging buffer, in chunks.
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (size_t done = 0; done < bytes; done += kStagingBytes) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    RF_GPU_CHECK(gpuStreamSynchronize(as_stream(stream_)));  // the staging buffer is free again
    std::memcpy(impl_->staging, s + done, n);
    RF_GPU_CHECK(gpuMemcpyAsync(d + done, impl_->staging, n, gpuMemcpyHostToDevice, as_stream(stream_)));
  }
  RF_GPU_CHECK(gpuStreamSynchronize(as_stream(stream_)));
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  bind();
  RF_GPU_CHECK(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyDeviceToHost, as_stream(stream_)));
  wait_stream();
}

size_t CudaBackend::free_memory() const {
  bind();
  size_t free = 0, total = 0;
  RF_GPU_CHECK(gpuMemGetInfo(&free, &total));
  return free;
}

size_t CudaBackend::total_memory() const {
  bind();
  size_t free = 0, total = 0;
  RF_GPU_CHECK(gpuMemGetInfo(&free, &total));
  return total;
}

Tensor CudaBackend::load_weight(const Tensor& host, const std::string& name) {
  bind();
  Tensor t = host;
  t.data = alloc(host.bytes(), name);
  t.device = DeviceKind::CUDA;
  copy_to_device(t.data, host.data, host.bytes());
  adopt_weight(t);
  return t;
}

void CudaBackend::adopt_weight(const Tensor& w) {
  // A weight whose batch-1 GEMV reads 8-bit activations (dense, or one
  // token's experts): from now on the ops producing a row write its quants.
  const int k = int(std::min<int64_t>(w.cols(), INT32_MAX));
  if (gemv_quantizes_activations(w.type, 1, k) || expert_down_quantizes_activations(w.type, k, 1)) q8_readers_ = true;
}

std::shared_ptr<const void> CudaBackend::pin_host_memory(const void* p, size_t bytes) {
  bind();
  // Read-only: the model file is mapped read-only (registering its pages
  // for writing would fail, or copy them).
  void* q = const_cast<void*>(p);
  const gpuError_t e = gpuHostRegister(q, bytes, gpuHostRegisterPortable | gpuHostRegisterReadOnly);
  if (e != gpuSuccess) {
    (void)gpuGetLastError();  // (clears it)
    log_warn(name_, ": could not page-lock ", bytes >> 20, " MiB of host memory (", gpuGetErrorString(e),
             "); copies from it run at pageable-memory speed");
    return {};
  }
  return std::shared_ptr<const void>(p, [](const void* r) { (void)gpuHostUnregister(const_cast<void*>(r)); });
}

Tensor CudaBackend::load_f32(const float* host, int64_t cols, int64_t rows, const std::string& name) {
  bind();
  Tensor t = make_tensor(alloc(size_t(cols * rows) * 4, name), DType::F32, cols, rows, DeviceKind::CUDA);
  copy_to_device(t.data, host, size_t(cols * rows) * 4);
  return t;
}

void CudaBackend::synchronize() { wait_stream(); }

void CudaBackend::wait_stream() {
  if (moe_ && moe_->host) moe_->host->wait();
  else RF_GPU_CHECK(gpuStreamSynchronize(as_stream(stream_)));
}

void CudaBackend::bind() const { RF_GPU_CHECK(gpuSetDevice(options_.device)); }

void CudaBackend::run_graph(uint64_t key, const std::function<void()>& record) {
  Impl& I = *impl_;
  auto it = I.graphs.find(key);
  // A graph's ops trust no record from before it, nor the ops after it one
  // from inside it.
  forget_act_q8();
  if (it == I.graphs.end()) {
    gpuGraph_t graph;
    gpuGraphExec_t exec;
    RF_GPU_CHECK(gpuStreamBeginCapture(as_stream(stream_), gpuStreamCaptureModeThreadLocal));
    capturing_ = true;
    try {
      record();
    } catch (...) {
      capturing_ = false;
      gpuGraph_t broken = nullptr;
      if (gpuStreamEndCapture(as_stream(stream_), &broken) == gpuSuccess && broken) (void)gpuGraphDestroy(broken);
      (void)gpuGetLastError();
      throw;
    }
    capturing_ = false;
    RF_GPU_CHECK(gpuStreamEndCapture(as_stream(stream_), &graph));
    RF_GPU_CHECK(gpuGraphInstantiate(&exec, graph));
    it = I.graphs.emplace(key, std::make_pair(graph, exec)).first;
  }
  RF_GPU_CHECK(gpuGraphLaunch(it->second.second, as_stream(stream_)));
  if (moe_ && moe_->host) moe_->host->arm();  // the graph may call it
  forget_act_q8();
}

void CudaBackend::clear_graphs() {
  bind();
  for (auto& [k, g] : impl_->graphs) {
    (void)gpuGraphExecDestroy(g.second);
    (void)gpuGraphDestroy(g.first);
  }
  impl_->graphs.clear();
}

double CudaBackend::measure_copy_bandwidth() {
  bind();
  const size_t bytes = size_t(2) << 30;
  void* a = alloc(bytes, "bandwidth test");
  void* b = alloc(bytes, "bandwidth test");
  const double bw = gpu::copy_bandwidth(a, b, bytes, 10, as_stream(stream_));
  free(a);
  free(b);
  return bw;
}

gpu::OpProfiler* CudaBackend::profiler() const { return impl_->profiler.get(); }

}  // namespace rf
