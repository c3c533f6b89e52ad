// CudaOptions: what the caller of the CUDA backend chooses — the device,
// the sizes of its scratch buffers, CUDA graphs, per-op timing — and, for
// tests that compare kernel variants, an adjustment of the tuning the
// backend takes from its device's row of the tuning table (tuning.h). The
// backend adds the environment switches (core/env.h) once, in its
// constructor: ROCMFORGE_PROFILE turns profiling on, ROCMFORGE_FUSIONS and
// ROCMFORGE_KERNELS_OFF switch parts of the tuning off after `tune`.
#pragma once

#include <cstddef>
#include <functional>

#include "backend/cuda/tuning.h"

namespace rf {

struct CudaOptions {
  int device = 0;
  // Cap of the scratch that large-batch matmuls on quantized weights
  // dequantize row chunks into (and the FP8 and tensor-core GEMMs' partials
  // and activations use).
  size_t dequant_scratch_bytes = size_t(256) << 20;
  // Decode attention's most split-K slices (their partials' scratch).
  int max_attention_splits = 32;
  bool graphs = true;
  // Host threads for experts kept in host memory (0: one per core).
  size_t host_threads = 0;
  // Per-op GPU times (op_profiler.h); CUDA graphs are off while profiling.
  bool profile = false;
  // Applied to the device's tuning (tuning_for) before the environment
  // switches; empty: the table's values.
  std::function<void(gpu::Tuning&)> tune;
};

}  // namespace rf
