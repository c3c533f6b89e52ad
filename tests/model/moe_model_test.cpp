// Mixture-of-experts models beyond the golden files: experts stored in
// every block format are sliced per expert correctly (a quantized
// tiny-qwen3moe gives the logits of its own weights dequantized to f32);
// expert_weights_norm reaches the routing (with every expert used,
// renormalising changes nothing; with 2 of 4 it does); and a missing or
// misshapen router or expert tensor, or a dense FFN tensor in an MoE file,
// is an error naming the tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/quant.h"
#include "gguf/writer.h"
#include "model/runner.h"
#include "model/temp_model.h"
#include "testdata.h"

namespace rf {
namespace {

std::string temp_path(const std::string& what) {
  return (std::filesystem::temp_directory_path() / ("rf_moe_" + what + "_" + std::to_string(getpid()) + ".gguf"))
      .string();
}

// A copy of `in` with the metadata edited by `meta` and each tensor passed
// through `tensor` (which may add tensors or skip the original by returning
// false).
using TensorEdit = std::function<bool(gguf::Writer&, const gguf::TensorInfo&, const gguf::File&)>;
void rewrite(const std::string& in, const std::string& out, const std::function<void(gguf::Writer&)>& meta,
             const TensorEdit& tensor) {
  auto f = gguf::File::open(in);
  gguf::Writer w;
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment") w.set(k, v);
  if (meta) meta(w);
  const gguf::File* file = f.get();
  for (const auto& t : f->tensors()) {
    if (tensor && !tensor(w, t, *file)) continue;
    const gguf::TensorInfo* info = &t;
    w.add_tensor(t.name, t.type, t.dims, [info, file](uint8_t* dst) {
      std::memcpy(dst, file->tensor_data(*info), info->n_bytes);
    });
  }
  w.write(out);
}

std::vector<float> logits_after(test::ModelRunner& runner, const std::vector<int32_t>& prompt, int32_t next) {
  test::ModelRunner::Seq s;
  s.tokens = prompt;
  runner.step({&s});
  s.tokens.push_back(next);
  auto out = runner.step({&s})[0];  // a decode step: one row per expert
  runner.release(s);
  return out;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, top = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(double(a[i]) - b[i]));
    top = std::max(top, std::abs(double(b[i])));
  }
  return err / top;
}

const std::vector<int32_t> kPrompt = {1, 75, 49, 278, 417, 458, 358, 327, 24, 307, 505, 205, 496, 234, 337, 381};

// Each expert is a row slice of its stacked 3-D tensor; in a quantized
// file those rows are whole blocks. The same weights dequantized to an f32
// file (exact) must give the same logits: a mis-sliced expert would differ
// by O(1) (the f32 file's own slicing is checked by the golden tests). The
// prefill's expert matmuls dequantize weight rows and take f32 dot
// products, exactly as the f32 file's; only single-row products (a decode
// step, or an expert chosen by one token) use the fused quantized dot,
// equal to f32 rounding: measured at most 6e-7 of the largest logit, under
// a tolerance of 1e-5.
class MoeBlockFormats : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeBlockFormats, ExpertSlicesEqualTheDequantizedModel) {
  const std::string type = GetParam();
  test::TempModel quantized("tiny-qwen3moe", type, 5);
  const std::string f32_path = temp_path("f32_" + type);
  rewrite(quantized.path(), f32_path, nullptr, [](gguf::Writer& w, const gguf::TensorInfo& t, const gguf::File& f) {
    if (t.type == DType::F32) return true;
    const gguf::TensorInfo* info = &t;
    const gguf::File* file = &f;
    w.add_tensor(t.name, DType::F32, t.dims, [info, file](uint8_t* dst) {
      const size_t cols = info->ne(0), in_rb = row_bytes(info->type, cols);
      for (size_t r = 0; r < info->rows(); ++r)
        dequantize_row(info->type, file->tensor_data(*info) + r * in_rb, reinterpret_cast<float*>(dst) + r * cols,
                       cols);
    });
    return false;
  });
  CpuBackend backend(2);
  test::ModelRunner q(quantized.path(), backend, 64, 4, 16, 16);
  EXPECT_NE(q.model().weights().layers[0].experts.gate.type, DType::F32);
  // (A second backend: each runner's transformer reserves its backend's expert scratch.)
  CpuBackend backend_f32(2);
  test::ModelRunner f(f32_path, backend_f32, 64, 4, 16, 16);
  std::filesystem::remove(f32_path);  // mapped: stays readable
  const auto a = logits_after(q, kPrompt, 300), b = logits_after(f, kPrompt, 300);
  const double rel = max_rel_diff(a, b);
  std::printf("[ moe      ] tiny-qwen3moe %-6s vs dequantized f32: max |logit diff| %.2e of the largest\n",
              type.c_str(), rel);
  EXPECT_LE(rel, 1e-5) << type;
}

