// Structured output in the engine on the CPU with stories260K: requests with
// a JSON schema (greedy and sampled, submitted together) end with "stop" on
// text that parses and satisfies the schema (independent checker), and
// requests with the same grammar share its compiled form: a repeat of a
// greedy request computes no new mask and produces the same text.
#include <gtest/gtest.h>

#include "grammar/json_schema.h"
#include "unit/engine_test_util.h"
#include "unit/grammar_schema_check.h"

namespace rf {
namespace {

using grammar::test::ojson;

const char* kSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 10},
    "age": {"type": "integer", "minimum": 1, "maximum": 99},
    "mood": {"enum": ["happy", "sad"]}},
  "required": ["name", "age", "mood"], "additionalProperties": false})";

TEST(EngineGrammar, SchemaRequestsAreValidAndShareTheCompiledGrammar) {
  RF_REQUIRE_TESTDATA("stories260K.gguf");
  test::Stories st;
  auto engine = st.engine(test::config(128));
  const ojson schema = ojson::parse(kSchema);
  auto grammar = std::make_shared<const grammar::Grammar>(grammar::json_schema_grammar(schema));
  const std::vector<int32_t> prompt = st.tok().encode("Lily met a", true, false);
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) {
    Request r = test::greedy(prompt, 120);
    if (i >= 2) r.sampling.temperature = 1.0f, r.sampling.seed = uint64_t(i);
    // A fresh but equal grammar object per request: sharing goes by content.
    r.grammar = std::make_shared<const grammar::Grammar>(*grammar);
    reqs.push_back(std::move(r));
  }
  const auto outs = test::run_all(*engine, reqs);
  for (const auto& o : outs) {
    SCOPED_TRACE(o.text);
    EXPECT_EQ(o.reason, FinishReason::Stop);
    const ojson v = ojson::parse(o.text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << "not JSON";
    EXPECT_TRUE(grammar::test::schema_valid(v, schema, schema));
  }
  EXPECT_EQ(outs[0].text, outs[1].text);
  const uint64_t computed = engine->metrics().grammar_masks_computed.load();
  EXPECT_GT(computed, 0u);
  EXPECT_GT(engine->metrics().grammar_mask_cache_hits.load(), 0u);
  EXPECT_GT(engine->metrics().grammar_mask.count(), 0u);

  const test::Output again = test::run_one(*engine, reqs[0]);
  EXPECT_EQ(again.text, outs[0].text);
  EXPECT_EQ(engine->metrics().grammar_masks_computed.load(), computed) << "a repeat found its masks cached";
  test::expect_idle(*engine);
}

}  // namespace
}  // namespace rf
