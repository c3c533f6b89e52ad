// The one registry of ROCMFORGE_* environment switches: every switch's
// name, type, allowed values, default and one-line doc in one table
// (env.cpp), read from the environment once (env()), each value checked
// against its switch (a bad one is an rf::Error naming the variable and
// what it allows: rocmforge stops at start-up), and handed down as the
// plain struct Env. Nothing else in src/ or tests/ reads the environment.
// `rocmforge env` prints the table as markdown; docs/ENVIRONMENT.md holds
// it between markers, and a test fails when the two differ.
//
// Tuning (rows per warp, split costs, cluster sizes, ...) is not a switch:
// it is code, a per-device table (backend/cuda/tuning.h). The switches are
// what a user or a test run chooses.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rf {

enum class EnvType {
  Bool,  // 0 or 1
  Enum,  // one of `values`
  List,  // comma-separated words of `values`, each at most once
  File,  // the path of an existing file
  Dir,   // the path of an existing directory
  Token, // 1..1024 visible ASCII characters (no spaces)
};

struct EnvSwitch {
  const char* name;
  EnvType type;
  const char* values;    // Enum and List: the allowed words, '|'-separated; else ""
  const char* fallback;  // what applies when the variable is unset or empty
  const char* doc;
};

// The table, in the order the docs list it.
std::span<const EnvSwitch> env_switches();

// The switches' values. Unset and empty variables give the defaults.
struct Env {
  std::string model;     // ROCMFORGE_MODEL ("": none)
  std::string api_key;   // ROCMFORGE_API_KEY ("": none)
  std::string testdata;  // ROCMFORGE_TESTDATA ("": none)
  // ROCMFORGE_REQUIRE: the skips that become failures.
  bool require_testdata = false;
  bool require_gpu = false;
  bool require_multi_gpu = false;
  bool fusions = true;  // ROCMFORGE_FUSIONS
  // ROCMFORGE_KERNELS_OFF: the kernel families not to use (words of its
  // `values`).
  std::vector<std::string> kernels_off;
  bool profile = false;  // ROCMFORGE_PROFILE

  bool kernel_off(std::string_view family) const;
};

// The values `lookup` gives (the variable's value, or null when unset);
// throws rf::Error at the first bad one.
Env parse_env(const std::function<const char*(const char*)>& lookup);
// The process environment's values, read and checked on the first call
// (which throws rf::Error for a bad value), the same struct afterwards.
const Env& env();

// The table as markdown: one row per switch.
std::string env_markdown();
// s's value as the process environment has it, unchecked (null: unset):
// for `rocmforge env`, which shows them; everything else reads env().
const char* env_raw(const EnvSwitch& s);

}  // namespace rf
