// Per-tensor type choice for quantization.
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
};
constexpr Entry kPlans[] = {
    {"f32", DType::F32, false, 0},     {"f16", DType::F16, false, 1},     {"bf16", DType::BF16, false, 32},
    {"q8_0", DType::Q8_0, false, 7},   {"q4_0", DType::Q4_0, false, 2},   {"q4_1", DType::Q4_1, false, 3},
    {"q5_0", DType::Q5_0, false, 8},   {"q5_1", DType::Q5_1, false, 9},   {"q2_k", DType::Q2_K, false, 10},
    {"q3_k", DType::Q3_K, false, 12},  {"q4_k", DType::Q4_K, false, 15},  {"q5_k", DType::Q5_K, false, 17},
    {"q6_k", DType::Q6_K, false, 18},  {"q4_k_m", DType::Q4_K, true, 15}, {"q5_k_m", DType::Q5_K, true, 17},
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

}  // namespace

std::optional<QuantPlan> quant_plan(const std::string& name) {
  for (const auto& e : kPlans)
    if (name == e.name) return QuantPlan{e.name, e.base, e.mixture, e.file_type};
  return std::nullopt;
}

std::string quant_plan_names() {
  std::string s;
  for (const auto& e : kPlans) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

DType plan_tensor_type(const QuantPlan& plan, const std::string& name, int64_t cols, int n_dims, int n_layer,
                       bool tied_output, int n_expert) {
  if (n_dims < 2 || ends_with(name, "ffn_gate_inp.weight")) return DType::F32;
  DType t = plan.base;
  if (plan.mixture) {
    const int layer = layer_of(name);
    const bool more_bits = layer >= 0 && use_more_bits(layer, n_layer);
    if (name == "output.weight" || (tied_output && name == "token_embd.weight")) t = DType::Q6_K;
    else if (ends_with(name, "attn_qkv.weight")) t = plan.base == DType::Q4_K ? DType::Q5_K : DType::Q6_K;
    else if (n_expert == 8 && (ends_with(name, "attn_v.weight") || ends_with(name, "attn_k.weight"))) t = DType::Q8_0;
    else if (n_expert == 8 && plan.base == DType::Q4_K && ends_with(name, "attn_output.weight")) t = DType::Q5_K;
    else if ((ends_with(name, "attn_v.weight") || ends_with(name, "ffn_down.weight") ||
              ends_with(name, "ffn_down_exps.weight")) &&
             more_bits)
      t = DType::Q6_K;
  }
  // A width the type's blocks do not divide (GLM-4's 13,696-wide down rows)
  // falls back as llama.cpp's quantizer does: Q4_K to Q5_0, Q5_K to Q5_1,
  // the rest (Q6_K) to Q8_0; then f16.
  const DType fallback = t == DType::Q4_K ? DType::Q5_0 : t == DType::Q5_K ? DType::Q5_1 : DType::Q8_0;
  for (DType cand : {t, fallback, DType::Q8_0, DType::F16})
    if (cols % info(cand).block_size == 0) return cand;
  return DType::F16;
}

}  // namespace rf
