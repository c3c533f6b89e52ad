// Locating the shared test data: $ROCMFORGE_TESTDATA, else ../shared/testdata
// beside the repository. Tests skip with a clear message when it is absent,
// unless ROCMFORGE_REQUIRE_GPU (=1, or =2 on a two-GPU machine) or
// ROCMFORGE_REQUIRE_TESTDATA=1 turn skips into failures (so a green run on
// the GPU machine means the tests ran).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace rf::test {

inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0";
}

// ROCMFORGE_REQUIRE_GPU=N: N GPUs are there, so a GPU test that needs up
// to N fails instead of skipping (any other non-zero value: 1).
inline int required_gpus() {
  const char* v = std::getenv("ROCMFORGE_REQUIRE_GPU");
  if (!env_flag("ROCMFORGE_REQUIRE_GPU")) return 0;
  const int n = std::atoi(v);
  return n > 0 ? n : 1;
}

inline std::string testdata_dir() {
  if (const char* d = std::getenv("ROCMFORGE_TESTDATA")) return d;
#ifdef ROCMFORGE_TESTDATA_DEFAULT
  return ROCMFORGE_TESTDATA_DEFAULT;
#else
  return "../shared/testdata";
#endif
}

inline std::string testdata_path(const std::string& rel) { return testdata_dir() + "/" + rel; }

// A test-data file's name as a GoogleTest parameter name:
// "arch/tiny-qwen2.gguf" -> "tiny_qwen2".
inline std::string testdata_param_name(const std::string& rel) {
  std::string n = rel.substr(rel.find_last_of('/') + 1);
  n = n.substr(0, n.find(".gguf"));
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

inline bool skips_are_failures() {
  return env_flag("ROCMFORGE_REQUIRE_TESTDATA") || env_flag("ROCMFORGE_REQUIRE_GPU");
}

}  // namespace rf::test

// Skips the test when a test-data file is missing (fails under REQUIRE).
#define RF_REQUIRE_TESTDATA(rel)                                                          \
  do {                                                                                   \
    const std::string _p = ::rf::test::testdata_path(rel);                               \
    if (!std::filesystem::exists(_p)) {                                                  \
      if (::rf::test::skips_are_failures()) FAIL() << "test data missing: " << _p;       \
      GTEST_SKIP() << "test data not found: " << _p << " (set ROCMFORGE_TESTDATA)";      \
    }                                                                                    \
  } while (0)
