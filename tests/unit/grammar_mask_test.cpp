// Token masks on the real stories260K vocabulary: the trie walk against a
// naive per-token reference, EOG exactly at accepting states, the cache, and
// a property test -- following masks with random token choices always ends
// in text that parses as JSON and satisfies the schema (checked by the
// independent checker in grammar_schema_check.h). Prints mask timings.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "grammar_schema_check.h"
#include "testdata.h"
#include "tokenizer/tokenizer.h"

namespace rf::grammar {
namespace {

using test::ojson;

const char* kPersonSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0},
    "mood": {"enum": ["happy", "sad"]},
    "pets": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
    "tall": {"type": ["boolean", "null"]}},
  "required": ["name", "mood", "pets"], "additionalProperties": false})";

class GrammarMask : public ::testing::Test {
 protected:
  void SetUp() override {
    RF_REQUIRE_TESTDATA("stories260K.gguf");
    tok_ = Tokenizer::from_file(rf::test::testdata_path("stories260K.gguf"));
    bytes_ = token_bytes(*tok_);
    trie_ = std::make_unique<TokenTrie>(bytes_);
    for (int32_t id = 0; id < tok_->n_vocab(); ++id)
      if (tok_->is_eog(id)) eog_.push_back(id);
    ASSERT_FALSE(eog_.empty());
  }

  // The reference: each token on its own through accept_bytes.
  std::vector<uint32_t> naive_mask(const Matcher& m, const State& s) const {
    std::vector<uint32_t> bits((bytes_.size() + 31) / 32, 0);
    for (size_t id = 0; id < bytes_.size(); ++id) {
      bool ok = tok_->is_eog(int32_t(id)) ? m.is_accepting(s)
                                          : !bytes_[id].empty() && m.accept_bytes(s, bytes_[id]).has_value();
      if (ok) bits[id / 32] |= 1u << (id % 32);
    }
    return bits;
  }

  std::unique_ptr<Tokenizer> tok_;
  std::vector<std::string> bytes_;
  std::unique_ptr<TokenTrie> trie_;
  std::vector<int32_t> eog_;
};

std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& mask, int32_t n) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n; ++id)
    if (mask_allows(mask, id)) ids.push_back(id);
  return ids;
}

TEST_F(GrammarMask, TrieWalkEqualsNaiveAlongRandomPaths) {
  for (const std::string& gbnf : {json_schema_to_gbnf(ojson::parse(kPersonSchema)), json_value_gbnf(),
                                  std::string("root ::= [α-ωa-c ]+ \"é\"? \".\"\n")}) {
    Matcher m(parse_gbnf(gbnf));
    Automaton automaton(m);
    TokenMasker masker(automaton, *trie_, eog_);
    std::mt19937 rng(7);
    int checked = 0;
    for (int run = 0; run < 8; ++run) {
      State s = m.initial();
      for (int step = 0; step < 60; ++step) {
        std::vector<uint32_t> mask = masker.compute(s);
        ASSERT_EQ(mask, naive_mask(m, s)) << gbnf << "step " << step;
        ++checked;
        bool eog_allowed = mask_allows(mask, eog_[0]);
        EXPECT_EQ(eog_allowed, m.is_accepting(s));
        std::vector<int32_t> ids = allowed_ids(mask, tok_->n_vocab());
        ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int32_t id) { return tok_->is_eog(id); }), ids.end());
        if (ids.empty()) break;
        s = *m.accept_bytes(s, bytes_[size_t(ids[rng() % ids.size()])]);
      }
    }
    EXPECT_GT(checked, 50);
  }
}

TEST_F(GrammarMask, PartialUtf8TokensAreMasked) {
  // stories260K has byte tokens <0xCE> etc.; only lead bytes that can start
  // a Greek letter (U+03B1..U+03C9: CE B1..CF 89) are allowed at the start.
  Matcher m(parse_gbnf("root ::= [α-ω]+\n"));
  Automaton automaton(m);
  TokenMasker masker(automaton, *trie_, eog_);
  std::vector<uint32_t> mask = masker.compute(m.initial());
  for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
    const std::string& b = bytes_[size_t(id)];
    if (b.size() != 1) continue;
    uint8_t c = uint8_t(b[0]);
    EXPECT_EQ(mask_allows(mask, id), c == 0xCE || c == 0xCF) << "byte " << int(c);
  }
  State half = *m.accept_bytes(m.initial(), "\xCE");
  EXPECT_FALSE(mask_allows(masker.compute(half), eog_[0]));
}

