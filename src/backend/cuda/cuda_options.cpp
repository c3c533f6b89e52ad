// CudaOptions::from_env: the one place the CUDA backend reads the environment.
#include "backend/cuda/cuda_options.h"

#include <cstdlib>
#include <string>
#include <utility>

namespace rf {

namespace {
// Measurement switches: on unless the variable is "0".
bool switch_on(const char* name) {
  const char* v = std::getenv(name);
  return !(v && std::string(v) == "0");
}
}  // namespace

CudaOptions CudaOptions::from_env() { return from_env(CudaOptions{}); }

CudaOptions CudaOptions::from_env(CudaOptions o) {
  o.pdl = o.pdl && switch_on("ROCMFORGE_PDL");
  o.tma_gemv = o.tma_gemv && switch_on("ROCMFORGE_TMA_GEMV");
  o.l2_prefetch = o.l2_prefetch && switch_on("ROCMFORGE_L2_PREFETCH");
  o.wgmma_narrow = o.wgmma_narrow && switch_on("ROCMFORGE_WGMMA_NARROW");
  o.gemv_row_sets = o.gemv_row_sets && switch_on("ROCMFORGE_GEMV_ROW_SETS");
  o.kq_stream_l1 = o.kq_stream_l1 && switch_on("ROCMFORGE_KQ_STREAM_L1");
  // Switches a set variable turns either way (tests and builds may start
  // them off): on unless it is "0".
  for (auto [name, field] : {std::pair{"ROCMFORGE_FUSED_Q8", &o.fused_act_q8},
                              std::pair{"ROCMFORGE_FUSED_QK_ROPE", &o.fused_qk_norm_rope},
                              std::pair{"ROCMFORGE_FUSED_MOE_ROUTER", &o.fused_moe_router},
                              std::pair{"ROCMFORGE_KQ_STREAM_EXPERT_ROWS", &o.kq_stream_expert_rows},
                              std::pair{"ROCMFORGE_KQ_STREAM_SHORT_ROWS", &o.kq_stream_short_expert_rows},
                              std::pair{"ROCMFORGE_FUSED_MOE_DOWN", &o.fused_moe_down},
                              std::pair{"ROCMFORGE_PACKED_GATE_UP", &o.packed_gate_up},
                              std::pair{"ROCMFORGE_FOLD_NORM_GAINS", &o.fold_norm_gains},
                              std::pair{"ROCMFORGE_GEMV_TWO_FORMATS", &o.gemv_two_formats},
                              std::pair{"ROCMFORGE_KQ_STREAM_GROUPS", &o.kq_stream_lane_groups},
                              std::pair{"ROCMFORGE_KQ_STREAM_EXPERT_GROUPS", &o.kq_stream_expert_groups},
                              std::pair{"ROCMFORGE_PDL_EARLY_ROPE", &o.pdl_early_rope},
                              std::pair{"ROCMFORGE_KQ_STREAM_EARLY_TWO", &o.kq_stream_early_two},
                              std::pair{"ROCMFORGE_KQ_STREAM_UNEVEN_ONE_ROW", &o.kq_stream_uneven_one_row},
                              std::pair{"ROCMFORGE_BLOCK32_STREAM", &o.block32_stream}}) {
    if (const char* p = std::getenv(name); p && *p) *field = std::string(p) != "0";
  }
  o.peer_all_reduce = o.peer_all_reduce && switch_on("ROCMFORGE_PEER_ALL_REDUCE");
  o.peer_fused_norm = o.peer_fused_norm && switch_on("ROCMFORGE_PEER_FUSED_NORM");
  o.peer_early_trigger = o.peer_early_trigger && switch_on("ROCMFORGE_PEER_EARLY_TRIGGER");
  if (const char* p = std::getenv("ROCMFORGE_GEMV_TMA_ROWS"); p && (std::atoi(p) == 1 || std::atoi(p) == 2 ||
                                                                    std::atoi(p) == 4))
    o.gemv_tma_rows = std::atoi(p);
  for (auto [name, field] : {std::pair{"ROCMFORGE_KQ_STREAM_ROWS", &o.kq_stream_rows},
                              std::pair{"ROCMFORGE_KQ_STREAM_Q6K_ROWS", &o.kq_stream_q6k_rows}}) {
    if (const char* p = std::getenv(name); p && *p) {
      const int r = std::atoi(p);
      if (r == 0 || r == 1 || r == 2 || r == 4) *field = r;
    }
  }
  if (const char* p = std::getenv("ROCMFORGE_KQ_STREAM_SPLIT"); p && *p) {
    const int split = std::atoi(p);
    if (split == 1 || split == 2 || split == 4) o.kq_stream_split = split;
  }
  if (!switch_on("ROCMFORGE_MMA")) o.mma_max_rows_quant = 0;
  if (const char* p = std::getenv("ROCMFORGE_WGMMA"); p && *p) o.wgmma = std::string(p) != "0";
  if (const char* p = std::getenv("ROCMFORGE_WGMMA_SPLIT_COST"); p && *p && std::atoi(p) >= 0)
    o.wgmma_split_cost = std::atoi(p);
  if (!switch_on("ROCMFORGE_PACKED_QKV")) o.packed_qkv = false;
  if (const char* p = std::getenv("ROCMFORGE_MOE_MMA_ROWS"); p && *p && std::atoi(p) >= 0)
    o.moe_mma_rows = std::atoi(p);
  if (const char* p = std::getenv("ROCMFORGE_PREFILL_MMA"); p && *p) o.prefill_mma = std::string(p) != "0";
  if (const char* p = std::getenv("ROCMFORGE_PREFILL_SPLIT"); p && *p && std::atoi(p) >= 0)
    o.prefill_tile_partials = std::atoi(p);
  if (const char* p = std::getenv("ROCMFORGE_FP8_GEMM_ROWS"); p && *p && std::atoi(p) >= 0)
    o.fp8_gemm_min_rows = std::atoi(p);
  if (const char* p = std::getenv("ROCMFORGE_ATTN_BLOCKS"); p && std::atoi(p) > 0)
    o.attention_target_blocks = std::atoi(p);
  if (const char* p = std::getenv("ROCMFORGE_ATTN_CLUSTER"); p && *p && std::atoi(p) >= 0 && std::atoi(p) <= 16)
    o.attention_cluster = std::atoi(p) >= 2 ? std::atoi(p) : 0;
  if (const char* p = std::getenv("ROCMFORGE_ATTN_CLUSTER_HD256"); p && std::atoi(p) >= 2 && std::atoi(p) <= 16)
    o.attention_cluster_hd256 = std::atoi(p);
  if (const char* p = std::getenv("ROCMFORGE_ATTN_MIN_SPLIT"); p && std::atoi(p) > 0)
    o.attention_min_split_keys = std::atoi(p);
  if (const char* p = std::getenv("ROCMFORGE_PROFILE"); p && *p && std::string(p) != "0") o.profile = true;
  return o;
}

}  // namespace rf
