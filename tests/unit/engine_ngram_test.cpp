// The n-gram (prompt lookup) proposer and the verification rule of
// speculative decoding (engine/proposer_ngram.h, engine/speculative.h), by
// hand-worked cases: the longest suffix with an earlier occurrence wins, its
// most recent occurrence is used, proposals stop at the limit or the end of
// the tokens, and nothing is proposed without a match; the accepted prefix
// is the leading run that the rows drew. Also the configuration's checks.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/proposer_ngram.h"
#include "engine/speculative.h"

namespace rf {
namespace {

std::vector<int32_t> propose(const NgramProposer& p, std::vector<int32_t> tokens, int32_t max) {
  std::vector<int32_t> out = {99};  // replaced
  p.propose(tokens, max, out);
  return out;
}

TEST(NgramProposer, LongestSuffixMostRecentOccurrence) {
  const NgramProposer p(1, 3);
  // The 3-gram (9, 2, 3) has no earlier occurrence; (2, 3) occurs at 1 and 6: the most recent, 6, goes on 8, 9, 2, 3.
  EXPECT_EQ(propose(p, {1, 2, 3, 4, 5, 7, 2, 3, 8, 9, 2, 3}, 4), (std::vector<int32_t>{8, 9, 2, 3}));
  // The 3-gram (5, 2, 3) occurs at 3: it wins over the more recent 2-gram at 8.
  EXPECT_EQ(propose(p, {0, 0, 0, 5, 2, 3, 6, 0, 2, 3, 7, 0, 5, 2, 3}, 2), (std::vector<int32_t>{6, 0}));
  // Only the last token matches (1-gram): its latest earlier occurrence at 2.
  EXPECT_EQ(propose(p, {4, 9, 4, 8, 1, 4}, 3), (std::vector<int32_t>{8, 1, 4}));
}

TEST(NgramProposer, LimitsAndNoMatch) {
  const NgramProposer p(1, 3);
  EXPECT_EQ(propose(p, {1, 2, 3, 1, 2}, 1), (std::vector<int32_t>{3}));
  // The continuation runs into the end of the tokens.
  EXPECT_EQ(propose(p, {5, 6, 5}, 8), (std::vector<int32_t>{6, 5}));
  EXPECT_TRUE(propose(p, {1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(propose(p, {7}, 4).empty());
  EXPECT_TRUE(propose(p, {}, 4).empty());
  EXPECT_TRUE(propose(p, {1, 2, 1}, 0).empty());
  // With n-grams of 2..3 a single repeated token is not enough.
  const NgramProposer p2(2, 3);
  EXPECT_TRUE(propose(p2, {4, 9, 5, 8, 1, 4}, 3).empty());
  EXPECT_EQ(propose(p2, {4, 9, 5, 8, 4, 9}, 3), (std::vector<int32_t>{5, 8, 4}));
  // A repeating run proposes its own continuation (the match overlaps the suffix).
  EXPECT_EQ(propose(p, {3, 3, 3, 3}, 4), (std::vector<int32_t>{3}));
  EXPECT_THROW(NgramProposer(0, 3), Error);
  EXPECT_THROW(NgramProposer(3, 2), Error);
}

std::vector<SampleResult> drawn(std::vector<int32_t> tokens) {
  std::vector<SampleResult> out;
  for (int32_t t : tokens) out.push_back(SampleResult{t, 0.0f, {}});
  return out;
}

TEST(SpeculativeVerify, AcceptedPrefix) {
  const std::vector<int32_t> draft = {5, 6, 7};
  EXPECT_EQ(accepted_prefix(draft, drawn({5, 6, 7, 8})), 3);
  EXPECT_EQ(accepted_prefix(draft, drawn({5, 6, 9, 7})), 2);
  EXPECT_EQ(accepted_prefix(draft, drawn({4, 6, 7, 8})), 0);
  // A later row agreeing after a mismatch counts for nothing.
  EXPECT_EQ(accepted_prefix(draft, drawn({5, 1, 7, 8})), 1);
  EXPECT_EQ(accepted_prefix({}, drawn({3})), 0);
  EXPECT_THROW(accepted_prefix(draft, drawn({5, 6, 7})), Error);
}

TEST(SpeculativeConfig, Validation) {
  SpeculativeConfig c;
  c.type = SpecType::Ngram;
  EXPECT_NO_THROW(c.validate());
  c.draft_min = 5;  // above draft_max 4
  EXPECT_THROW(c.validate(), Error);
  c.draft_min = 1;
  c.ngram_min = 4;  // above ngram_max 3
  EXPECT_THROW(c.validate(), Error);
  EXPECT_EQ(spec_type_from_name("ngram"), SpecType::Ngram);
  EXPECT_EQ(spec_type_from_name("none"), SpecType::None);
  EXPECT_EQ(spec_type_from_name("draft"), SpecType::Draft);
  EXPECT_FALSE(spec_type_from_name("eagle").has_value());
  EXPECT_STREQ(spec_type_name(SpecType::Ngram), "ngram");
  // A draft model comes with its backend, and only with SpecType::Draft.
  c.type = SpecType::Draft;
  EXPECT_THROW(c.validate(), Error);
}

}  // namespace
}  // namespace rf
