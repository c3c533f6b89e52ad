// The speculative decoding options every engine command takes (serve, run,
// bench): --spec-type, --draft-max, --draft-min, --spec-ngram-min/max,
// --model-draft, read into the engine's SpeculativeConfig
// (engine/speculative.h); the draft model is loaded here.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/backend_factory.h"
#include "engine/metrics.h"
#include "engine/speculative.h"

namespace rf::cli {

struct SpecOptions {
  std::string type = "none";  // "none" with a model_draft: draft
  std::string model_draft;
  int draft_max = 4, draft_min = 1, ngram_min = 2, ngram_max = 3;
};

void add_spec_options(CLI::App& cmd, SpecOptions& o);
// The draft model (--model-draft) on a backend of its own, made from the
// same backend options (one rank), or none.
struct DraftModel {
  BackendSet backends;
  std::unique_ptr<Model> model;
};
DraftModel load_draft_model(const SpecOptions& o, const BackendOptions& backend);
// Validated (throws rf::Error naming the bad option); `draft`: the loaded
// draft model, which must outlive the engine.
SpeculativeConfig spec_config(const SpecOptions& o, const DraftModel* draft = nullptr);
// "ngram: 119 of 259 proposed tokens accepted, 2.65 tokens per verified proposal".
std::string spec_summary(const SpeculativeConfig& c, const EngineMetrics& m);

}  // namespace rf::cli
