// The switch table, the checks of each type, and the markdown the docs
// hold (env.h).
#include "core/env.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"

namespace rf {

namespace {

constexpr EnvSwitch kSwitches[] = {
    {"ROCMFORGE_MODEL", EnvType::File, "", "none",
     "the model `rocmforge` runs when no -m is given"},
    {"ROCMFORGE_API_KEY", EnvType::Token, "", "none",
     "the API key `rocmforge serve` requires when no --api-key is given"},
    {"ROCMFORGE_TESTDATA", EnvType::Dir, "", "../shared/testdata",
     "the test data folder (stories260K.gguf, goldens, arch/) for tests and the default model"},
    {"ROCMFORGE_REQUIRE", EnvType::List, "testdata|gpu|multi-gpu", "none",
     "tests that would skip for want of the test data, a GPU or two GPUs fail instead"},
    {"ROCMFORGE_FUSIONS", EnvType::Enum, "on|off", "on",
     "off: every fused GPU kernel off, each op in launches of its own (for debugging)"},
    {"ROCMFORGE_KERNELS_OFF", EnvType::List,
     "pdl|tma|wgmma|mma|stream-gemv|prefill-mma|fp8-gemm|attn-cluster|peer-all-reduce", "none",
     "GPU kernel families not to use (docs/ENVIRONMENT.md says what each falls back to)"},
    {"ROCMFORGE_PROFILE", EnvType::Bool, "", "0",
     "1: time every GPU op and print the table at exit (CUDA graphs off)"},
};

std::vector<std::string_view> words_of(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    const size_t end = s.find(sep, pos);
    out.push_back(s.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos));
    if (end == std::string_view::npos) return out;
    pos = end + 1;
  }
}

std::string allowed_text(const EnvSwitch& s) {
  switch (s.type) {
    case EnvType::Bool: return "0 or 1";
    case EnvType::Enum:
    case EnvType::List: {
      std::string t;
      for (std::string_view w : words_of(s.values, '|')) t += (t.empty() ? "" : ", ") + std::string(w);
      return s.type == EnvType::Enum ? "one of " + t : "a comma-separated list of " + t;
    }
    case EnvType::File: return "the path of an existing file";
    case EnvType::Dir: return "the path of an existing directory";
    case EnvType::Token: return "1 to 1024 visible ASCII characters, no spaces";
  }
  return "";
}

// The checked value of switch s (v non-empty), as its words for lists.
std::vector<std::string> check(const EnvSwitch& s, const std::string& v) {
  const auto bad = [&](auto&&... why) {
    fail(s.name, "=", v, ": ", why..., " (", s.name, " takes ", allowed_text(s), ")");
  };
  std::vector<std::string> words;
  const std::vector<std::string_view> allowed = words_of(s.values, '|');
  switch (s.type) {
    case EnvType::Bool:
      if (v != "0" && v != "1") bad("not a boolean");
      words.push_back(v);
      break;
    case EnvType::Enum:
      if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) bad("not an allowed value");
      words.push_back(v);
      break;
    case EnvType::List:
      for (std::string_view w : words_of(v, ',')) {
        if (w.empty()) bad("an empty item");
        if (std::find(allowed.begin(), allowed.end(), w) == allowed.end()) bad("'", w, "' is not an allowed item");
        if (std::find(words.begin(), words.end(), w) != words.end()) bad("'", w, "' given twice");
        words.emplace_back(w);
      }
      break;
    case EnvType::File: {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(v, ec)) bad("no such file");
      words.push_back(v);
      break;
    }
    case EnvType::Dir: {
      std::error_code ec;
      if (!std::filesystem::is_directory(v, ec)) bad("no such directory");
      words.push_back(v);
      break;
    }
    case EnvType::Token:
      if (v.size() > 1024) bad("longer than 1024 characters");
      for (char c : v)
        if (c < 0x21 || c > 0x7e) bad("a space or a character outside visible ASCII");
      words.push_back(v);
      break;
  }
  return words;
}

bool has(const std::vector<std::string>& words, std::string_view w) {
  return std::find(words.begin(), words.end(), w) != words.end();
}

}  // namespace

std::span<const EnvSwitch> env_switches() { return kSwitches; }

bool Env::kernel_off(std::string_view family) const { return has(kernels_off, family); }

Env parse_env(const std::function<const char*(const char*)>& lookup) {
  Env e;
  for (const EnvSwitch& s : kSwitches) {
    const char* raw = lookup(s.name);
    if (!raw || !*raw) continue;
    const std::vector<std::string> w = check(s, raw);
    const std::string_view name = s.name;
    if (name == "ROCMFORGE_MODEL") e.model = w[0];
    else if (name == "ROCMFORGE_API_KEY") e.api_key = w[0];
    else if (name == "ROCMFORGE_TESTDATA") e.testdata = w[0];
    else if (name == "ROCMFORGE_REQUIRE") {
      e.require_testdata = has(w, "testdata");
      e.require_gpu = has(w, "gpu");
      e.require_multi_gpu = has(w, "multi-gpu");
    } else if (name == "ROCMFORGE_FUSIONS") e.fusions = w[0] == "on";
    else if (name == "ROCMFORGE_KERNELS_OFF") e.kernels_off = w;
    else if (name == "ROCMFORGE_PROFILE") e.profile = w[0] == "1";
    else fail("env: switch ", name, " has no field");  // (a table entry without its field)
  }
  return e;
}

const Env& env() {
  static const Env e = parse_env([](const char* name) { return std::getenv(name); });
  return e;
}

const char* env_raw(const EnvSwitch& s) { return std::getenv(s.name); }

std::string env_markdown() {
  std::string t = "| Variable | Takes | Default | What it does |\n|---|---|---|---|\n";
  for (const EnvSwitch& s : kSwitches)
    t += str("| `", s.name, "` | ", allowed_text(s), " | ", s.fallback, " | ", s.doc, " |\n");
  return t;
}

}  // namespace rf
