// The speculative decoding options every engine command takes (serve, run,
// bench): --spec-type, --draft-max, --draft-min, --spec-ngram-min/max, read
// into the engine's SpeculativeConfig (engine/speculative.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/speculative.h"

namespace rf::cli {

struct SpecOptions {
  std::string type = "none";
  int draft_max = 4, draft_min = 1, ngram_min = 2, ngram_max = 3;
};

void add_spec_options(CLI::App& cmd, SpecOptions& o);
// Validated (throws rf::Error naming the bad option).
SpeculativeConfig spec_config(const SpecOptions& o);

}  // namespace rf::cli
