// The GPU backend's tuning table (backend/cuda/tuning.h): Hopper's row holds
// the values the benchmarks were measured with (the list below is that
// record: a change to the table must change it too), every kind of device
// has a row, and the environment switches turn off what they name and
// nothing else. Host code only: runs without a GPU.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "backend/cuda/tuning.h"
#include "core/env.h"

namespace rf {
namespace {

gpu::DeviceTraits hopper() {
  gpu::DeviceTraits d;
  d.cc_major = 9;
  d.n_sms = 132;
  return d;
}

bool all_on(const gpu::Fusions& f) {
  return f.act_q8 && f.qk_norm_rope && f.moe_router && f.moe_route_plan && f.moe_down && f.gemv_multi &&
         f.gemv_two_formats && f.gemv_glu && f.packed_qkv && f.packed_gate_up && f.fold_norm_gains && f.add_norm &&
         f.norm_pair && f.peer_norm;
}
bool all_off(const gpu::Fusions& f) {
  return !f.act_q8 && !f.qk_norm_rope && !f.moe_router && !f.moe_route_plan && !f.moe_down && !f.gemv_multi &&
         !f.gemv_two_formats && !f.gemv_glu && !f.packed_qkv && !f.packed_gate_up && !f.fold_norm_gains &&
         !f.add_norm && !f.norm_pair && !f.peer_norm;
}

TEST(CudaTuning, HopperRowHoldsTheMeasuredValues) {
  const gpu::Tuning t = gpu::tuning_for(hopper());
  EXPECT_STREQ(gpu::tuning_row(hopper()), "NVIDIA Hopper (sm_90: H100, H200)");
  EXPECT_TRUE(all_on(t.fusions));
  EXPECT_TRUE(t.pdl && t.pdl_early_rope && t.tma_gemv && t.l2_prefetch && t.gemv_row_sets);
  EXPECT_EQ(t.gemv_tma_rows, 0);
  EXPECT_EQ(t.kq_stream_rows, 2);
  EXPECT_EQ(t.kq_stream_q6k_rows, 2);
  EXPECT_EQ(t.kq_stream_split, 0);
  EXPECT_TRUE(t.block32_stream && t.kq_stream_l1 && t.kq_stream_expert_rows && t.kq_stream_short_expert_rows &&
              t.kq_stream_lane_groups && t.kq_stream_expert_groups && t.kq_stream_early_two &&
              t.kq_stream_uneven_one_row);
  EXPECT_EQ(t.mma_max_rows_quant, 256);
  EXPECT_TRUE(t.wgmma && t.wgmma_narrow);
  EXPECT_EQ(t.wgmma_split_cost, 2);
  EXPECT_EQ(t.moe_mma_rows, 0);
  EXPECT_EQ(t.fp8_gemm_min_rows, 9);
  EXPECT_TRUE(t.prefill_mma);
  EXPECT_EQ(t.prefill_tile_partials, 64);
  EXPECT_EQ(t.attention_blocks_per_sm, 2);
  EXPECT_EQ(t.attention_min_split_keys, 32);
  EXPECT_EQ(t.attention_cluster, 8);
  EXPECT_EQ(t.attention_cluster_hd256, 16);
  EXPECT_EQ(t.attention_cluster_max_keys, 256);
  EXPECT_TRUE(t.peer_all_reduce && t.peer_early_trigger);
}

TEST(CudaTuning, EveryKindOfDeviceHasARow) {
  gpu::DeviceTraits ampere = hopper(), amd;
  ampere.cc_major = 8;
  amd.amd = true;
  amd.warp_size = 64;
  EXPECT_NE(std::string(gpu::tuning_row(ampere)), gpu::tuning_row(hopper()));
  EXPECT_NE(std::string(gpu::tuning_row(amd)).find("AMD"), std::string::npos);
  EXPECT_TRUE(all_on(gpu::tuning_for(ampere).fusions) && all_on(gpu::tuning_for(amd).fusions));
}

Env switches(const std::map<std::string, std::string>& vars) {
  return parse_env([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(CudaTuning, SwitchesTurnOffWhatTheyNameOnly) {
  const gpu::Tuning base = gpu::tuning_for(hopper());
  gpu::Tuning t = base;
  gpu::apply_switches(switches({}), t);
  EXPECT_TRUE(all_on(t.fusions) && t.pdl && t.wgmma && t.attention_cluster == 8) << "no switch set: the table";
  t = base;
  gpu::apply_switches(switches({{"ROCMFORGE_FUSIONS", "off"}}), t);
  EXPECT_TRUE(all_off(t.fusions));
  EXPECT_TRUE(t.pdl && t.wgmma && t.kq_stream_rows == 2) << "kernel families stay";
  t = base;
  gpu::apply_switches(switches({{"ROCMFORGE_KERNELS_OFF",
                                 "pdl,tma,wgmma,mma,stream-gemv,prefill-mma,fp8-gemm,attn-cluster,peer-all-reduce"}}),
                      t);
  EXPECT_TRUE(!t.pdl && !t.tma_gemv && !t.wgmma && t.mma_max_rows_quant == 0 && t.kq_stream_rows == 0 &&
              t.kq_stream_q6k_rows == 0 && !t.prefill_mma && t.fp8_gemm_min_rows == 0 && t.attention_cluster == 0 &&
              !t.peer_all_reduce);
  EXPECT_TRUE(all_on(t.fusions)) << "fusions stay";
  t = base;
  gpu::apply_switches(switches({{"ROCMFORGE_KERNELS_OFF", "wgmma"}}), t);
  EXPECT_FALSE(t.wgmma);
  EXPECT_TRUE(t.pdl && t.tma_gemv && t.mma_max_rows_quant == 256 && t.prefill_mma);
}

}  // namespace
}  // namespace rf
