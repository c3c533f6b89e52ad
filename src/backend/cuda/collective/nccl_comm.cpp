// NCCL communicators for GPU ranks, loaded at run time (see nccl_comm.h).
// The few declarations needed are NCCL's published ABI: opaque
// communicator handles, ncclResult_t 0 = success, ncclSum = 0, data types
// ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9.
#include "backend/cuda/collective/nccl_comm.h"

#include <dlfcn.h>

#include <mutex>
#include <shared_mutex>

#include <string>
#include <thread>

#include "backend/cuda/collective/peer_all_reduce.h"
#include "backend/cuda/gpu.h"
#include "backend/cuda/op_profiler.h"
#include "core/error.h"
#include "core/log.h"

namespace rf {

struct NcclGroup::Library {
  using InitAll = int (*)(void** comms, int n, const int* devices);
  using AllReduce = int (*)(const void* send, void* recv, size_t count, int type, int op, void* comm, void* stream);
  using Destroy = int (*)(void* comm);
  using Abort = int (*)(void* comm);
  using ErrorString = const char* (*)(int result);
  using GetVersion = int (*)(int* version);

  void* handle = nullptr;
  InitAll init_all = nullptr;
  AllReduce all_reduce = nullptr;
  Destroy destroy = nullptr;
  Abort abort = nullptr;
  ErrorString error_string = nullptr;
  GetVersion version = nullptr;

