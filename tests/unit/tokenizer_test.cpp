// Tokenizer behaviour beyond the conformance vectors: the stories260K golden
// prompts (BOS + parse-special, from llama.cpp), special-token splitting on a
// small synthetic vocabulary, decode round trips, and speed.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/error.h"
#include "gguf/reader.h"
#include "testdata.h"
#include "tokenizer/tokenizer.h"
#include "gguf/writer.h"

namespace rf {
namespace {

// A small SentencePiece-style vocabulary: <unk> <s> </s>, the 256 byte
// tokens, a few pieces with scores, two overlapping control tokens, a
// user-defined token and a control token overlapping those.
class SynthSpm {
 public:
  SynthSpm() {
    add("<unk>", 0, 2);
    add("<s>", 0, 3);
    add("</s>", 0, 3);
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      add(hex, 0, 6);
    }
    add("\xE2\x96\x81", -5, 1);
    add("a", -3, 1);
    add("b", -3, 1);
    add("x", -3, 1);
    add("\xE2\x96\x81" "a", -1, 1);
    add("ab", -2, 1);
    add("<|ab|>", 0, 3);
    add("<|ab|>x", 0, 3);
    add("@@", 0, 4);
    add("b<|", 0, 3);
  }
  std::unique_ptr<Tokenizer> tokenizer() const {
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_strings("tokenizer.ggml.tokens", texts_);
    w.set_f32s("tokenizer.ggml.scores", scores_);
    w.set_i32s("tokenizer.ggml.token_type", types_);
    const auto bytes = w.to_bytes();
    return Tokenizer::from_gguf(*gguf::File::from_bytes(bytes.data(), bytes.size()));
  }
  int32_t id(const std::string& t) const {
    for (size_t i = 0; i < texts_.size(); ++i)
      if (texts_[i] == t) return int32_t(i);
    ADD_FAILURE() << "no token " << t;
    return -1;
  }
  int32_t byte(unsigned char c) const { return 3 + c; }
  int32_t size() const { return int32_t(texts_.size()); }

 private:
  void add(const std::string& t, float score, int32_t type) {
    texts_.push_back(t);
    scores_.push_back(score);
    types_.push_back(type);
  }
  std::vector<std::string> texts_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;
};

std::unique_ptr<Tokenizer> load_vocab(const std::string& rel) {
  return Tokenizer::from_file(test::testdata_path(rel));
}

TEST(TokenizerStories, GoldenPromptTokens) {
  RF_REQUIRE_TESTDATA("stories260K.golden.jsonl");
  auto tok = load_vocab("stories260K.gguf");
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_EQ(tok->vocab().pad, -1);  // 4294967295 in the file means none
  EXPECT_EQ(tok->vocab().sep, -1);

  std::ifstream in(test::testdata_path("stories260K.golden.jsonl"));
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    const std::string prompt = j.at("prompt");
    const auto expected = j.at("prompt_tokens").get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(prompt, /*add_special=*/true, /*parse_special=*/true), expected) << prompt;
    EXPECT_EQ(tok->decode(expected), prompt);
    // The generated text is the generated tokens' pieces, concatenated.
    const auto gen = j.at("greedy_tokens").get<std::vector<int32_t>>();
    std::string pieces;
    for (int32_t id : gen) pieces += tok->token_to_piece(id);
    EXPECT_EQ(pieces, j.at("greedy_text").get<std::string>());
    ++n;
  }
  EXPECT_EQ(n, 4);
}

TEST(TokenizerSpecial, LlamaSpmControlTokens) {
  RF_REQUIRE_TESTDATA("vocab/ggml-vocab-llama-spm.gguf");
  auto tok = load_vocab("vocab/ggml-vocab-llama-spm.gguf");
  const auto hello = tok->encode("Hello", false, false);
  const auto world = tok->encode("world", false, false);
  // Parsed: "<s>" and "</s>" become ids 1 and 2; the text after a special
  // token gets its own space prefix, like the start of the input.
  std::vector<int32_t> want = hello;
  want.push_back(1);
  want.insert(want.end(), world.begin(), world.end());
  want.push_back(2);
  EXPECT_EQ(tok->encode("Hello<s>world</s>", false, true), want);
  // Not parsed: plain text, no control ids.
  const auto plain = tok->encode("Hello<s>world</s>", false, false);
  for (int32_t id : plain) EXPECT_FALSE(id == 1 || id == 2);
  EXPECT_EQ(tok->decode(plain), "Hello<s>world</s>");
  // Rendering.
  EXPECT_EQ(tok->token_to_piece(1), "");
  EXPECT_EQ(tok->token_to_piece(1, true), "<s>");
  EXPECT_EQ(tok->decode(want), "Hello world");
  EXPECT_EQ(tok->decode(want, true), "Hello<s> world</s>");
}

