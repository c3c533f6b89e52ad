// Speculative decoding's configuration and verification rule (see speculative.h).
#include "engine/speculative.h"

#include "core/error.h"

namespace rf {

const char* spec_type_name(SpecType t) {
  return t == SpecType::Ngram ? "ngram" : t == SpecType::Draft ? "draft" : "none";
}

std::optional<SpecType> spec_type_from_name(const std::string& name) {
  if (name == "none") return SpecType::None;
  if (name == "ngram") return SpecType::Ngram;
  if (name == "draft") return SpecType::Draft;
  return std::nullopt;
}

void SpeculativeConfig::validate() const {
  RF_CHECK(draft_max >= 0 && draft_max <= 64, "--draft-max ", draft_max, ": expected 0..64");
  RF_CHECK(draft_min >= 1 && draft_min <= std::max(draft_max, 1), "--draft-min ", draft_min, ": expected 1..",
           std::max(draft_max, 1), " (--draft-max)");
  RF_CHECK(ngram_min >= 1 && ngram_min <= ngram_max && ngram_max <= 64, "--spec-ngram-min ", ngram_min,
           " / --spec-ngram-max ", ngram_max, ": expected 1 <= min <= max <= 64");
  RF_CHECK((draft == nullptr) == (draft_backend == nullptr), "speculative: a draft model comes with its backend");
  RF_CHECK((type == SpecType::Draft) == (draft != nullptr),
           type == SpecType::Draft ? "--spec-type draft needs a draft model (--model-draft FILE)"
                                   : "a draft model (--model-draft) is only used with --spec-type draft");
}

int32_t accepted_prefix(std::span<const int32_t> draft, std::span<const SampleResult> drawn) {
  RF_CHECK(drawn.size() == draft.size() + 1, "speculative: ", drawn.size(), " rows drawn for ", draft.size(),
           " proposed tokens");
  int32_t n = 0;
  while (size_t(n) < draft.size() && drawn[size_t(n)].token == draft[size_t(n)]) ++n;
  return n;
}

}  // namespace rf
