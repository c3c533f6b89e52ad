// The two kernels between a host-expert layer's GPU work and the host's
// cores (host_experts.h): host_call_post writes the layer's activations,
// chosen ids and weights into mapped host memory and rings the mailbox
// with the call's number; host_call_wait polls the mailbox until the host
// has answered that number, then copies the results from mapped host
// memory into the device tensor. Both are ordinary kernels of the stream,
// so decode steps capture them into graphs, and no host function, copy
// engine or runtime call sits between the GPU and the host's threads: a
// hand-off costs a few trips over the bus.
#pragma once

#include <cstdint>

#include "backend/cuda/gpu.h"

namespace rf::gpu {

// Mapped, page-locked host memory (under unified addressing the host's
// pointer is the device's). Each word on its own cache line: the GPU
// writes `request`, the host `done`.
struct HostMailbox {
  alignas(64) uint32_t request;  // GPU -> host: the number of the call whose inputs are in place
  alignas(64) uint64_t job;      // GPU -> host: that call's job (the host's pointer, as the kernel was given it)
  alignas(64) uint32_t done;     // host -> GPU: the number of the call whose results are in place
  alignas(64) uint32_t abort;    // host -> GPU: nonzero releases a waiting kernel (teardown)
};

struct HostHandoff {
  HostMailbox* mailbox = nullptr;  // mapped host memory
  uint32_t* calls = nullptr;       // device memory: the calls posted so far (stream order)
  uint16_t* x = nullptr;           // mapped host memory: the f16 activations [n, d]
  int32_t* ids = nullptr;          // mapped: the chosen experts [n, k]
  float* weights = nullptr;        // mapped: their weights [n, k]
  const uint16_t* out = nullptr;   // mapped: the host's f16 results [n, d]
};

// Posts call number calls + 1 for `job`: x (n_x f16 values), ids and
// weights (n_k each) copied out, then the mailbox rung.
void host_call_post(const HostHandoff& h, const void* x, int n_x, const int32_t* ids, const float* weights, int n_k,
                    uint64_t job, const LaunchCtx& ctx);
// Waits until the host has answered the last posted call (or abort), then
// copies n_out f16 results into out (device memory).
void host_call_wait(const HostHandoff& h, void* out, int n_out, const LaunchCtx& ctx);

}  // namespace rf::gpu