TEST_F(GrammarMask, RandomGenerationIsValidJsonForTheSchema) {
  ojson schema = ojson::parse(kPersonSchema);
  Matcher m(json_schema_grammar(schema));
  Automaton automaton(m);
  TokenMasker masker(automaton, *trie_, eog_);
  std::mt19937 rng(1234);
  int finished = 0;
  const int runs = 200;
  for (int run = 0; run < runs; ++run) {
    State s = m.initial();
    std::string text;
    bool ended = false;
    for (int step = 0; step < 400 && !ended; ++step) {
      const std::vector<uint32_t>& mask = masker.mask(s);
      std::vector<int32_t> ids = allowed_ids(mask, tok_->n_vocab());
      ASSERT_FALSE(ids.empty()) << "dead end after: " << text;
      int32_t id = ids[rng() % ids.size()];
      if (tok_->is_eog(id)) {
        ended = true;
        break;
      }
      text += bytes_[size_t(id)];
      std::optional<State> next = m.accept_bytes(s, bytes_[size_t(id)]);
      ASSERT_TRUE(next.has_value()) << "masked token rejected: " << text;
      s = std::move(*next);
    }
    if (!ended) continue;  // length cap (e.g. long numbers): nothing to check
    ++finished;
    ojson v = ojson::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << "not JSON: " << text;
    EXPECT_TRUE(test::schema_valid(v, schema, schema)) << "fails the schema: " << text;
  }
  EXPECT_GE(finished, runs / 2);
  const MaskStats& st = masker.stats();
  std::printf(
      "[ mask    ] person schema, %d runs (%d finished): %llu computed "
      "(mean %.1f us, max %.1f us), %llu cache hits, "
      "%zu automaton states (%.1f MB)\n",
      runs, finished, (unsigned long long)st.computed, st.mean_us(), st.max_us, (unsigned long long)st.cache_hits,
      automaton.size(), double(automaton.memory_bytes()) / 1e6);
}

TEST_F(GrammarMask, CacheAndTiming) {
  Matcher m(parse_gbnf(json_value_gbnf()));
  Automaton automaton(m);
  TokenMasker masker(automaton, *trie_, eog_);
  // A set of states along one JSON text.
  const std::string text = R"({"name": "Lily", "toys": [1, 2.5, true, null, {"a": "b"}], "happy": false})";
  std::vector<State> states{m.initial()};
  for (char c : text) states.push_back(*m.accept_byte(states.back(), uint8_t(c)));
  ASSERT_TRUE(m.is_accepting(states.back()));
  std::vector<double> uncached, cached;
  for (const State& s : states) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<uint32_t> fresh = masker.compute(s);
    auto t1 = std::chrono::steady_clock::now();
    masker.mask(s);
    auto t2 = std::chrono::steady_clock::now();
    const std::vector<uint32_t>& again = masker.mask(s);
    auto t3 = std::chrono::steady_clock::now();
    EXPECT_EQ(again, fresh);
    uncached.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    cached.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
    (void)t2;
  }
  EXPECT_GE(masker.stats().cache_hits, states.size());
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf(
      "[ mask    ] any-JSON grammar, stories260K (%d tokens, %zu trie "
      "nodes), %zu states: median %.1f us uncached, "
      "%.2f us cached\n",
      tok_->n_vocab(), trie_->n_nodes(), states.size(), median(uncached), median(cached));
}

