# The GPU backend's sources, shared by the CUDA build (src/backend/cuda) and
# the HIP build (src/backend/hip) — one list each, so both vendors always
# build the same backend:
#  - RF_GPU_KERNELS: the kernel sources (nvcc / hipcc), one file per op
#    family (each file's header comment says what it owns);
#  - RF_GPU_HOST_SOURCES: the backend's host side (the C++ compiler, against
#    the vendor runtime through gpu.h);
#  - the BLAS wrapper is per build: blas_cublas.cpp (CUDA), blas_tiled.cpp
#    (HIP, and CUDA with ROCMFORGE_PORTABLE_KERNELS).
set(RF_GPU_KERNELS
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/gemv.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/gemv_stream.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/gemm_mma.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/gemm_wgmma.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/gemm_tiled.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/dequant.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul_fp8.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/norm.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/elementwise.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/rope_kv.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention_prefill.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention_decode.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/moe.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/moe_down.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/sample.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/sample_shard.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/peer_all_reduce.cu)
set(RF_GPU_HOST_SOURCES
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/cuda_backend.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/cuda_moe.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/cuda_sample_parallel.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/nccl_comm.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/peer_all_reduce.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/cuda_options.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/op_profiler.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/bandwidth_probe.cpp)