TEST(TokenizerSpecial, SyntheticVocab) {
  SynthSpm s;
  auto tok = s.tokenizer();
  const int32_t sp = s.id("\xE2\x96\x81"), a = s.id("a"), b = s.id("b"), x = s.id("x");
  const int32_t sp_a = s.id("\xE2\x96\x81" "a"), ab = s.id("ab");
  const int32_t ctl = s.id("<|ab|>"), ctl_x = s.id("<|ab|>x"), user = s.id("@@"), b_lt = s.id("b<|");
  (void)a;

  // The longer control token wins; text after it gets a space prefix.
  EXPECT_EQ(tok->encode("a<|ab|>xb", false, true), (std::vector<int32_t>{sp_a, ctl_x, sp, b}));
  EXPECT_EQ(tok->encode("<|ab|><|ab|>x", false, true), (std::vector<int32_t>{ctl, ctl_x}));
  // Longest token first over the whole text, not leftmost: "b<|" loses to
  // the overlapping longer "<|ab|>x" (llama.cpp's order).
  EXPECT_EQ(tok->encode("b<|ab|>x", false, true), (std::vector<int32_t>{sp, b, ctl_x}));
  // Without parse_special the control text is text: scores pick "▁a" (-1)
  // before "ab" (-2), and characters that are not tokens fall back to bytes.
  EXPECT_EQ(tok->encode("a<|ab|>xb", false, false),
            (std::vector<int32_t>{sp_a, s.byte('<'), s.byte('|'), ab, s.byte('|'), s.byte('>'), x, b}));
  // User-defined tokens are split out even without parse_special.
  EXPECT_EQ(tok->encode("a@@b", false, false), (std::vector<int32_t>{sp_a, user, sp, b}));
  EXPECT_EQ(tok->encode("a", true, false), (std::vector<int32_t>{1, sp_a}));
  EXPECT_EQ(tok->encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_TRUE(tok->encode("", false, true).empty());

  EXPECT_EQ(tok->token_to_piece(ctl), "");
  EXPECT_EQ(tok->token_to_piece(ctl, true), "<|ab|>");
  EXPECT_EQ(tok->token_to_piece(user), "@@");
  EXPECT_EQ(tok->token_to_piece(s.byte('<')), "<");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, sp_a, user, sp, b}), "a@@ b");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, sp_a, ctl_x, b_lt}, true), "<s> a<|ab|>xb<|");
  EXPECT_THROW(tok->token_to_piece(s.size()), Error);
  EXPECT_THROW(tok->token_to_piece(-1), Error);
}

// Deterministic strings mixing ASCII, whitespace runs, CJK, emoji, combining
// marks and other scripts (valid UTF-8; no U+2581, which SPM maps to space).
std::vector<std::string> sample_strings(size_t n, uint32_t seed) {
  static const std::vector<std::string> parts = {
      "Hello", " world", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " ", "'s", "'ll", "I've", "3", "42", "1234567",
      "3.14", "...", "!!", "?", "(x)", "<tag>", "</s>", "#include", "\xF0\x9F\xA6\x99", "\xF0\x9F\x98\x80\xE2\x80\x8D",
      "\xE4\xB8\xAD\xE6\x96\x87", "\xED\x95\x9C\xEA\xB5\xAD", "\xE3\x81\x82\xE3\x82\xA2", "\xD0\xBF\xD1\x80\xD0\xB8",
      "\xC3\xA9t\xC3\xA9", "e\xCC\x81", "\xCE\xA9", "\xE2\x80\xA6", "\xE3\x80\x80", "\xC2\xA0", "\xE2\x82\xAC", "~",
      "`", "$", "_", "-", "caf\xC3\xA9", "\xF0\x90\x90\x80", "\x01", "z"};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string s;
    const int len = int(rng() % 12);
    for (int k = 0; k < len; ++k) s += parts[rng() % parts.size()];
    out.push_back(s);
  }
  return out;
}

void expect_round_trips(const Tokenizer& tok, const std::string& name) {
  int failures = 0;
  for (const std::string& s : sample_strings(400, 1234)) {
    const auto ids = tok.encode(s, false, false);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab());
    const std::string back = tok.decode(ids);
    if (back != s && ++failures <= 5) ADD_FAILURE() << name << ": '" << s << "' decoded as '" << back << "'";
    EXPECT_EQ(tok.decode(tok.encode(s, true, false)), s) << name;
  }
  EXPECT_EQ(failures, 0) << name;
}

