// RF_HOST_DEVICE: marks inline functions that host code and GPU kernels
// (CUDA or HIP) share, so one definition serves both.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define RF_HOST_DEVICE __host__ __device__
#else
#define RF_HOST_DEVICE
#endif
