// Tokenizer conformance against llama.cpp's vocab vectors: for every
// vocab/<name>.gguf.inp in the test data (with .gguf and .gguf.out beside
// it), each input must encode (add_special off, parse_special off) to exactly
// the ids llama.cpp produced. Files are discovered at run time, so vector
// files added later are checked too; each vocabulary is its own test.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "gguf/reader.h"
#include "testdata.h"
#include "tokenizer/tokenizer.h"

namespace rf {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Inputs are terminated by "\n__ggml_vocab_test__\n".
std::vector<std::string> parse_inputs(const std::string& s) {
  static const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    out.push_back(s.substr(pos, hit - pos));
  return out;
}

std::vector<std::vector<int32_t>> parse_outputs(const std::string& s) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream lines(s);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ids(line);
    out.emplace_back();
    for (long long id; ids >> id;) out.back().push_back(int32_t(id));
  }
  return out;
}

std::string escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c == '\r') o += "\\r";
    else o += char(c);
  }
  return o;
}

std::string ids_str(const std::vector<int32_t>& v) {
  std::string o;
  for (int32_t id : v) o += " " + std::to_string(id);
  return o;
}

std::vector<std::string> vocab_inputs() {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path dir = rf::test::testdata_path("vocab");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 9 && name.ends_with(".gguf.inp")) out.push_back(name.substr(0, name.size() - 4));
  }
  std::sort(out.begin(), out.end());
  return out;
}

class VocabConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabConformance, MatchesLlamaCpp) {
  const std::string gguf_rel = "vocab/" + GetParam();
  RF_REQUIRE_TESTDATA(gguf_rel);
  RF_REQUIRE_TESTDATA(gguf_rel + ".out");
  auto f = gguf::File::open(rf::test::testdata_path(gguf_rel));
  const std::string model = f->get_string("tokenizer.ggml.model", "");
  if (model != "llama" && model != "gpt2")
    GTEST_SKIP() << GetParam() << ": tokenizer model '" << model << "' is not supported (llama, gpt2 only)";
  auto tok = Tokenizer::from_gguf(*f);

  const auto inputs = parse_inputs(read_file(rf::test::testdata_path(gguf_rel + ".inp")));
  const auto expected = parse_outputs(read_file(rf::test::testdata_path(gguf_rel + ".out")));
  ASSERT_FALSE(inputs.empty());
  ASSERT_EQ(inputs.size(), expected.size()) << "inputs and expected outputs differ in count";
  size_t passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto got = tok->encode(inputs[i], /*add_special=*/false, /*parse_special=*/false);
    if (got == expected[i]) {
      ++passed;
      continue;
    }
    ADD_FAILURE() << GetParam() << " case " << i << " '" << escape(inputs[i]) << "'\n  expected:" << ids_str(expected[i])
                  << "\n  got:     " << ids_str(got);
  }
  std::printf("%s (%s, pre '%s'): %zu/%zu cases passed\n", GetParam().c_str(), model.c_str(),
              tok->vocab().pre.c_str(), passed, inputs.size());
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Vectors, VocabConformance, ::testing::ValuesIn(vocab_inputs()), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(VocabConformance);

TEST(VocabConformance, VectorFilesPresent) {
  RF_REQUIRE_TESTDATA("vocab/ggml-vocab-llama-spm.gguf.inp");
  EXPECT_GE(vocab_inputs().size(), 3u);
}

}  // namespace
}  // namespace rf
