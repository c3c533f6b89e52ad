// gpu::copy_bandwidth: timed device-to-device copies.
#include "backend/cuda/bandwidth_probe.h"

namespace rf::gpu {

double copy_bandwidth(void* a, void* b, size_t bytes, int reps, gpuStream_t s) {
  RF_GPU_CHECK(gpuMemsetAsync(a, 1, bytes, s));
  gpuEvent_t e0, e1;
  RF_GPU_CHECK(gpuEventCreate(&e0));
  RF_GPU_CHECK(gpuEventCreate(&e1));
  RF_GPU_CHECK(gpuMemcpyAsync(b, a, bytes, gpuMemcpyDeviceToDevice, s));  // warm-up
  RF_GPU_CHECK(gpuEventRecord(e0, s));
  for (int i = 0; i < reps; ++i)
    RF_GPU_CHECK(gpuMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, gpuMemcpyDeviceToDevice, s));
  RF_GPU_CHECK(gpuEventRecord(e1, s));
  RF_GPU_CHECK(gpuEventSynchronize(e1));
  float ms = 0;
  RF_GPU_CHECK(gpuEventElapsedTime(&ms, e0, e1));
  (void)gpuEventDestroy(e0);
  (void)gpuEventDestroy(e1);
  return 2.0 * double(bytes) * reps / (double(ms) / 1e3);
}

}  // namespace rf::gpu
