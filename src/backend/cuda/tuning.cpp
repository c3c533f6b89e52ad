// The tuning table (tuning.h): one row per kind of device, first match
// wins. The Hopper row holds the values measured on the H100 and H200
// (docs/PERFORMANCE.md says how to measure a change to them); the other
// rows are not measured and take Hopper's values, the kernel variants a
// device lacks being compiled out of its build (gpu.h: RF_PORTABLE).
#include "backend/cuda/tuning.h"

#include "core/env.h"

namespace rf::gpu {

Fusions Fusions::all() {
  Fusions f;
  f.act_q8 = f.qk_norm_rope = f.moe_router = f.moe_route_plan = f.moe_down = f.moe_glu_biased = f.gemv_multi =
      f.gemv_two_formats = f.gemv_glu = f.packed_qkv = f.packed_gate_up = f.fold_norm_gains = f.add_norm =
          f.norm_pair = f.peer_norm = true;
  return f;
}

namespace {

Tuning hopper() {
  Tuning t;
  t.fusions = Fusions::all();
  t.pdl = true;
  t.pdl_early_rope = true;
  t.tma_gemv = true;
  t.gemv_tma_rows = 0;  // one row a block for f16 (two for the residual-fused o projection), two for FP8
  t.l2_prefetch = true;
  t.gemv_row_sets = true;
  t.kq_stream_rows = 2;
  t.kq_stream_q6k_rows = 2;
  t.kq_stream_split = 0;  // by row length
  t.block32_stream = true;
  t.kq_stream_l1 = true;
  t.kq_stream_expert_rows = true;
  t.kq_stream_short_expert_rows = true;
  t.kq_stream_lane_groups = true;
  t.kq_stream_expert_groups = true;
  t.kq_stream_early_two = true;
  t.kq_stream_uneven_one_row = true;
  t.mma_max_rows_quant = 256;
  t.wgmma = true;
  t.wgmma_split_cost = 2;
  t.wgmma_narrow = true;
  t.moe_mma_rows = 0;  // tensor cores for every MoE batch of more than one token
  t.host_experts_upload_tokens = 32;
  t.fp8_gemm_min_rows = 9;
  t.prefill_mma = true;
  t.prefill_tile_partials = 64;
  t.attention_blocks_per_sm = 2;
  t.attention_min_split_keys = 32;
  t.attention_cluster = 8;
  t.attention_cluster_hd256 = 16;
  t.attention_cluster_max_keys = 256;
  t.peer_all_reduce = true;
  t.peer_early_trigger = true;
  return t;
}

struct Row {
  const char* devices;
  bool amd;
  int cc_min, cc_max;  // compute capability major * 10 + minor (NVIDIA; ignored for AMD)
  Tuning (*tuning)();
};

const Row kTable[] = {
    {"NVIDIA Hopper (sm_90: H100, H200)", false, 90, 90, hopper},
    {"other NVIDIA GPUs (not measured: Hopper's values)", false, 0, 1000, hopper},
    {"AMD GPUs (not measured: Hopper's values)", true, 0, 1000, hopper},
};

const Row& row_of(const DeviceTraits& d) {
  const int cc = d.cc_major * 10 + d.cc_minor;
  for (const Row& r : kTable)
    if (r.amd == d.amd && (d.amd || (cc >= r.cc_min && cc <= r.cc_max))) return r;
  return kTable[1];
}

}  // namespace

Tuning tuning_for(const DeviceTraits& device) { return row_of(device).tuning(); }

const char* tuning_row(const DeviceTraits& device) { return row_of(device).devices; }

void apply_switches(const Env& env, Tuning& t) {
  if (!env.fusions) t.fusions = Fusions::none();
  if (env.kernel_off("pdl")) t.pdl = false;
  if (env.kernel_off("tma")) t.tma_gemv = false;
  if (env.kernel_off("wgmma")) t.wgmma = false;
  if (env.kernel_off("mma")) t.mma_max_rows_quant = 0;
  if (env.kernel_off("stream-gemv")) t.kq_stream_rows = t.kq_stream_q6k_rows = 0;
  if (env.kernel_off("prefill-mma")) t.prefill_mma = false;
  if (env.kernel_off("fp8-gemm")) t.fp8_gemm_min_rows = 0;
  if (env.kernel_off("attn-cluster")) t.attention_cluster = 0;
  if (env.kernel_off("peer-all-reduce")) t.peer_all_reduce = false;
}

}  // namespace rf::gpu
