// Per-tensor type choice for quantization: the plan table and llama.cpp's
// mixture rules (model/quant_plan.h).
#include "model/quant_plan.h"

#include <cstdlib>

#include "core/error.h"
#include "core/quant.h"

namespace rf {
namespace {

struct Entry {
  const char* name;
  DType base;
  bool mixture;
  int32_t file_type;
  DType dense = DType::Q8_0;  // expert-only plans: the other matrices' type
};
constexpr Entry kPlans[] = {
    {"f32", DType::F32, false, 0},     {"f16", DType::F16, false, 1},     {"bf16", DType::BF16, false, 32},
    {"q8_0", DType::Q8_0, false, 7},   {"q4_0", DType::Q4_0, false, 2},   {"q4_1", DType::Q4_1, false, 3},
    {"q5_0", DType::Q5_0, false, 8},   {"q5_1", DType::Q5_1, false, 9},   {"q2_k", DType::Q2_K, false, 10},
    {"q3_k", DType::Q3_K, false, 12},  {"q4_k", DType::Q4_K, false, 15},  {"q5_k", DType::Q5_K, false, 17},
    {"q6_k", DType::Q6_K, false, 18},  {"q4_k_m", DType::Q4_K, true, 15}, {"q5_k_m", DType::Q5_K, true, 17},
    {"iq4_nl", DType::IQ4_NL, true, 25}, {"iq4_xs", DType::IQ4_XS, true, 30},
    // The i-quants below 4 bits, by llama.cpp's file types (its IQ2_S puts
    // IQ2_XS in the matrices, its IQ2_M IQ2_S; IQ3_M is IQ3_S mixed).
    {"iq3_s", DType::IQ3_S, true, 26},   {"iq3_m", DType::IQ3_S, true, 27},   {"iq3_xxs", DType::IQ3_XXS, true, 23},
    {"iq2_m", DType::IQ2_S, true, 29},   {"iq2_s", DType::IQ2_XS, true, 28},  {"iq2_xs", DType::IQ2_XS, true, 20},
    {"iq2_xxs", DType::IQ2_XXS, true, 19}, {"iq1_m", DType::IQ1_M, true, 31}, {"iq1_s", DType::IQ1_S, true, 24},
    // llama.cpp's MXFP4_MOE: the experts in MXFP4, every other matrix Q8_0;
    // and the layout gpt-oss's converted files have: the rest f16.
    {"mxfp4", DType::MXFP4, true, 38}, {"mxfp4_f16", DType::MXFP4, true, 38, DType::F16},
    // FP8 weights: no llama.cpp file type; its type id stands in.
    {"fp8", DType::F8_E4M3_ROW, false, int32_t(DType::F8_E4M3_ROW)},
};

bool use_more_bits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// llama.cpp's file types of the i-quants below 4 bits.
enum LowBitFtype : int32_t {
  kIQ2_XXS = 19, kIQ2_XS = 20, kIQ3_XXS = 23, kIQ1_S = 24, kIQ3_S = 26, kIQ3_M = 27, kIQ2_S = 28, kIQ2_M = 29,
  kIQ1_M = 31,
};

bool is_low_bit_plan(const QuantPlan& p) {
  switch (p.file_type) {
    case kIQ2_XXS: case kIQ2_XS: case kIQ3_XXS: case kIQ1_S: case kIQ3_S: case kIQ3_M: case kIQ2_S: case kIQ2_M:
    case kIQ1_M:
      return true;
    default:
      return false;
  }
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// The mixtures of llama.cpp's low-bit i-quant file types
// (llama_tensor_get_type_impl): which type a matrix gets before the
// row-width fallback.
DType low_bit_mixture_type(const QuantPlan& plan, const std::string& name, int64_t cols, int n_layer,
                           bool tied_output, int n_expert, int n_gqa, bool has_imatrix) {
  const int32_t ft = plan.file_type;
  const bool iq2_sm = ft == kIQ2_S || ft == kIQ2_M, iq1 = ft == kIQ1_S || ft == kIQ1_M;
  const int layer = layer_of(name);
  if (name == "output.weight" || (tied_output && name == "token_embd.weight")) {
    if (cols % info(plan.base).block_size != 0) return DType::Q8_0;
    return ft == kIQ3_S || ft == kIQ3_M ? DType::Q6_K : DType::Q5_K;
  }
  if (name == "token_embd.weight") {
    if (ft == kIQ2_XXS || ft == kIQ2_XS || iq1) return DType::Q2_K;
    if (iq2_sm || ft == kIQ3_XXS) return DType::IQ3_S;
    return plan.base;
  }
  // llama.cpp's tensor categories, in the order it tests them.
  const bool attn_v = contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
                      contains(name, "attn_v.weight");
  const bool attn_k = !attn_v && contains(name, "attn_k.weight");
  const bool attn_q = !attn_v && !attn_k && contains(name, "attn_q.weight");
  const bool attn_output = contains(name, "attn_output.weight");
  const bool ffn_down = !attn_output && !contains(name, "ffn_up") && !contains(name, "ffn_gate") &&
                        contains(name, "ffn_down");
  const bool first_eighth = layer >= 0 && layer < n_layer / 8;
  if (ft == kIQ3_XXS || ft == kIQ3_S || ft == kIQ3_M) {
    if (attn_v) {
      DType t = plan.base;
      if (ft == kIQ3_XXS) t = n_gqa >= 4 ? DType::Q4_K : !has_imatrix ? DType::IQ3_S : DType::IQ3_XXS;
      if (ft == kIQ3_S && n_gqa >= 4) t = DType::Q4_K;
      if (ft == kIQ3_M) t = DType::Q4_K;
      return n_expert == 8 ? DType::Q8_0 : t;
    }
    if (attn_k) return n_expert == 8 ? DType::Q8_0 : ft == kIQ3_XXS ? DType::IQ2_S : plan.base;
    if (attn_q) return ft == kIQ3_XXS ? DType::IQ2_S : plan.base;
    if (ffn_down) {
      if (ft == kIQ3_XXS && !has_imatrix) return first_eighth ? DType::Q4_K : DType::Q3_K;
      if (ft == kIQ3_M && (first_eighth || (n_expert == 8 && layer >= 0 && use_more_bits(layer, n_layer))))
        return DType::Q4_K;
      return plan.base;
    }
    if (attn_output) {
      if (n_expert == 8) return DType::Q5_K;
      return ft == kIQ3_XXS ? DType::IQ3_S : ft == kIQ3_M ? DType::Q4_K : plan.base;
    }
    return plan.base;
  }
  // IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ1_S, IQ1_M.
  if (attn_v) return n_gqa >= 4 || n_expert >= 4 ? DType::Q4_K : iq2_sm ? DType::IQ3_S : DType::Q2_K;
  if (attn_k && n_expert == 8) return DType::Q4_K;
  if (ffn_down) return first_eighth ? (iq2_sm ? DType::IQ3_S : DType::Q2_K) : plan.base;
  if (attn_output) {
    if (n_expert == 8) return DType::Q5_K;
    return iq1 ? DType::IQ2_XXS : iq2_sm ? DType::IQ3_S : plan.base;
  }
  return plan.base;
}

}  // namespace

bool needs_importance(DType t) {
  switch (t) {
    case DType::IQ3_XXS: case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ1_S:
    case DType::IQ1_M:
      return true;
    default:
      return false;
  }
}

std::optional<QuantPlan> quant_plan(const std::string& name) {
  for (const auto& e : kPlans)
    if (name == e.name) return QuantPlan{e.name, e.base, e.mixture, e.file_type, e.dense};
  return std::nullopt;
}

std::string quant_plan_names() {
  std::string s;
  for (const auto& e : kPlans) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

// The type a tensor's row width forces instead of t, as llama.cpp's
// quantizer falls back: the 256-wide i-quants to IQ4_NL, Q2_K and Q3_K to
// Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0; F16 where that does not
// fit either.
DType fit_row_width(DType t, int64_t cols) {
  if (cols % info(t).block_size == 0) return t;
  DType f = DType::Q8_0;
  switch (t) {
    case DType::IQ1_S: case DType::IQ1_M: case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S:
    case DType::IQ3_XXS: case DType::IQ3_S: case DType::IQ4_XS: f = DType::IQ4_NL; break;
    case DType::Q2_K: case DType::Q3_K: f = DType::Q4_0; break;
    case DType::Q4_K: f = DType::Q5_0; break;
    case DType::Q5_K: f = DType::Q5_1; break;
    default: break;
  }
  return cols % info(f).block_size == 0 ? f : DType::F16;
}

DType plan_tensor_type(const QuantPlan& plan, const std::string& name, int64_t cols, int n_dims, int n_layer,
                       bool tied_output, int n_expert, int n_gqa, bool has_imatrix) {
  if (n_dims < 2 || ends_with(name, "ffn_gate_inp.weight") || ends_with(name, "ssm_conv1d.weight")) return DType::F32;
  // Multi-head latent attention's per-head latent projections stay in a
  // float format (f16 in quantized plans; small, and Backend::attention_mla
  // reads them per head).
  if (ends_with(name, "attn_k_b.weight") || ends_with(name, "attn_v_b.weight"))
    return plan.base == DType::F32 || plan.base == DType::BF16 ? plan.base : DType::F16;
  DType t = plan.base;
  const bool is_output = name == "output.weight" || (tied_output && name == "token_embd.weight");
  if (plan.mixture && is_low_bit_plan(plan)) {
    t = low_bit_mixture_type(plan, name, cols, n_layer, tied_output, n_expert, n_gqa, has_imatrix);
  } else if (plan.mixture && plan.base == DType::MXFP4) {
    t = n_dims >= 3 && !is_output ? DType::MXFP4 : plan.dense;
  } else if (plan.mixture) {
    const int layer = layer_of(name);
    const bool k_quant = plan.base == DType::Q4_K || plan.base == DType::Q5_K;
    const bool iq4 = plan.base == DType::IQ4_NL || plan.base == DType::IQ4_XS;
    const bool more_bits = layer >= 0 && use_more_bits(layer, n_layer);
    if (is_output) {
      t = cols % info(plan.base).block_size != 0 ? DType::Q8_0 : DType::Q6_K;
    } else if (k_quant && ends_with(name, "attn_qkv.weight")) {
      t = plan.base == DType::Q4_K ? DType::Q5_K : DType::Q6_K;
    } else if (n_expert == 8 && (ends_with(name, "attn_v.weight") || ends_with(name, "attn_k.weight"))) {
      t = DType::Q8_0;
    } else if (n_expert == 8 && (plan.base == DType::Q4_K || iq4) && ends_with(name, "attn_output.weight")) {
      t = DType::Q5_K;
    } else if (iq4 && ends_with(name, "attn_v.weight") && n_gqa >= 4) {
      t = DType::Q5_K;
    } else if (iq4 && (ends_with(name, "ffn_down.weight") || ends_with(name, "ffn_down_exps.weight")) &&
               layer >= 0 && layer < n_layer / 8 && !has_imatrix) {
      t = DType::Q5_K;
    } else if (k_quant &&
               (ends_with(name, "attn_v.weight") || ends_with(name, "ffn_down.weight") ||
                ends_with(name, "ffn_down_exps.weight")) &&
               more_bits) {
      t = DType::Q6_K;
    }
  }
  return fit_row_width(t, cols);
}

}  // namespace rf
