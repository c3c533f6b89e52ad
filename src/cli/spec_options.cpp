// Speculative decoding options (see spec_options.h).
#include "cli/spec_options.h"

#include <cstdio>

#include "core/error.h"

namespace rf::cli {

void add_spec_options(CLI::App& cmd, SpecOptions& o) {
  cmd.add_option("--spec-type", o.type,
                 "Speculative decoding: none, or ngram (prompt lookup: the tokens that followed the latest earlier "
                 "occurrence of the sequence's last n tokens are proposed and verified in one forward pass), or "
                 "draft (a small model with the same vocabulary proposes, --model-draft); the output is the same as "
                 "without")
      ->check(CLI::IsMember({"none", "ngram", "draft"}))
      ->capture_default_str();
  cmd.add_option("--model-draft", o.model_draft,
                 "Speculative decoding: the draft model (a GGUF with the model's vocabulary; implies --spec-type "
                 "draft)")
      ->check(CLI::ExistingFile);
  cmd.add_option("--draft-max", o.draft_max, "Speculative decoding: proposed tokens per step at most")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd.add_option("--draft-min", o.draft_min, "Speculative decoding: a shorter proposal is not verified")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd.add_option("--spec-ngram-min", o.ngram_min, "N-gram speculation: the shortest suffix looked up")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd.add_option("--spec-ngram-max", o.ngram_max, "N-gram speculation: the longest suffix looked up (tried first)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

DraftModel load_draft_model(const SpecOptions& o, const BackendOptions& backend) {
  DraftModel d;
  if (o.model_draft.empty()) return d;
  RF_CHECK(backend.tensor_parallel == 1, "--model-draft: speculative decoding with a draft model is not supported "
                                         "with tensor parallelism");
  d.backends = make_backends(backend);
  d.model = load_model(o.model_draft, d.backends, false);
  return d;
}

SpeculativeConfig spec_config(const SpecOptions& o, const DraftModel* draft) {
  SpeculativeConfig c;
  const auto type = spec_type_from_name(o.type == "none" && !o.model_draft.empty() ? "draft" : o.type);
  RF_CHECK(type.has_value(), "--spec-type '", o.type, "': expected none, ngram or draft");
  c.type = *type;
  if (draft && draft->model) {
    c.draft = draft->model.get();
    c.draft_backend = &draft->backends.first();
  }
  c.draft_max = o.draft_max;
  c.draft_min = o.draft_min;
  c.ngram_min = o.ngram_min;
  c.ngram_max = o.ngram_max;
  c.validate();
  return c;
}

std::string spec_summary(const SpeculativeConfig& c, const EngineMetrics& m) {
  char line[160];
  std::snprintf(line, sizeof line, "%s: %llu of %llu proposed tokens accepted, %.2f tokens per verified proposal",
                spec_type_name(c.type), (unsigned long long)m.spec_accepted_tokens.load(),
                (unsigned long long)m.spec_draft_tokens.load(), m.spec_mean_acceptance_length());
  return line;
}

}  // namespace rf::cli