  Library() {
    const bool rocm = std::string(CudaBackend::vendor()) == "rocm";
    const char* names[] = {rocm ? "librccl.so.1" : "libnccl.so.2", rocm ? "librccl.so" : "libnccl.so"};
    for (const char* n : names)
      if ((handle = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
    RF_CHECK(handle, "tensor parallelism on GPUs needs ", rocm ? "RCCL (librccl.so.1)" : "NCCL (libnccl.so.2)",
             ", which was not found: put its folder on LD_LIBRARY_PATH (", dlerror(), ")");
    init_all = reinterpret_cast<InitAll>(symbol("ncclCommInitAll"));
    all_reduce = reinterpret_cast<AllReduce>(symbol("ncclAllReduce"));
    destroy = reinterpret_cast<Destroy>(symbol("ncclCommDestroy"));
    abort = reinterpret_cast<Abort>(symbol("ncclCommAbort"));
    error_string = reinterpret_cast<ErrorString>(symbol("ncclGetErrorString"));
    version = reinterpret_cast<GetVersion>(symbol("ncclGetVersion"));
  }
  ~Library() {
    if (handle) dlclose(handle);
  }
  void* symbol(const char* name) {
    void* p = dlsym(handle, name);
    RF_CHECK(p, "the NCCL library has no '", name, "'");
    return p;
  }
  void check(int result, const char* what) const {
    if (result != 0) fail("NCCL ", what, " failed: ", error_string(result));
  }
};

namespace {

class NcclComm final : public Communicator {
 public:
  NcclComm(NcclGroup& group, CudaBackend& backend, Communicator& host, PeerAllReduce* peer, int32_t rank, int32_t size)
      : group_(group), backend_(backend), host_(host), peer_(peer), rank_(rank), size_(size) {}

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return size_; }

  void all_reduce_sum(Tensor& x) override {
    // (Profiled, the time includes waiting for the other ranks.)
    const bool peer = peer_ && peer_->fits(x);
    gpu::OpProfiler::Scope timer(backend_.profiler(), peer ? "all-reduce peer" : "all-reduce nccl");
    if (peer) peer_->run(rank_, x);
    else group_.nccl_all_reduce(rank_, x, backend_.stream());
  }
  bool all_reduce_add_rms_norm(Tensor& partial, Tensor& x, const Tensor* post_norm, const Tensor& w, float eps,
                               Tensor& out) override {
    if (!peer_ || !backend_.tuning().fusions.peer_norm || !peer_->fits_add_rms_norm(partial, x, out)) return false;
    gpu::OpProfiler::Scope timer(backend_.profiler(), post_norm ? "all-reduce peer+post_norm+add+rms_norm"
                                                                : "all-reduce peer+add+rms_norm");
    peer_->run_add_rms_norm(rank_, partial, x, post_norm, w, eps, out);
    return true;
  }
  void all_gather_host(const void* in, size_t bytes, void* out) override { host_.all_gather_host(in, bytes, out); }
  void abort() override { group_.abort(); }

 private:
  NcclGroup& group_;
  CudaBackend& backend_;
  Communicator& host_;
  PeerAllReduce* peer_;  // null: NCCL for every all-reduce
  int32_t rank_, size_;
};

}  // namespace

NcclGroup::NcclGroup(std::span<CudaBackend* const> backends)
    : lib_(std::make_unique<Library>()), host_(int32_t(backends.size())) {
  const int n = int(backends.size());
  std::vector<int> devices;
  for (CudaBackend* b : backends) devices.push_back(b->device_index());
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      RF_CHECK(devices[size_t(i)] != devices[size_t(j)], "tensor parallel: GPU ", devices[size_t(i)],
               " is given to two ranks");
  handles_.resize(size_t(n), nullptr);
  lib_->check(lib_->init_all(handles_.data(), n, devices.data()), "communicator set-up (ncclCommInitAll)");
  int version = 0;
  lib_->version(&version);
  log_info("tensor parallel: ", n, " GPUs joined by NCCL ", version);
  if (backends[0]->tuning().peer_all_reduce) peer_ = PeerAllReduce::create(backends);
  for (int r = 0; r < n; ++r)
    comms_.push_back(std::make_unique<NcclComm>(*this, *backends[size_t(r)], host_.rank(r), peer_.get(), r, n));
  // A first all-reduce on every rank at once, outside any graph capture:
  // NCCL finishes its lazy set-up here rather than inside a captured graph
  // (the warm-up's 4 bytes go through NCCL: the peer kernel takes multiples
  // of 16).
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        CudaBackend& b = *backends[size_t(r)];
        b.bind_thread();
        void* p = b.alloc(sizeof(float), "NCCL warm-up");
        float one = 1.0f;
        b.copy_to_device(p, &one, sizeof(one));
        Tensor t = make_tensor(p, DType::F32, 1, 1, DeviceKind::CUDA);
        comms_[size_t(r)]->all_reduce_sum(t);
        b.copy_to_host(&one, p, sizeof(one));
        b.free(p);
        RF_CHECK(one == float(n), "NCCL warm-up all-reduce gave ", one, ", not ", n);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) RF_CHECK(e.empty(), "tensor parallel: ", e);
}

void NcclGroup::nccl_all_reduce(int32_t r, Tensor& x, void* stream) {
  int type = -1;
  switch (x.type) {
    case DType::F16: type = 6; break;
    case DType::F32: type = 7; break;
    case DType::BF16: type = 9; break;
    default: fail("NCCL all-reduce: ", dtype_name(x.type), " tensors are not supported");
  }
  std::shared_lock<std::shared_mutex> lock(abort_mu_);  // abort() waits for calls in progress
  if (aborted_) throw CollectiveAborted();
  lib_->check(lib_->all_reduce(x.data, x.data, size_t(x.numel()), type, /*ncclSum*/ 0, handles_[size_t(r)], stream),
              "all-reduce");
}

void NcclGroup::abort() {
  host_.rank(0).abort();  // the host exchanges' group (any rank aborts all)
  if (peer_) peer_->abort();
  std::unique_lock<std::shared_mutex> lock(abort_mu_);
  if (aborted_) return;
  aborted_ = true;
  // Releases every rank's queued NCCL work (a peer may wait in it forever
  // otherwise) and frees the communicators; later calls throw above.
  for (void*& h : handles_) {
    if (h) (void)lib_->abort(h);
    h = nullptr;
  }
}

NcclGroup::~NcclGroup() {
  comms_.clear();
  peer_.reset();
  for (void* h : handles_)
    if (h) (void)lib_->destroy(h);
}

}  // namespace rf
