// host_call_post and host_call_wait (host_handoff.cuh). One block each:
// a decode step hands over one row of activations (4 KB at d = 2048), and
// the bus, not the kernel, sets the pace. Stores to mapped host memory
// are posted writes; __threadfence_system orders the data before the
// mailbox's words as the host sees them. The wait polls with volatile
// loads, which go to host memory every time.
#include "backend/cuda/moe/host_handoff.cuh"

namespace rf::gpu {
namespace {

constexpr int kThreads = 1024;

__global__ void __launch_bounds__(kThreads)
    host_call_post_kernel(HostHandoff h, const uint16_t* x, int n_x, const int32_t* ids, const float* weights,
                          int n_k, uint64_t job) {
  pdl_wait();
  pdl_trigger();
  for (int i = threadIdx.x; i < n_x; i += blockDim.x) h.x[i] = x[i];
  for (int i = threadIdx.x; i < n_k; i += blockDim.x) {
    h.ids[i] = ids[i];
    h.weights[i] = weights[i];
  }
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t call = load_past_l1(h.calls) + 1;
    *h.calls = call;
    volatile HostMailbox* mb = h.mailbox;
    mb->job = job;
    __threadfence_system();
    mb->request = call;
    __threadfence_system();
  }
}

__global__ void __launch_bounds__(kThreads) host_call_wait_kernel(HostHandoff h, uint16_t* out, int n_out) {
  pdl_wait();
  // The next kernel's blocks may start (and wait in their own pdl_wait)
  // while this one polls.
  pdl_trigger();
  if (threadIdx.x == 0) {
    const uint32_t call = load_past_l1(h.calls);
    const volatile HostMailbox* mb = h.mailbox;
    while (mb->done != call && mb->abort == 0) {
    }
    __threadfence_system();
  }
  __syncthreads();
  const volatile uint16_t* src = h.out;
  for (int i = threadIdx.x; i < n_out; i += blockDim.x) out[i] = src[i];
}

}  // namespace

void host_call_post(const HostHandoff& h, const void* x, int n_x, const int32_t* ids, const float* weights, int n_k,
                    uint64_t job, const LaunchCtx& ctx) {
  launch(host_call_post_kernel, dim3(1), dim3(kThreads), 0, ctx, h, static_cast<const uint16_t*>(x), n_x, ids, weights,
         n_k, job);
}

void host_call_wait(const HostHandoff& h, void* out, int n_out, const LaunchCtx& ctx) {
  launch(host_call_wait_kernel, dim3(1), dim3(kThreads), 0, ctx, h, static_cast<uint16_t*>(out), n_out);
}

}  // namespace rf::gpu