TEST(TokenizerRoundTrip, AllVocabs) {
  RF_REQUIRE_TESTDATA("vocab/ggml-vocab-gpt-2.gguf");
  for (const char* v : {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf",
                        "vocab/ggml-vocab-deepseek-coder.gguf", "stories260K.gguf"})
    expect_round_trips(*load_vocab(v), v);
}

TEST(TokenizerRoundTrip, InvalidUtf8) {
  RF_REQUIRE_TESTDATA("vocab/ggml-vocab-gpt-2.gguf");
  const std::string bad = "ok\xFF\xE2\x82 x\xC3";
  // SPM keeps the bytes exactly (byte fallback).
  auto spm = load_vocab("vocab/ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(spm->decode(spm->encode(bad, false, false)), bad);
  // Byte-level BPE replaces each invalid byte with U+FFFD (as llama.cpp).
  auto bpe = load_vocab("vocab/ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(bpe->decode(bpe->encode(bad, false, false)),
            "ok\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD x\xEF\xBF\xBD");
}

// One tokenizer used from several threads at once gives the same results as
// sequential use (no hidden mutable state).
TEST(TokenizerThreads, ConcurrentEncodeDecode) {
  RF_REQUIRE_TESTDATA("vocab/ggml-vocab-gpt-2.gguf");
  for (const char* v : {"vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-llama-spm.gguf"}) {
    auto tok = load_vocab(v);
    const auto inputs = sample_strings(200, 99);
    std::vector<std::vector<int32_t>> want;
    for (const auto& s : inputs) want.push_back(tok->encode(s, true, true));
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int rep = 0; rep < 3; ++rep)
          for (size_t i = 0; i < inputs.size(); ++i) {
            const auto ids = tok->encode(inputs[i], true, true);
            if (ids != want[i] || tok->decode(ids) != tok->decode(want[i])) ++mismatches[size_t(t)];
          }
      });
    for (auto& th : threads) th.join();
    for (int m : mismatches) EXPECT_EQ(m, 0) << v;
  }
}

std::string english_text(size_t bytes) {
  static const std::vector<std::string> words = {
      "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
      "not", "he", "I", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they",
      "you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when",
      "will", "would", "who", "so", "no", "tokenizer", "inference", "engine", "memory", "scheduling",
      "quantization", "throughput", "latency", "requests", "language", "model", "weights", "2024", "3.5"};
  std::mt19937 rng(42);
  std::string s;
  while (s.size() < bytes) {
    s += words[rng() % words.size()];
    const uint32_t r = rng() % 20;
    s += r == 0 ? ". " : r == 1 ? ", " : r == 2 ? "\n\n" : r == 3 ? "'s " : " ";
  }
  return s;
}

double seconds_to_encode(const Tokenizer& tok, const std::string& text, size_t* n_tokens) {
  const auto t0 = std::chrono::steady_clock::now();
  *n_tokens = tok.encode(text, true, true).size();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
constexpr double kMaxSeconds = 1.0;  // optimized build: 100 KB well under a second
#else
constexpr double kMaxSeconds = 30.0;  // debug / sanitizer builds: only catch blow-ups
#endif

TEST(TokenizerSpeed, HundredKilobytes) {
  RF_REQUIRE_TESTDATA("vocab/ggml-vocab-gpt-2.gguf");
  const std::string text = english_text(100 * 1024);
  const std::string one_word(100 * 1024, 'a');  // no spaces: one long word / fragment
  for (const char* v : {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf",
                        "vocab/ggml-vocab-deepseek-coder.gguf"}) {
    auto tok = load_vocab(v);
    size_t n = 0, n_word = 0;
    const double s = seconds_to_encode(*tok, text, &n);
    const double s_word = seconds_to_encode(*tok, one_word, &n_word);
    std::printf("%s: 100 KB English -> %zu tokens in %.1f ms; 100 KB single word -> %zu tokens in %.1f ms\n", v,
                n, s * 1e3, n_word, s_word * 1e3);
    EXPECT_LT(s, kMaxSeconds) << v;
    EXPECT_LT(s_word, kMaxSeconds) << v;
    EXPECT_EQ(tok->decode(tok->encode(text, false, false)), text) << v;
  }
}

}  // namespace
}  // namespace rf
