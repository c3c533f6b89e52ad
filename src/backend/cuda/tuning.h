// The GPU backend's tuning as code: every choice of kernel variant, launch
// shape and fusion that is not the caller's (CudaOptions has those), with
// the values per kind of device in one table (tuning.cpp, tuning_for()).
// Values that scale with the device (its SMs, its warp size) are computed
// from it where they are used, from the table's per-SM and per-warp terms.
// The backend takes the table's row for its device once, at construction,
// then lets the caller adjust it (CudaOptions::tune: tests that compare
// kernel variants) and the environment switch parts off
// (ROCMFORGE_FUSIONS=off, ROCMFORGE_KERNELS_OFF: core/env.h); launchers
// read it through their LaunchCtx (gpu.h).
#pragma once

namespace rf {
struct Env;
}

namespace rf::gpu {

// The fusions: each is one kernel (or one launch, or one allocation) doing
// the work of several; off, the ops run unfused (ROCMFORGE_FUSIONS=off turns
// every one off: none()). Which ops they apply to is decided where each op
// runs; whether they are on, here.
struct Fusions {
  bool act_q8 = false;            // a row's producer (add + RMSNorm, attention combine) writes its 8-bit quants
  bool qk_norm_rope = false;      // per-head q/k RMSNorms inside the RoPE + KV store kernel
  bool moe_router = false;        // one token's MoE router GEMV and routing in one launch
  bool moe_route_plan = false;    // one token's routing also writes its expert plan
  bool moe_down = false;          // one token's expert down GEMVs and their weighted sum in one launch
  bool moe_glu_biased = false;    // one token's biased expert gate and up GEMVs with their GLU in one launch
  bool gemv_multi = false;        // one row by up to three weights of one format in one GEMV launch
  bool gemv_two_formats = false;  // ... and by weights of two k-quant formats in one launch
  bool gemv_glu = false;          // gate and up GEMVs with the GLU in one launch
  bool packed_qkv = false;        // q, k and v weights in one allocation, one matmul for batches
  bool packed_gate_up = false;    // gate and up weights multiplied in one matmul for batches
  bool fold_norm_gains = false;   // norm gains folded into f16 weights; one token's residual add + RMSNorm in the GEMVs
  bool add_norm = false;          // residual add and RMSNorm in one kernel
  bool norm_pair = false;         // the q and k head norms in one launch
  bool peer_norm = false;         // the tensor-parallel peer all-reduce also adds the residual and norms

  static Fusions all();
  static Fusions none() { return {}; }
};

struct Tuning {
  Fusions fusions;
  // Launches: programmatic dependent launches (gpu.h, launch()); the RoPE +
  // KV store kernel triggering the next launch before its own wait.
  bool pdl = false;
  bool pdl_early_rope = false;
  // Batch-1 GEMVs: rows bulk-copied into shared memory (sm_90 TMA), rows per
  // bulk-copying block (0: the rule in gemv.cu), k-quant rows prefetched
  // into L2, short k-quant rows split between row sets of a block's warps.
  bool tma_gemv = false;
  int gemv_tma_rows = 0;
  bool l2_prefetch = false;
  bool gemv_row_sets = false;
  // The streaming k-quant GEMV (gemv_stream.cu): rows per warp for Q4_K
  // (and Q5_K, IQ4_XS and the 32-wide formats when > 0) and for Q6_K (0:
  // the shared-memory GEMV of gemv.cu), warps per row set (0: by row
  // length), the 32-wide block formats (IQ4_NL and MXFP4 among them) streamed, Q4_K loads through L1, one token's
  // expert rows of their own streamed (and short ones in lane groups),
  // lane groups of 16 for unevenly filled rows and for one-chunk expert
  // rows, two chunks loaded before the wait on unevenly filled rows, and
  // unevenly filled Q4_K / Q5_K rows one a warp.
  int kq_stream_rows = 0;
  int kq_stream_q6k_rows = 0;
  int kq_stream_split = 0;
  bool block32_stream = false;
  bool kq_stream_l1 = false;
  bool kq_stream_expert_rows = false;
  bool kq_stream_short_expert_rows = false;
  bool kq_stream_lane_groups = false;
  bool kq_stream_expert_groups = false;
  bool kq_stream_early_two = false;
  bool kq_stream_uneven_one_row = false;
  // Tensor-core GEMMs on quantized weights for batches of 9..this many rows
  // (0: dequantize + BLAS); on Hopper the wgmma kernel where it takes the
  // format, its k range split where that saves more than wgmma_split_cost
  // stage-times, its 16-column variant for launches of up to 16 rows; MoE
  // FFNs on tensor cores once the active experts average more than
  // moe_mma_rows rows.
  int mma_max_rows_quant = 0;
  bool wgmma = false;
  int wgmma_split_cost = 0;
  bool wgmma_narrow = false;
  int moe_mma_rows = 0;
  // Experts in host memory (--cpu-moe): batches of at least this many
  // tokens copy a layer's experts to the device and run them there, outside
  // graphs (0: always on the host's cores).
  int host_experts_upload_tokens = 0;
  // FP8 weights: batches of at least this many rows (and more than the
  // GEMV's 8) on FP8 tensor cores, activations quantized to e4m3 (0: f16
  // activations always).
  int fp8_gemm_min_rows = 0;
  // Prefill attention on tensor cores; split query tiles, at most this many
  // parts a step (0: never split; their partials take this many slots of
  // scratch).
  bool prefill_mma = false;
  int prefill_tile_partials = 0;
  // Decode attention: blocks (tokens x KV heads x key slices) to aim for
  // per SM, keys a slice at least, and the most slices summed by a
  // thread-block cluster of their blocks (0: the combine kernel), for head
  // size 256 apart; a step whose longest context would give each of a
  // cluster's slices more keys than attention_cluster_max_keys takes every
  // slice the target asks for and the combine kernel (another graph).
  int attention_blocks_per_sm = 0;
  int attention_min_split_keys = 0;
  int attention_cluster = 0;
  int attention_cluster_hd256 = 0;
  int attention_cluster_max_keys = 0;
  // Tensor parallelism: small all-reduces through the one-shot peer-memory
  // kernel (else NCCL), which lets the next kernel start as it begins.
  bool peer_all_reduce = false;
  bool peer_early_trigger = false;
};

// What the table is keyed by (gpuDeviceProp).
struct DeviceTraits {
  bool amd = false;
  int cc_major = 0, cc_minor = 0;
  int n_sms = 1;
  int warp_size = 32;
};

// The table's row for this device.
Tuning tuning_for(const DeviceTraits& device);
// The name of that row ("NVIDIA Hopper (sm_90)").
const char* tuning_row(const DeviceTraits& device);
// ROCMFORGE_FUSIONS=off and ROCMFORGE_KERNELS_OFF applied to t.
void apply_switches(const Env& env, Tuning& t);

}  // namespace rf::gpu
