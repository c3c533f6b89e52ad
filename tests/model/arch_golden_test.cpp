// Every model family on the CPU backend (the mixtures of experts Mixtral
// and Qwen3-MoE, and the hybrid Qwen3.5 ones, included) against llama.cpp's outputs on the tiny models of
// arch/ (README there): through the Evaluator (what
// `rocmforge eval` runs), greedy tokens identical and first-step logits
// within 1e-3 of the largest golden logit, per prompt; the measured errors
// are printed. Several sequences batched together, decode steps and chunked
// prefill give exactly what one sequence alone gives. Architectures not
// supported yet are refused with one line naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "gguf/writer.h"
#include "model/evaluator.h"
#include "model/model.h"
#include "model/runner.h"
#include "testdata.h"
#include "tokenizer/tokenizer.h"

namespace rf {
namespace {

struct Golden {
  std::vector<int32_t> prompt, greedy;
  std::vector<double> logits;
};

std::vector<Golden> read_golden(const std::string& path) {
  std::ifstream in(path);
  std::vector<Golden> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    out.push_back({j["prompt_tokens"].get<std::vector<int32_t>>(), j["greedy_tokens"].get<std::vector<int32_t>>(),
                   j["first_step_logits"].get<std::vector<double>>()});
  }
  return out;
}

std::vector<int32_t> eog_tokens(const Model& model) {
  auto tok = Tokenizer::from_gguf(model.file());
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tok->n_vocab(); ++id)
    if (tok->is_eog(id)) eog.push_back(id);
  return eog;
}

std::string arch_file(const std::string& arch) { return "arch/tiny-" + arch + ".gguf"; }
// gtest names allow letters, digits and '_' only.
std::string test_name(std::string arch) {
  for (char& ch : arch)
    if (ch == '-') ch = '_';
  return arch;
}

class ArchGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchGolden, EvalMatchesLlamaCpp) {
  const std::string arch = GetParam();
  RF_REQUIRE_TESTDATA(arch_file(arch));
  const auto golden = read_golden(test::testdata_path("arch/tiny-" + arch + ".golden.jsonl"));
  ASSERT_EQ(golden.size(), 4u);
  CpuBackend backend(2);
  auto model = Model::load(test::testdata_path(arch_file(arch)), backend, false);
  // Mixtral is Llama with experts; Gemma 4's MoE model is gemma4 with experts.
  EXPECT_EQ(model->config().arch, arch == "mixtral" ? "llama" : arch == "gemma4moe" ? "gemma4" : arch);
  EXPECT_EQ(model->config().has_experts(), arch == "mixtral" || arch == "qwen3moe" || arch == "gpt-oss" ||
                                               arch == "qwen35moe" || arch == "gemma4moe" || arch == "glm4moe" ||
                                               arch == "deepseek2");
  EXPECT_EQ(model->config().has_recurrent(), arch == "qwen35" || arch == "qwen35moe");
  const auto eog = eog_tokens(*model);
  EvalOptions eo;
  for (const auto& g : golden) {
    eo.max_prompt = std::max(eo.max_prompt, int32_t(g.prompt.size()));
    eo.max_context = std::max(eo.max_context, int32_t(g.prompt.size()) + 24);
  }
  Evaluator ev(*model, backend, eo);
  for (size_t p = 0; p < golden.size(); ++p) {
    const Golden& g = golden[p];
    const EvalResult r = ev.run(g.prompt, 24, eog);
    EXPECT_EQ(r.greedy_tokens, g.greedy) << arch << " prompt " << p;
    ASSERT_EQ(r.first_step_logits.size(), g.logits.size());
    double max_golden = 0, max_err = 0;
    for (size_t i = 0; i < g.logits.size(); ++i) {
      max_golden = std::max(max_golden, std::abs(g.logits[i]));
      max_err = std::max(max_err, std::abs(double(r.first_step_logits[i]) - g.logits[i]));
    }
    const double tol = 1e-3 * max_golden;
    std::printf("[ arch     ] tiny-%-8s prompt %zu (%2zu tokens): max |logit - golden| %.3e, tolerance %.3e (%.1e of the largest)\n",
                arch.c_str(), p, g.prompt.size(), max_err, tol, max_err / max_golden);
    EXPECT_LE(max_err, tol) << arch << " prompt " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ArchGolden,
                         ::testing::Values("qwen2", "qwen3", "gemma2", "gemma3", "phi3", "glm4", "mixtral",
                                           "qwen3moe", "gpt-oss", "qwen35", "qwen35moe", "gemma4", "gemma4moe",
                                           "glm4moe", "deepseek2"),
                         [](const auto& info) { return test_name(info.param); });

// Batching, decode steps and chunked prefill change nothing: several
// sequences (one longer than gemma's sliding window of 8) prefilled together
// and then decoded together give bit-identical logits to each alone, and a
// prompt fed in chunks (of 3; of 7 then single tokens; a 150-token prompt
// in steps of 64) equals it fed whole.
class ArchBatch : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchBatch, BatchedAndChunkedMatchAlone) {
  const std::string arch = GetParam();
  RF_REQUIRE_TESTDATA(arch_file(arch));
  CpuBackend backend(2);
  test::ModelRunner runner(test::testdata_path(arch_file(arch)), backend, 64, 4, 64, 4);
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 403, 407, 261, 378},
      {75, 49, 278, 417, 458, 358, 327, 24, 307, 505, 205, 496, 234, 337, 381, 318, 335, 83, 322, 10},
      {241, 234, 263}};
  std::vector<std::vector<std::vector<float>>> alone;  // [prompt][step]
  for (const auto& p : prompts) {
    test::ModelRunner::Seq s;
    s.tokens = p;
    alone.push_back({runner.step({&s})[0]});
    for (int32_t t : {100, 7, 300}) {
      s.tokens.push_back(t);
      alone.back().push_back(runner.step({&s})[0]);
    }
    runner.release(s);
  }
  std::vector<test::ModelRunner::Seq> seqs(prompts.size());
  std::vector<test::ModelRunner::Seq*> ptrs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    seqs[i].tokens = prompts[i];
    ptrs.push_back(&seqs[i]);
  }
  auto together = runner.step(ptrs);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i], alone[i][0]) << arch << " sequence " << i;
  int step = 1;
  for (int32_t t : {100, 7, 300}) {
    for (auto& s : seqs) s.tokens.push_back(t);
    together = runner.step(ptrs);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(together[i], alone[i][size_t(step)]) << arch << " sequence " << i << " decode step " << step;
    ++step;
  }
  for (auto& s : seqs) runner.release(s);

  // The long prompt in chunks of 3 (crossing the window and KV blocks).
  test::ModelRunner::Seq s;
  for (size_t end = 3; end < prompts[1].size() + 3; end += 3) {
    s.tokens.assign(prompts[1].begin(), prompts[1].begin() + long(std::min(end, prompts[1].size())));
    const auto logits = runner.step({&s})[0];
    if (s.tokens.size() == prompts[1].size()) {
      EXPECT_EQ(logits, alone[1][0]) << arch << " chunked prefill";
    }
  }
  runner.release(s);

  // Chunks of 7 and then single tokens, then a prompt longer than the
  // step's 64 tokens in steps of 64 (recurrent layers carry their state
  // from chunk to chunk), each equal to the whole prompt in one step.
  test::ModelRunner::Seq s2;
  s2.tokens.assign(prompts[1].begin(), prompts[1].begin() + 7);
  runner.step({&s2});
  std::vector<float> last;
  for (size_t end = 8; end <= prompts[1].size(); ++end) {
    s2.tokens.assign(prompts[1].begin(), prompts[1].begin() + long(end));
    last = runner.step({&s2})[0];
  }
  EXPECT_EQ(last, alone[1][0]) << arch << " prefill in chunks of 7 and 1";
  runner.release(s2);
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 150; ++i) long_prompt.push_back(3 + (i * 37) % 500);
  test::ModelRunner big(test::testdata_path(arch_file(arch)), backend, 160, 1, 64, 4);
  test::ModelRunner::Seq whole, chunked;
  whole.tokens = long_prompt;
  const auto want = big.step({&whole})[0];
  big.release(whole);
  for (size_t end = 64; end < long_prompt.size() + 64; end += 64) {
    chunked.tokens.assign(long_prompt.begin(), long_prompt.begin() + long(std::min(end, long_prompt.size())));
    const auto got = big.step({&chunked})[0];
    if (chunked.tokens.size() == long_prompt.size()) EXPECT_EQ(got, want) << arch << " 150 tokens in steps of 64";
  }
  big.release(chunked);
  EXPECT_EQ(runner.pool().num_free(), runner.pool().num_blocks());
  if (runner.model().config().has_recurrent()) EXPECT_EQ(runner.free_state_rows(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Families, ArchBatch,
                         ::testing::Values("qwen2", "qwen3", "gemma2", "gemma3", "phi3", "glm4", "mixtral",
                                           "qwen3moe", "gpt-oss", "qwen35", "qwen35moe", "gemma4", "gemma4moe",
                                           "glm4moe", "deepseek2"),
                         [](const auto& info) { return test_name(info.param); });

// tiny-qwen3moe.gguf relabelled as Qwen2-MoE (shared experts: not supported).
TEST(ArchRefusal, UnsupportedArchitecturesAreNamed) {
  RF_REQUIRE_TESTDATA("arch/tiny-qwen3moe.gguf");
  auto f = gguf::File::open(test::testdata_path("arch/tiny-qwen3moe.gguf"));
  gguf::Writer w;
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment") w.set(k, v);
  w.set_string("general.architecture", "qwen2moe");
  const std::string path =
      (std::filesystem::temp_directory_path() / ("rf_qwen2moe_" + std::to_string(getpid()) + ".gguf")).string();
  w.write(path);
  const std::string msg = test::load_error(path);
  std::filesystem::remove(path);
  EXPECT_NE(msg.find("unsupported model architecture 'qwen2moe'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// A tensor the architecture does not use (here a q/k/v bias in a Phi-3
// file) is an error naming it, as in llama.cpp, not silently ignored.
TEST(ArchRefusal, UnusedTensorsAreNamed) {
  RF_REQUIRE_TESTDATA("arch/tiny-phi3.gguf");
  auto f = gguf::File::open(test::testdata_path("arch/tiny-phi3.gguf"));
  gguf::Writer w;
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment") w.set(k, v);
  for (const auto& t : f->tensors()) {
    const gguf::TensorInfo* info = &t;
    const gguf::File* file = f.get();
    w.add_tensor(t.name, t.type, t.dims, [info, file](uint8_t* dst) { std::memcpy(dst, file->tensor_data(*info), info->n_bytes); });
  }
  w.add_tensor("blk.0.attn_qkv.bias", DType::F32, {128}, [](uint8_t* dst) { std::memset(dst, 0, 128 * 4); });
  const std::string path =
      (std::filesystem::temp_directory_path() / ("rf_extra_" + std::to_string(getpid()) + ".gguf")).string();
  w.write(path);
  CpuBackend backend(1);
  std::string msg;
  try {
    Model::load(path, backend, false);
  } catch (const Error& e) {
    msg = e.what();
  }
  std::filesystem::remove(path);
  EXPECT_NE(msg.find("'blk.0.attn_qkv.bias' that architecture 'phi3' does not use"), std::string::npos) << msg;
}

// The same model with q, k and v (and their biases) fused into attn_qkv, as
// some converters write it, gives the same logits bit for bit.
class ArchFusedQkv : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchFusedQkv, EqualsSeparateProjections) {
  const std::string arch = GetParam();
  RF_REQUIRE_TESTDATA(arch_file(arch));
  auto f = gguf::File::open(test::testdata_path(arch_file(arch)));
  gguf::Writer w;
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment") w.set(k, v);
  const gguf::File* file = f.get();
  auto ends_with = [](const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  for (const auto& t : f->tensors()) {
    const std::string& n = t.name;
    if (ends_with(n, "attn_k.weight") || ends_with(n, "attn_v.weight") || ends_with(n, "attn_k.bias") ||
        ends_with(n, "attn_v.bias"))
      continue;  // written with attn_q
    const bool q = ends_with(n, "attn_q.weight") || ends_with(n, "attn_q.bias");
    if (!q) {
      const gguf::TensorInfo* info = &t;
      w.add_tensor(n, t.type, t.dims, [info, file](uint8_t* dst) { std::memcpy(dst, file->tensor_data(*info), info->n_bytes); });
      continue;
    }
    const std::string base = n.substr(0, n.find("attn_q."));
    const std::string kind = ends_with(n, ".bias") ? "bias" : "weight";
    std::vector<const gguf::TensorInfo*> parts;
    for (const char* which : {"attn_q.", "attn_k.", "attn_v."}) parts.push_back(f->find_tensor(base + which + kind));
    std::vector<uint64_t> dims = t.dims;
    dims.back() = 0;
    for (const auto* p : parts) dims.back() += p->dims.back();
    w.add_tensor(base + "attn_qkv." + kind, t.type, dims, [parts, file](uint8_t* dst) {
      for (const auto* p : parts) {
        std::memcpy(dst, file->tensor_data(*p), p->n_bytes);
        dst += p->n_bytes;
      }
    });
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("rf_fused_" + arch + "_" + std::to_string(getpid()) + ".gguf"))
                               .string();
  w.write(path);
  CpuBackend backend(2);
  test::ModelRunner separate(test::testdata_path(arch_file(arch)), backend), fused(path, backend);
  std::filesystem::remove(path);  // mapped: stays readable
  EXPECT_TRUE(fused.model().weights().layers[0].fused_qkv);
  EXPECT_FALSE(separate.model().weights().layers[0].fused_qkv);
  test::ModelRunner::Seq a, b;
  a.tokens = b.tokens = {75, 49, 278, 417, 458, 358, 327, 24, 307, 505};
  EXPECT_EQ(separate.step({&a})[0], fused.step({&b})[0]) << arch;
  separate.release(a);
  fused.release(b);
}

INSTANTIATE_TEST_SUITE_P(WithBiases, ArchFusedQkv, ::testing::Values("qwen2", "glm4", "gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rf
