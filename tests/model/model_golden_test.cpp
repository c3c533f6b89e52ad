// Whole-model correctness on the CPU backend: stories260K greedy tokens and
// first-step logits against llama.cpp's golden file; the qtest models'
// logits against llama.cpp and against a float64 forward; batching several
// sequences together changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "gguf/reader.h"
#include "model/runner.h"
#include "reference/llama_ref.h"
#include "testdata.h"

namespace rf {
namespace {

// Reads JSON lines. The qtest file was written by Python with lone UTF-16
// surrogates (undecodable bytes) in greedy_text, which strict JSON parsers
// reject; those escapes become U+FFFD here (no test reads that text).
std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  std::string line;
  const std::regex lone_surrogate(R"(\\u[dD][c-fC-F][0-9a-fA-F]{2})");
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(std::regex_replace(line, lone_surrogate, "\\ufffd")));
  return out;
}

double rel_l2(const std::vector<float>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

TEST(ModelGolden, Stories260KGreedyMatchesLlamaCpp) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  CpuBackend backend(2);
  test::ModelRunner runner(test::testdata_path("stories260K.gguf"), backend);
  const auto golden = read_jsonl(test::testdata_path("stories260K.golden.jsonl"));
  ASSERT_FALSE(golden.empty());
  for (const auto& g : golden) {
    const auto prompt = g["prompt_tokens"].get<std::vector<int32_t>>();
    const auto expect = g["greedy_tokens"].get<std::vector<int32_t>>();
    std::vector<float> first;
    const auto got = runner.greedy(prompt, int(expect.size()), 2, &first);
    EXPECT_EQ(got, expect) << "prompt: " << g["prompt"];
    for (const auto& pair : g["first_step_top10"]) {
      const int32_t id = pair[0].get<int32_t>();
      const float logit = pair[1].get<float>();
      EXPECT_NEAR(first[size_t(id)], logit, 1e-4) << "token " << id << ", prompt " << g["prompt"];
    }
  }
  EXPECT_EQ(runner.pool().num_free(), runner.pool().num_blocks());
}

TEST(ModelGolden, Stories260KMatchesFloat64Forward) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  CpuBackend backend(2);
  const std::string path = test::testdata_path("stories260K.gguf");
  test::ModelRunner runner(path, backend);
  auto file = gguf::File::open(path);
  ref::LlamaRef ref(*file);
  std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338};
  test::ModelRunner::Seq s;
  s.tokens = prompt;
  const auto ours = runner.step({&s})[0];
  const auto want = ref.feed(prompt);
  EXPECT_LT(rel_l2(ours, want), 1e-5);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(ours[i], want[i], 1e-4) << i;
  // Decode steps continue to agree.
  for (int step = 0; step < 8; ++step) {
    const int32_t t = test::ModelRunner::argmax(ours);
    s.tokens.push_back(t);
    const auto o = runner.step({&s})[0];
    const auto w = ref.feed({t});
    EXPECT_LT(rel_l2(o, w), 1e-5) << "step " << step;
  }
  runner.release(s);
}

TEST(ModelGolden, BatchedSequencesMatchEachAlone) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  CpuBackend backend(2);
  test::ModelRunner runner(test::testdata_path("stories260K.gguf"), backend);
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 403, 407, 261, 378}, {1, 291, 376, 400, 428, 286, 261}, {1, 317, 391, 266, 267}};
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) {
    test::ModelRunner::Seq s;
    s.tokens = p;
    alone.push_back(runner.step({&s})[0]);
    s.tokens.push_back(100);
    alone.push_back(runner.step({&s})[0]);
    runner.release(s);
  }
  std::vector<test::ModelRunner::Seq> seqs(prompts.size());
  std::vector<test::ModelRunner::Seq*> ptrs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    seqs[i].tokens = prompts[i];
    ptrs.push_back(&seqs[i]);
  }
  auto together = runner.step(ptrs);
  for (auto& s : seqs) s.tokens.push_back(100);
  auto together2 = runner.step(ptrs);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(together[i], alone[2 * i]) << "sequence " << i;
    EXPECT_EQ(together2[i], alone[2 * i + 1]) << "sequence " << i << " decode";
  }
  for (auto& s : seqs) runner.release(s);
}

class QtestModels : public ::testing::TestWithParam<std::string> {};

TEST_P(QtestModels, LogitsMatchLlamaCppAndFloat64) {
  const std::string type = GetParam();
  RF_REQUIRE_TESTDATA("quant/qtest-" + type + ".gguf");
  const std::string path = test::testdata_path("quant/qtest-" + type + ".gguf");
  nlohmann::json rec;
  for (const auto& r : read_jsonl(test::testdata_path("quant/qtest.logits.jsonl")))
    if (r.value("model", "") == "qtest-" + type + ".gguf" || r.value("type", "") == type) rec = r;
  ASSERT_FALSE(rec.is_null()) << "no logits record for " << type;
  const auto prompt = rec["prompt_tokens"].get<std::vector<int32_t>>();
  const auto llama_logits = rec["first_step_logits"].get<std::vector<double>>();

  CpuBackend backend(2);
  test::ModelRunner runner(path, backend);
  test::ModelRunner::Seq s;
  s.tokens = prompt;
  const auto ours = runner.step({&s})[0];
  runner.release(s);
  auto file = gguf::File::open(path);
  ref::LlamaRef ref(*file);
  const auto exact = ref.feed(prompt);

  EXPECT_LT(rel_l2(ours, llama_logits), 2e-2) << type;
  EXPECT_LT(rel_l2(ours, exact), 1e-4) << type;
  double amax = 0;
  for (size_t i = 0; i < exact.size(); ++i) amax = std::max(amax, std::abs(double(ours[i]) - exact[i]));
  EXPECT_LT(amax, 1e-3) << type;
  EXPECT_EQ(test::ModelRunner::argmax(ours), int32_t(std::max_element(llama_logits.begin(), llama_logits.end()) -
                                                     llama_logits.begin()));
  // The i-quant and MXFP4 records' greedy tokens are ones the float64
  // forward also picks at every step (the data's README); the older
  // records' q2_k and q3_k paths are not, so they are not compared.
  if (type.rfind("iq", 0) == 0 || type == "mxfp4") {
    const auto want = rec["greedy_tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(runner.greedy(prompt, int(want.size()), -1), want) << type;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QtestModels,
                         ::testing::Values("f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k",
                                           "q5_k", "q6_k", "q4_k_m", "iq4_nl", "iq4_xs", "iq3_s", "iq3_xxs",
                                           "iq2_s", "iq2_xs", "iq2_xxs", "iq1_m", "iq1_s", "mxfp4"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rf
