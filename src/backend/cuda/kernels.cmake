# The GPU kernel sources: compiled by nvcc in the cuda preset and by hipcc in
# the hip preset — one list, so both builds always cover the same kernels.
# One file per op family (each file's header comment says what it owns).
set(RF_GPU_KERNELS
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/gemv.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/gemm_mma.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/gemm_tiled.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/dequant.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/norm.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/elementwise.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/rope_kv.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention_prefill.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/attention_decode.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/moe.cu
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/sample.cu)
