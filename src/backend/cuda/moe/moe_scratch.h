// The CUDA backend's mixture-of-experts workspace (CudaBackend::MoeScratch),
// sized by reserve() for one chunk of tokens: the pairs' order, the expert
// tiles, the gathered activations and the experts' intermediate outputs;
// and, for experts kept in host memory, the host side (host_experts.h) and
// the device copy large batches run on.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/moe/host_experts.h"

namespace rf {

struct CudaBackend::MoeScratch {
  int chunk_tokens = 0;  // tokens per pass of moe_ffn (larger batches loop)
  int max_pairs = 0;     // chunk_tokens * experts used
  int32_t* order = nullptr;       // [max_pairs] position -> pair
  int32_t* pos_of = nullptr;      // [max_pairs] pair -> position
  int32_t* tiles_gemv = nullptr;  // int4 tiles of <= 8 rows
  int32_t* tiles_mma = nullptr;   // int4 tiles of <= 64 rows
  int32_t* n_tiles = nullptr;     // [2]
  unsigned* router_ticket = nullptr;  // zero between launches (gpu::moe_router_route)
  void* xs = nullptr;             // f16 [max_pairs, n_embd]: activations in expert order
  void* h = nullptr;              // f16 [max_pairs, expert_ff]: act(gate) * up (gate alone on the MMA path)
  void* u = nullptr;              // f16 [max_pairs, expert_ff]: up (MMA path)
  float* y = nullptr;             // f32 [max_pairs, n_embd]: each pair's expert output
  // The plan in order/pos_of/tiles: the ids a one-token routing wrote it
  // for (null: moe_ffn's own), and the number of plan writes so far, which
  // the routing's Handoff carries to moe_ffn.
  const void* plan_ids = nullptr;
  uint64_t plan_version = 0;
  // Layers whose experts are in host memory run them here (null: none is),
  // or, for batches of Tuning::host_experts_upload_tokens tokens and more,
  // copy them into host_copy first (BackendLimits::host_expert_bytes) and
  // run them on the device.
  std::unique_ptr<gpu::HostExperts> host;
  void* host_copy = nullptr;
  uint64_t host_copy_bytes = 0;
};

}  // namespace rf
