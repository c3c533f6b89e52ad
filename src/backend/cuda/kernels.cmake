# The GPU backend's sources, shared by the CUDA build (src/backend/cuda) and
# the HIP build (src/backend/hip) — one list each, so both vendors always
# build the same backend:
#  - RF_GPU_KERNELS: the kernel sources (nvcc / hipcc), in a folder per op
#    family (each file's header comment says what it owns);
#  - RF_GPU_HOST_SOURCES: the backend's host side (the C++ compiler, against
#    the vendor runtime through gpu.h): the backend class at the top, each
#    family's ops in its folder's cuda_<family>.cpp;
#  - the BLAS wrapper is per build: blas_cublas.cpp (CUDA), blas_tiled.cpp
#    (HIP, and CUDA with ROCMFORGE_PORTABLE_KERNELS).
set(RF_GPU_KERNELS
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul/gemv.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul/gemv_stream.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul/gemv_stream_grid.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul/gemm_mma.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul/gemm_wgmma.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul/gemm_tiled.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul/dequant.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul/matmul_fp8.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/norm/norm.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/elementwise/elementwise.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/rope/rope_kv.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention/attention.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention/attention_prefill.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention/attention_decode.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention/attention_combine.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention/attention_mla.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/moe/moe.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/moe/moe_down.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/moe/host_handoff.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/deltanet/conv1d.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/deltanet/delta_rule.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/deltanet/gating.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/sample/sample.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/sample/sample_shard.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/collective/peer_all_reduce.cu)
set(RF_GPU_HOST_SOURCES
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/cuda_backend.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/cuda_step.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/tuning.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/op_profiler.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/bandwidth_probe.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul/cuda_matmul.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul/cuda_matmul_fused.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/norm/cuda_norm.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/elementwise/cuda_elementwise.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/rope/cuda_rope.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention/cuda_attention.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/moe/cuda_moe.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/moe/host_experts.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/deltanet/cuda_deltanet.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/sample/cuda_sample.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/sample/cuda_sample_parallel.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/collective/nccl_comm.cpp
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/collective/peer_all_reduce.cpp)