INSTANTIATE_TEST_SUITE_P(Types, MoeBlockFormats,
                         ::testing::Values("f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k",
                                           "q4_k", "q5_k", "q6_k", "q4_k_m"),
                         [](const auto& info) { return info.param; });

// tiny-mixtral with its expert metadata changed.
std::vector<float> mixtral_logits(uint32_t used, bool norm) {
  const std::string path = temp_path("mixtral_" + std::to_string(used) + (norm ? "_norm" : "_raw"));
  rewrite(test::testdata_path("arch/tiny-mixtral.gguf"), path,
          [&](gguf::Writer& w) {
            w.set_u32("llama.expert_used_count", used);
            w.set_bool("llama.expert_weights_norm", norm);
          },
          nullptr);
  CpuBackend backend(2);
  test::ModelRunner runner(path, backend, 64, 4, 16, 16);
  std::filesystem::remove(path);
  EXPECT_EQ(runner.model().config().expert_weights_norm, norm);
  return logits_after(runner, kPrompt, 300);
}

TEST(MoeModel, ExpertWeightsNormReachesTheRouting) {
  RF_REQUIRE_TESTDATA("arch/tiny-mixtral.gguf");
  // Every expert used: the probabilities already sum to 1.
  EXPECT_LE(max_rel_diff(mixtral_logits(4, false), mixtral_logits(4, true)), 1e-6);
  // Two of four: unnormalised weights sum to less than 1, and the logits move.
  EXPECT_GT(max_rel_diff(mixtral_logits(2, false), mixtral_logits(2, true)), 1e-3);
}

TEST(MoeModel, BadExpertTensorsAreNamed) {
  RF_REQUIRE_TESTDATA("arch/tiny-mixtral.gguf");
  const std::string src = test::testdata_path("arch/tiny-mixtral.gguf"), path = temp_path("bad");
  auto zeros = [](gguf::Writer& w, const std::string& name, std::vector<uint64_t> dims) {
    size_t n = 1;
    for (uint64_t d : dims) n *= size_t(d);
    w.add_tensor(name, DType::F32, dims, [n](uint8_t* dst) { std::memset(dst, 0, n * 4); });
  };
  struct Case {
    const char* what;
    TensorEdit edit;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"three experts of four",
       [&](gguf::Writer& w, const gguf::TensorInfo& t, const gguf::File&) {
         if (t.name != "blk.1.ffn_up_exps.weight") return true;
         zeros(w, t.name, {64, 128, 3});
         return false;
       },
       "tensor 'blk.1.ffn_up_exps.weight' has shape [64, 128, 3], expected [64, 128, 4]"},
      {"down with gate's shape",
       [&](gguf::Writer& w, const gguf::TensorInfo& t, const gguf::File&) {
         if (t.name != "blk.0.ffn_down_exps.weight") return true;
         zeros(w, t.name, {64, 128, 4});
         return false;
       },
       "tensor 'blk.0.ffn_down_exps.weight' has shape [64, 128, 4], expected [128, 64, 4]"},
      {"router of five experts",
       [&](gguf::Writer& w, const gguf::TensorInfo& t, const gguf::File&) {
         if (t.name != "blk.0.ffn_gate_inp.weight") return true;
         zeros(w, t.name, {64, 5});
         return false;
       },
       "tensor 'blk.0.ffn_gate_inp.weight' has shape [64, 5], expected [64, 4]"},
      {"no router", [](gguf::Writer&, const gguf::TensorInfo& t, const gguf::File&) {
         return t.name != "blk.1.ffn_gate_inp.weight";
       },
       "model is missing tensor 'blk.1.ffn_gate_inp.weight'"},
      {"a dense FFN beside the experts",
       [&](gguf::Writer& w, const gguf::TensorInfo& t, const gguf::File&) {
         if (t.name == "blk.0.ffn_norm.weight") zeros(w, "blk.0.ffn_down.weight", {128, 64});
         return true;
       },
       "model has tensor 'blk.0.ffn_down.weight' that architecture 'llama' does not use"},
  };
  for (const Case& c : cases) {
    rewrite(src, path, nullptr, c.edit);
    const std::string msg = test::load_error(path);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace rf
