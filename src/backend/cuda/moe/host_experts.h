// Experts in host memory (--cpu-moe, --n-cpu-moe): the FFNs of a layer's
// routed experts run on the host's cores while the router, attention and
// everything else stay on the GPU. One moe_ffn of such a layer is, in the
// stream's order: the normed activations, the chosen ids and their weights
// copied to pinned host buffers; a host function (gpuLaunchHostFunc) that
// runs the CPU backend's expert FFN (cpu::moe_ffn, 8-bit activations and
// integer dot products) over them on a thread pool; the result copied back
// into `out`. Nothing waits on the host thread that enqueues, so steps stay
// asynchronous and decode steps capture into graphs (a host node between
// two copies).
//
// A host function reads its call's shape from a Job. Jobs recorded into a
// graph are one per (layer, token count), made at capture and read at every
// replay; eager calls use one Job per layer, rewritten only after the
// previous call of that layer has run (each Job says whether its call is
// pending). The pinned buffers are shared by all layers: their calls run in
// stream order. An error inside a host function (an expert id out of
// range) is kept and thrown by the backend's next moe_ffn, synchronize or
// copy to the host.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"

namespace rf::gpu {

class HostExperts {
 public:
  // Buffers for up to limits.max_tokens tokens of the limits' expert shape;
  // n_threads host threads (0: one per core).
  HostExperts(const BackendLimits& limits, size_t n_threads);
  ~HostExperts();
  HostExperts(const HostExperts&) = delete;
  HostExperts& operator=(const HostExperts&) = delete;

  // Enqueues out = moe_ffn(x, ids, weights) on `stream` for experts whose
  // tensors are host memory (x and out f16 on the device, ids i32 and
  // weights f32 on the device). `capturing`: the stream is recording a graph.
  void run(void* stream, bool capturing, const Tensor& x, const Tensor& ids, const Tensor& weights,
           const ExpertWeights& w, const MoeParams& p, Tensor& out);
  // Waits for `stream` without spinning (a blocking-sync event): the
  // waiting thread leaves its core to the pool, whose threads would
  // otherwise share the cores with it. Then check().
  void wait(void* stream);
  // Throws the first error a host function met since the last check.
  void check();
  size_t threads() const { return pool_.size(); }

 private:
  struct Job {
    HostExperts* owner = nullptr;
    ExpertWeights w;
    MoeParams p;
    int64_t n = 0, d = 0;
    std::atomic<bool> pending{false};
  };
  static void host_fn(void* job);
  void compute(Job& j);

  int64_t max_tokens_, n_embd_, n_used_;
  ThreadPool pool_;
  cpu::MoeScratch scratch_;
  const cpu::KernelSet& kernels_;
  // Pinned: the device's f16 activations in, ids, weights; f16 results out.
  uint16_t* x_pin_ = nullptr;
  int32_t* ids_pin_ = nullptr;
  float* weights_pin_ = nullptr;
  uint16_t* out_pin_ = nullptr;
  void* done_event_ = nullptr;  // gpuEvent_t, blocking sync
  std::vector<float> x_f32_, out_f32_;  // the CPU's f32 rows
  std::map<const void*, std::unique_ptr<Job>> eager_jobs_;                    // by the layer's gate weights
  std::map<std::pair<const void*, int64_t>, std::unique_ptr<Job>> graph_jobs_;  // by layer and token count
  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace rf::gpu
