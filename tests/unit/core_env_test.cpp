// The environment switch registry (core/env.h): every switch parses its
// good values and rejects a bad one with a message naming the variable and
// what it takes; unset and empty variables give the defaults; the table in
// docs/ENVIRONMENT.md is the one the registry prints.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "core/env.h"
#include "core/error.h"

namespace rf {
namespace {

Env parse(const std::map<std::string, std::string>& vars) {
  return parse_env([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string rejection(const std::string& name, const std::string& value) {
  try {
    parse({{name, value}});
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(CoreEnv, UnsetAndEmptyGiveTheDefaults) {
  std::map<std::string, std::string> empty;
  for (const EnvSwitch& s : env_switches()) empty[s.name] = "";
  for (const Env& e : {parse({}), parse(empty)}) {
    EXPECT_TRUE(e.model.empty() && e.api_key.empty() && e.testdata.empty());
    EXPECT_FALSE(e.require_testdata || e.require_gpu || e.require_multi_gpu);
    EXPECT_TRUE(e.fusions);
    EXPECT_TRUE(e.kernels_off.empty());
    EXPECT_FALSE(e.profile);
  }
}

TEST(CoreEnv, GoodValues) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string file = dir + "/rocmforge_env_test.gguf";
  std::ofstream(file) << "x";
  const Env e = parse({{"ROCMFORGE_MODEL", file},
                       {"ROCMFORGE_API_KEY", "sk-abc_123.XYZ"},
                       {"ROCMFORGE_TESTDATA", dir},
                       {"ROCMFORGE_REQUIRE", "gpu,testdata"},
                       {"ROCMFORGE_FUSIONS", "off"},
                       {"ROCMFORGE_KERNELS_OFF", "wgmma,pdl"},
                       {"ROCMFORGE_PROFILE", "1"}});
  EXPECT_EQ(e.model, file);
  EXPECT_EQ(e.api_key, "sk-abc_123.XYZ");
  EXPECT_EQ(e.testdata, dir);
  EXPECT_TRUE(e.require_testdata && e.require_gpu && !e.require_multi_gpu);
  EXPECT_FALSE(e.fusions);
  EXPECT_TRUE(e.kernel_off("wgmma") && e.kernel_off("pdl") && !e.kernel_off("mma"));
  EXPECT_TRUE(e.profile);
  EXPECT_TRUE(parse({{"ROCMFORGE_REQUIRE", "multi-gpu"}}).require_multi_gpu);
  EXPECT_TRUE(parse({{"ROCMFORGE_FUSIONS", "on"}}).fusions);
  EXPECT_FALSE(parse({{"ROCMFORGE_PROFILE", "0"}}).profile);
  std::filesystem::remove(file);
}

// One bad value per switch: rejected, the message naming the variable, the
// value and what the switch takes.
struct Bad {
  const char* name;
  const char* value;
  const char* takes;  // part of the message
};
class CoreEnvRejects : public ::testing::TestWithParam<Bad> {};

TEST_P(CoreEnvRejects, ABadValue) {
  const Bad b = GetParam();
  const std::string msg = rejection(b.name, b.value);
  EXPECT_NE(msg.find(std::string(b.name) + "=" + b.value + ":"), std::string::npos) << msg;
  EXPECT_NE(msg.find(b.takes), std::string::npos) << msg;
}

const Bad kBad[] = {
    {"ROCMFORGE_MODEL", "/no/such/model.gguf", "the path of an existing file"},
    {"ROCMFORGE_API_KEY", "two words", "visible ASCII"},
    {"ROCMFORGE_TESTDATA", "/no/such/folder", "the path of an existing directory"},
    {"ROCMFORGE_REQUIRE", "gpu,disk", "testdata, gpu, multi-gpu"},
    {"ROCMFORGE_FUSIONS", "0", "one of on, off"},
    {"ROCMFORGE_KERNELS_OFF", "wgma", "pdl, tma, wgmma"},
    {"ROCMFORGE_PROFILE", "yes", "0 or 1"},
};
INSTANTIATE_TEST_SUITE_P(EverySwitch, CoreEnvRejects, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return std::string(info.param.name).substr(10); });

TEST(CoreEnv, EverySwitchHasARejectionCase) {
  for (const EnvSwitch& s : env_switches()) {
    bool found = false;
    for (const Bad& b : kBad) found = found || std::string(b.name) == s.name;
    EXPECT_TRUE(found) << s.name << " has no bad-value case in kBad";
  }
}

TEST(CoreEnv, ListsRejectEmptyAndRepeatedItems) {
  EXPECT_NE(rejection("ROCMFORGE_KERNELS_OFF", "pdl,,tma").find("an empty item"), std::string::npos);
  EXPECT_NE(rejection("ROCMFORGE_REQUIRE", "gpu,gpu").find("given twice"), std::string::npos);
  EXPECT_NE(rejection("ROCMFORGE_API_KEY", std::string(1025, 'k')).find("longer than 1024"), std::string::npos);
}

TEST(CoreEnv, TheDocsHoldTheRegistrysTable) {
  const std::string path = std::string(ROCMFORGE_DOCS_DIR) + "/ENVIRONMENT.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- env-table:", end = "<!-- end env-table -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_TRUE(b != std::string::npos && e != std::string::npos && b < e) << path << " has no env-table markers";
  const size_t body = doc.find('\n', b) + 1;
  EXPECT_EQ(doc.substr(body, e - body), env_markdown())
      << path << "'s table differs from the registry's: paste the output of `rocmforge env --markdown` there";
}

}  // namespace
}  // namespace rf
