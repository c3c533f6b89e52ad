// Which GGUF type each tensor gets when quantizing (rocmforge quantize and
// mkmodel). Plain types quantize every 2-D weight to that type ("fp8": FP8
// weights with a scale per row, F8_E4M3_ROW of core/dtype.h). The mixtures
// follow llama.cpp's recipes:
//   q4_k_m: Q4_K everywhere; Q6_K for output.weight (token_embd.weight when
//           the output is tied to it), and for attn_v and ffn_down in "more
//           bits" layers (the first and last eighth of the layers, and every
//           third layer in between); Q5_K for a fused attn_qkv;
//   q5_k_m: the same with Q5_K as the base (Q6_K for attn_qkv).
//   iq4_nl, iq4_xs: the base type; Q6_K output.weight (Q8_0 where its rows
//           are not whole blocks of the base type); Q5_K attn_v in models of
//           4 or more query heads per KV head, and Q5_K ffn_down in the
//           first eighth of the layers unless an importance matrix is used;
//   mxfp4:  llama.cpp's MXFP4_MOE: expert tensors (3-D) MXFP4, every other
//           matrix Q8_0; mxfp4_f16: the same with f16 for the others (the
//           layout of gpt-oss's converted files).
//   The i-quants below 4 bits follow llama.cpp's file types of those names
//   (general.file_type 19, 20, 23, 24, 26-29, 31), whose base types are
//   iq2_xxs IQ2_XXS, iq2_xs IQ2_XS, iq2_s IQ2_XS (sic), iq2_m IQ2_S,
//   iq3_xxs IQ3_XXS, iq3_s and iq3_m IQ3_S, iq1_s IQ1_S, iq1_m IQ1_M:
//     iq2_*, iq1_*: Q5_K output.weight; Q2_K token_embd.weight (IQ3_S under
//           iq2_s/iq2_m); attn_v (attn_qkv) Q4_K at 4+ query heads per KV
//           head or 4+ experts, else Q2_K (IQ3_S under iq2_s/iq2_m); the
//           first eighth of ffn_down Q2_K (IQ3_S); attn_output IQ2_XXS under
//           iq1_*, IQ3_S under iq2_s/iq2_m; 8 experts: Q4_K attn_k, Q5_K
//           attn_output;
//     iq3_xxs: Q5_K output; IQ3_S token_embd and attn_output; IQ2_S attn_q
//           and attn_k; attn_v Q4_K at 4+ query heads per KV head, IQ3_S
//           without an importance matrix; without one ffn_down is Q4_K in
//           the first eighth, Q3_K elsewhere;
//     iq3_s: Q6_K output; Q4_K attn_v at 4+ query heads per KV head;
//     iq3_m: Q6_K output; Q4_K attn_v, attn_output and the first eighth of
//           ffn_down;
//     iq3_*: 8 experts: Q8_0 attn_k, attn_v, Q5_K attn_output.
//   needs_importance() names the types these plans cannot be made without
//   an importance matrix (llama.cpp's rule; output and token_embd excepted).
//   In all, ffn_down's rule covers the experts' ffn_down_exps, and models
//   of exactly 8 experts (Mixtral) get Q8_0 attn_k and attn_v, and Q5_K
//   attn_output under q4_k_m, iq4_nl and iq4_xs.
//   A plan with `mixture` off (rocmforge quantize --pure) gives every matrix
//   the base type.
// 1-D tensors (norms, rope factors), MoE routers (ffn_gate_inp) and the
// Gated DeltaNet conv kernels (ssm_conv1d, as llama.cpp keeps them) stay F32
// under every plan. A tensor whose row length is not a multiple of the
// chosen type's block size falls back as llama.cpp's quantizer does (the
// 256-wide i-quants to IQ4_NL, Q2_K/Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to
// Q5_1, others to Q8_0), then to F16.
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
  DType dense = DType::Q8_0;  // mxfp4 mixtures: the type of every matrix but the experts'
};

std::optional<QuantPlan> quant_plan(const std::string& name);
std::string quant_plan_names();  // for help texts
// The type for tensor `name` of n_dims dimensions and rows of `cols` in a
// model of n_layer layers and n_expert experts per layer (0: dense);
// `tied_output`: the model has no output.weight (token_embd is used);
// n_gqa: query heads per KV head; has_imatrix: quantized with importances.
DType plan_tensor_type(const QuantPlan& plan, const std::string& name, int64_t cols, int n_dims, int n_layer,
                       bool tied_output = false, int n_expert = 0, int n_gqa = 1, bool has_imatrix = false);
// t, or the type llama.cpp's quantizer falls back to for rows of `cols`.
DType fit_row_width(DType t, int64_t cols);
// Whether quantizing to t needs an importance matrix (the i-quants below 4
// bits except IQ3_S): their quality depends on it, so llama.cpp refuses to
// make them without one for any matrix but output.weight and token_embd.
bool needs_importance(DType t);

}  // namespace rf
