// CudaBackend::Impl: the backend's device buffers and handles, shared by
// its source files (cuda_backend.cpp and cuda_step.cpp own their life; the
// op files of each family read them). Private to src/backend/cuda.
#pragma once

#include <memory>
#include <unordered_map>
#include <utility>

#include "backend/cuda/attention/attention.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gpu.h"
#include "backend/cuda/matmul/blas.h"
#include "backend/cuda/op_profiler.h"
#include "backend/cuda/sample/sample.cuh"

namespace rf {

// The backend's stream as the vendor's type.
inline gpuStream_t as_stream(void* s) { return static_cast<gpuStream_t>(s); }
// Times one op when profiling (op_profiler.h).
using OpTimer = gpu::OpProfiler::Scope;

// Largest batch the packed q/k/v matmul takes (CudaBackend::packed_matmul):
// batched decode; past it the three matmuls are large enough on their own.
constexpr int kPackedQkvMaxRows = 256;

struct CudaBackend::Impl {
  std::unique_ptr<gpu::OpProfiler> profiler;  // with CudaOptions::profile
  // What the 8-bit activation buffer holds (LaunchCtx::act_q8_record).
  gpu::ActQ8Record act_q8;
  std::unique_ptr<gpu::Blas> blas;
  void* blas_workspace = nullptr;
  void* staging = nullptr;  // pinned, for weight uploads
  // Step metadata: fixed offsets (in int32) into one device buffer. The KV
  // groups' slot mappings lie at off_slots + g * max_tokens; their block
  // tables end to end from off_tables, n_seqs * max_blocks_per_seq each (a
  // captured graph fixes n_seqs, its bucket, so its pointers stay valid).
  int32_t* meta_dev = nullptr;
  int32_t* meta_host = nullptr;  // pinned
  size_t off_tokens = 0, off_pos = 0, off_slots = 0, off_tseq = 0, off_starts = 0, off_ctx = 0, off_state = 0, off_logits = 0,
         off_tiles = 0, off_qsplits = 0, off_decode = 0, off_split = 0, off_tables = 0, meta_ints = 0;
  gpuEvent_t meta_copied = nullptr;
  // How a step's prefill query tiles are planned (query_tiles.h): for the
  // tensor-core kernel, its key tile, blocks per tile and the GPU's slots.
  TileBalance tile_balance;
  std::vector<TileSpan> tile_spans;  // upload_step's (kept: no allocation per step)
  QueryTilePlan tile_plan;
  // Sampling.
  gpu::SampleRowDevice* rows_dev = nullptr;
  gpu::SampleRowDevice* rows_host = nullptr;
  PenaltyToken* pen_dev = nullptr;
  PenaltyToken* pen_host = nullptr;
  size_t pen_capacity = 0;
  uint32_t* mask_dev = nullptr;  // allowed-token masks of the step's rows
  uint32_t* mask_host = nullptr;  // pinned
  size_t mask_words = 0;         // per row
  float* sample_work = nullptr;
  gpu::SampleOutDevice* out_dev = nullptr;
  gpu::SampleOutDevice* out_host = nullptr;
  // Vocabulary-parallel sampling (tensor-parallel ranks): gpu::ShardLayout
  // in device memory and in pinned host memory.
  void* shard_dev = nullptr;
  void* shard_host = nullptr;
  // Matmul scratch for quantized weights in large batches.
  void* dequant = nullptr;
  size_t dequant_bytes = 0;
  // Packed q/k/v weights' matmul output before its split (CudaBackend::
  // packed_matmul): up to kPackedQkvMaxRows rows of q + k + v columns.
  void* packed_out = nullptr;
  size_t packed_bytes = 0;
  gpu::AttentionScratch attn;
  std::unordered_map<uint64_t, std::pair<gpuGraph_t, gpuGraphExec_t>> graphs;
};

}  // namespace rf
