# The GPU kernel sources: compiled by nvcc in the cuda preset and by hipcc in
# the hip preset — one list, so both builds always cover the same kernels.
set(RF_GPU_KERNELS
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/matmul_mma.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/elementwise.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/rope_kv.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/sample.cu)
