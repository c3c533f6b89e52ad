// Which GGUF type each tensor gets when quantizing (rocmforge quantize and
// mkmodel). Plain types quantize every 2-D weight to that type ("fp8": FP8
// weights with a scale per row, F8_E4M3_ROW of core/dtype.h). The mixtures
// follow llama.cpp's recipes:
//   q4_k_m: Q4_K everywhere; Q6_K for output.weight (token_embd.weight when
//           the output is tied to it), and for attn_v and ffn_down in "more
//           bits" layers (the first and last eighth of the layers, and every
//           third layer in between); Q5_K for a fused attn_qkv;
//   q5_k_m: the same with Q5_K as the base (Q6_K for attn_qkv).
//   In both, ffn_down's rule covers the experts' ffn_down_exps, and models
//   of exactly 8 experts (Mixtral) get Q8_0 attn_k and attn_v, and Q5_K
//   attn_output under q4_k_m.
// 1-D tensors (norms, rope factors) and MoE routers (ffn_gate_inp) stay F32
// under every plan. A tensor whose row length is not a multiple of the
// chosen type's block size falls back to Q8_0, then F16.
#pragma once

#include <optional>
#include <string>

#include "core/dtype.h"

namespace rf {

struct QuantPlan {
  std::string name;     // "q4_k_m"
  DType base;           // Q4_K
  bool mixture = false;
  int32_t file_type;    // general.file_type (llama.cpp's numbering)
};

std::optional<QuantPlan> quant_plan(const std::string& name);
std::string quant_plan_names();  // for help texts
// The type for tensor `name` of n_dims dimensions and rows of `cols` in a
// model of n_layer layers and n_expert experts per layer (0: dense);
// `tied_output`: the model has no output.weight (token_embd is used).
DType plan_tensor_type(const QuantPlan& plan, const std::string& name, int64_t cols, int n_dims, int n_layer,
                       bool tied_output = false, int n_expert = 0);

}  // namespace rf