// A larger vocabulary (stories pieces plus random concatenations of 2-4 of
// them, 32768 tokens) to see how the trie walk scales; the mask must still
// equal the per-token reference.
TEST_F(GrammarMask, LargerSyntheticVocabulary) {
  std::mt19937 rng(99);
  std::vector<std::string> big = bytes_;
  while (big.size() < 32768) {
    std::string t;
    for (int k = 2 + int(rng() % 3); k > 0; --k) t += bytes_[rng() % bytes_.size()];
    big.push_back(t);
  }
  TokenTrie trie(big);
  Matcher m(parse_gbnf(json_value_gbnf()));
  Automaton automaton(m);
  TokenMasker masker(automaton, trie, eog_);
  const std::string text = R"({"name": "Lily", "toys": [1, 2.5, true, null, {"a": "b"}], "happy": false})";
  std::vector<State> states{m.initial()};
  for (char c : text) states.push_back(*m.accept_byte(states.back(), uint8_t(c)));
  std::vector<double> us;
  for (size_t i = 0; i < states.size(); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<uint32_t> mask = masker.compute(states[i]);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (i % 16 == 0) {  // the reference is slow (seconds under ASan): a sample of states
      for (size_t id = 0; id < big.size(); ++id) {
        bool ok = tok_->is_eog(int32_t(id)) ? m.is_accepting(states[i])
                                            : !big[id].empty() && m.accept_bytes(states[i], big[id]).has_value();
        ASSERT_EQ(mask_allows(mask, int32_t(id)), ok) << "state " << i << " token " << id;
      }
    }
  }
  std::sort(us.begin(), us.end());
  std::printf(
      "[ mask    ] any-JSON grammar, synthetic %zu-token vocabulary "
      "(%zu trie nodes): median %.0f us, max %.0f us "
      "per uncached mask\n",
      big.size(), trie.n_nodes(), us[us.size() / 2], us.back());
}

}  // namespace
}  // namespace rf::grammar

namespace rf::grammar {
namespace {

// A real BPE vocabulary (GPT-2's 50257 tokens): masks along random walks of
// the person schema equal the per-token reference at sampled states, and the
// times of masks computed with a cold and a warm automaton are printed (a
// warm one has met the states before, as a grammar shared by many requests
// has).
TEST(GrammarMaskBpe, Gpt2VocabularyPersonSchema) {
  RF_REQUIRE_TESTDATA("vocab/ggml-vocab-gpt-2.gguf");
  auto tok = Tokenizer::from_file(rf::test::testdata_path("vocab/ggml-vocab-gpt-2.gguf"));
  const std::vector<std::string> bytes = token_bytes(*tok);
  TokenTrie trie(bytes);
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tok->n_vocab(); ++id)
    if (tok->is_eog(id)) eog.push_back(id);
  ASSERT_FALSE(eog.empty());
  Matcher m(json_schema_grammar(ojson::parse(kPersonSchema)));
  Automaton automaton(m);
  TokenMasker masker(automaton, trie, eog);
  std::mt19937 rng(5);
  std::vector<double> cold, warm;
  int checked = 0;
  for (int run = 0; run < 12; ++run) {
    if (run == 6) masker.clear_cache();  // runs 6.. recompute masks over a warm automaton
    State s = m.initial();
    for (int step = 0; step < 80; ++step) {
      const uint64_t before = masker.stats().computed;
      std::vector<uint32_t> mask = masker.mask(s);
      if (masker.stats().computed > before) (run < 6 ? cold : warm).push_back(masker.stats().last_us);
      if (step % 23 == 5 && checked < 4) {  // the reference walks every token (slow): a few states
        ++checked;
        for (int32_t id = 0; id < tok->n_vocab(); ++id) {
          bool ok = tok->is_eog(id) ? m.is_accepting(s)
                                    : !bytes[size_t(id)].empty() && m.accept_bytes(s, bytes[size_t(id)]).has_value();
          ASSERT_EQ(mask_allows(mask, id), ok) << "token " << id;
        }
      }
      std::vector<int32_t> ids = allowed_ids(mask, tok->n_vocab());
      ASSERT_FALSE(ids.empty());
      const int32_t id = ids[rng() % ids.size()];
      if (tok->is_eog(id)) break;
      s = *m.accept_bytes(s, bytes[size_t(id)]);
    }
  }
  EXPECT_EQ(checked, 4);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  auto max = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
  std::printf(
      "[ mask    ] person schema, GPT-2 vocabulary (%d tokens, %zu "
      "trie nodes): %zu masks computed cold "
      "(median %.0f us, max %.0f us), %zu warm (median %.0f us, max "
      "%.0f us); %zu automaton states (%.1f MB)\n",
      tok->n_vocab(), trie.n_nodes(), cold.size(), median(cold), max(cold), warm.size(), median(warm), max(warm),
      automaton.size(), double(automaton.memory_bytes()) / 1e6);
}

}  // namespace
}  // namespace rf::grammar
