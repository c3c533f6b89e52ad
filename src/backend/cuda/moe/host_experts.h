// Experts in host memory (--cpu-moe, --n-cpu-moe): the FFNs of a layer's
// routed experts run on the host's cores while the router, attention and
// everything else stay on the GPU. One moe_ffn of such a layer is two
// kernels in the stream (host_handoff.cuh): the first writes the normed
// activations, the chosen ids and their weights into mapped host memory
// and rings a mailbox; a host thread of this class, polling the mailbox,
// runs the CPU backend's expert FFN (cpu::moe_ffn, 8-bit activations and
// integer dot products) over them on a thread pool it leads, writes the
// results back and answers; the second kernel waits for the answer and
// copies the results into `out`. Nothing waits on the host thread that
// enqueues, so steps stay asynchronous and decode steps capture into
// graphs.
//
// The serving thread polls while steps are coming: for kSpin after its
// last call or after arm() (which each enqueued call and each graph launch
// call); then it sleeps, looking again every kSleepPoll or at the next
// arm().
//
// The kernel tells the host thread its call's Job. Jobs recorded into a
// graph are one per (layer, token count), made at capture and read at
// every replay; eager calls use one Job per layer, rewritten only after
// the previous call of that layer has been served (each Job says whether
// its call is pending). The mapped buffers are shared by all layers: their
// calls run in stream order, one at a time. An error inside a call (an
// expert id out of range) answers with zeros; it is kept and thrown by the
// backend's next moe_ffn, synchronize or copy to the host.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/moe/host_handoff.cuh"
#include "core/thread_pool.h"

namespace rf::gpu {

class HostExperts {
 public:
  // How long the serving thread polls after its last call or arm().
  static constexpr std::chrono::milliseconds kSpin{3};
  // How often a sleeping serving thread looks at the mailbox.
  static constexpr std::chrono::milliseconds kSleepPoll{2};

  // Buffers for up to limits.max_tokens tokens of the limits' expert shape;
  // n_threads host threads (0: one per core), the serving thread one of
  // them. `stream`: the stream of every call (the destructor waits for it).
  HostExperts(const BackendLimits& limits, size_t n_threads, void* stream);
  ~HostExperts();
  HostExperts(const HostExperts&) = delete;
  HostExperts& operator=(const HostExperts&) = delete;

  // Enqueues out = moe_ffn(x, ids, weights) on ctx's stream for experts
  // whose tensors are host memory (x and out f16 on the device, ids i32 and
  // weights f32 on the device). `capturing`: the stream is recording a graph.
  void run(const LaunchCtx& ctx, bool capturing, const Tensor& x, const Tensor& ids, const Tensor& weights,
           const ExpertWeights& w, const MoeParams& p, Tensor& out);
  // Work is coming: the serving thread polls from now on (for kSpin).
  void arm();
  // Waits for the stream without spinning (a blocking-sync event): the
  // waiting thread leaves its core to the pool, whose threads would
  // otherwise share the cores with it. Then check().
  void wait();
  // Throws the first error a served call met since the last check.
  void check();
  size_t threads() const { return pool_.size(); }

 private:
  struct Job {
    ExpertWeights w;
    MoeParams p;
    int64_t n = 0, d = 0;
    std::atomic<bool> pending{false};
  };
  void serve();           // the serving thread
  void answer(Job& j);    // one call: compute, or zeros and the error kept
  void compute(Job& j);

  int64_t max_tokens_, n_embd_, n_used_;
  void* stream_;
  ThreadPool pool_;
  cpu::MoeScratch scratch_;
  const cpu::KernelSet& kernels_;
  // Mapped host memory: the mailbox; the device's f16 activations in, ids,
  // weights; f16 results out. calls_dev_: device memory (host_handoff.cuh).
  HostMailbox* mailbox_ = nullptr;
  uint16_t* x_pin_ = nullptr;
  int32_t* ids_pin_ = nullptr;
  float* weights_pin_ = nullptr;
  uint16_t* out_pin_ = nullptr;
  uint32_t* calls_dev_ = nullptr;
  void* done_event_ = nullptr;  // gpuEvent_t, blocking sync
  std::vector<float> x_f32_, out_f32_;  // the CPU's f32 rows
  std::map<const void*, std::unique_ptr<Job>> eager_jobs_;                    // by the layer's gate weights
  std::map<std::pair<const void*, int64_t>, std::unique_ptr<Job>> graph_jobs_;  // by layer and token count
  std::mutex error_mu_;
  std::exception_ptr error_;
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  bool woken_ = false;  // under wake_mu_
  std::atomic<bool> stop_{false};
  std::thread server_;  // last: starts once everything above is in place
};

}  // namespace rf::gpu
