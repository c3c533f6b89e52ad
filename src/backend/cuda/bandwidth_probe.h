// The device-to-device copy bandwidth probe behind
// Backend::measure_copy_bandwidth(): the memory roofline that benchmarks
// report their kernels against.
#pragma once

#include <cstddef>

#include "backend/cuda/gpu.h"

namespace rf::gpu {

// Copies `bytes` between the device buffers a and b (both that large) `reps`
// times on stream s after one warm-up copy, timed with events; returns the
// bytes read plus written per second.
double copy_bandwidth(void* a, void* b, size_t bytes, int reps, gpuStream_t s);

}  // namespace rf::gpu
