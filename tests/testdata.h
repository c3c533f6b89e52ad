// Locating the shared test data: $ROCMFORGE_TESTDATA, else ../shared/testdata
// beside the repository (core/env.h reads the variables). Tests skip with a
// clear message when it is absent, unless ROCMFORGE_REQUIRE=testdata turns
// such skips into failures (so a green run means the tests ran).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <string>

#include "core/env.h"

namespace rf::test {

inline std::string testdata_dir() {
  if (!env().testdata.empty()) return env().testdata;
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

inline bool skips_are_failures() { return env().require_testdata; }

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
