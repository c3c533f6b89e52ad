// Vocabulary loading from GGUF metadata: bad metadata is an rf::Error naming
// the key, "none" ids, llama.cpp's defaults, end-of-generation detection (the
// chat families' end-of-turn markers), a tiny byte-level BPE vocabulary built
// from scratch, and literal ranges that keep special-token text as text.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/byte_map.h"
#include "tokenizer/tokenizer.h"

namespace rf {
namespace {

std::unique_ptr<Tokenizer> build(const gguf::Writer& w) {
  const auto bytes = w.to_bytes();
  return Tokenizer::from_gguf(*gguf::File::from_bytes(bytes.data(), bytes.size()));
}

// The error message of building `w`, or "" when it loads.
std::string load_error(const gguf::Writer& w) {
  try {
    build(w);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

gguf::Writer spm_writer() {
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a"});
  w.set_f32s("tokenizer.ggml.scores", {0, 0, 0, -1});
  w.set_i32s("tokenizer.ggml.token_type", {2, 3, 3, 1});
  return w;
}

// Byte-level vocabulary: the 256 byte symbols, then "ab", "abc", "Ġa" and
// extra tokens; merges a+b, ab+c, Ġ+a.
gguf::Writer bpe_writer(const std::string& pre, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(byte_map::to_unicode(uint8_t(b)));
  for (const char* t : {"ab", "abc", "\xC4\xA0" "a"}) toks.push_back(t);
  for (const auto& t : extra) toks.push_back(t);
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
  w.set_strings("tokenizer.ggml.tokens", toks);
  w.set_strings("tokenizer.ggml.merges", {"a b", "ab c", "\xC4\xA0 a"});
  return w;
}

TEST(TokenizerVocab, ErrorsNameTheKey) {
  {
    gguf::Writer w;
    w.set_strings("tokenizer.ggml.tokens", {"a"});
    EXPECT_NE(load_error(w).find("tokenizer.ggml.model"), std::string::npos);
  }
  {
    auto w = spm_writer();
    w.set_string("tokenizer.ggml.model", "bert");
    const std::string e = load_error(w);
    EXPECT_NE(e.find("'bert'"), std::string::npos) << e;
    EXPECT_NE(e.find("tokenizer.ggml.model"), std::string::npos) << e;
  }
  {
    auto w = spm_writer();
    w.set_f32s("tokenizer.ggml.tokens", {1, 2});
    EXPECT_NE(load_error(w).find("tokenizer.ggml.tokens"), std::string::npos);
  }
  {
    auto w = spm_writer();
    w.set_strings("tokenizer.ggml.tokens", {});
    EXPECT_NE(load_error(w).find("tokenizer.ggml.tokens"), std::string::npos);
  }
  {
    auto w = spm_writer();
    w.set_f32s("tokenizer.ggml.scores", {0, 0, 0});
    EXPECT_NE(load_error(w).find("tokenizer.ggml.scores"), std::string::npos);
  }
  {
    auto w = spm_writer();
    w.set_i32s("tokenizer.ggml.token_type", {2, 3, 3, 9});
    EXPECT_NE(load_error(w).find("tokenizer.ggml.token_type[3]"), std::string::npos);
  }
  {
    auto w = spm_writer();
    w.set_i32s("tokenizer.ggml.token_type", {1, 1});
    EXPECT_NE(load_error(w).find("tokenizer.ggml.token_type"), std::string::npos);
  }
  {
    auto w = spm_writer();
    w.set_u32("tokenizer.ggml.bos_token_id", 99);
    EXPECT_NE(load_error(w).find("tokenizer.ggml.bos_token_id"), std::string::npos);
  }
  {
    auto w = spm_writer();
    w.set_i32("tokenizer.ggml.eos_token_id", -5);
    EXPECT_NE(load_error(w).find("tokenizer.ggml.eos_token_id"), std::string::npos);
  }
  {
    auto w = spm_writer();
    w.set_string("tokenizer.ggml.eot_token_id", "x");
    EXPECT_NE(load_error(w).find("tokenizer.ggml.eot_token_id"), std::string::npos);
  }
  {
    auto w = spm_writer();
    w.set_string("tokenizer.ggml.add_bos_token", "yes");
    EXPECT_NE(load_error(w).find("tokenizer.ggml.add_bos_token"), std::string::npos);
  }
  {
    auto w = spm_writer();
    w.set_u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    EXPECT_NE(load_error(w).find("add_bos_token"), std::string::npos);
  }
  {
    auto w = bpe_writer("gpt-2");
    w.set_strings("tokenizer.ggml.merges", {"a b", "abc"});
    EXPECT_NE(load_error(w).find("tokenizer.ggml.merges[1]"), std::string::npos);
  }
  {
    gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_strings("tokenizer.ggml.tokens", {"a", "b"});
    EXPECT_NE(load_error(w).find("tokenizer.ggml.merges"), std::string::npos);
  }
}

TEST(TokenizerVocab, NoneIdsAndSpmDefaults) {
  auto w = spm_writer();
  w.set_u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu);  // none
  w.set_i32("tokenizer.ggml.padding_token_id", -1);       // none
  auto tok = build(w);
  EXPECT_EQ(tok->bos(), -1);
  EXPECT_EQ(tok->vocab().pad, -1);
  EXPECT_EQ(tok->eos(), 2);  // SPM default
  EXPECT_EQ(tok->vocab().unk, 0);
  EXPECT_FALSE(tok->add_bos());  // default on, but there is no BOS token
  EXPECT_EQ(tok->encode("a", true, false), (std::vector<int32_t>{3}));
  EXPECT_TRUE(tok->is_eog(2));

  auto d = build(spm_writer());
  EXPECT_EQ(d->bos(), 1);
  EXPECT_TRUE(d->add_bos());
  EXPECT_FALSE(d->add_eos());
  EXPECT_EQ(d->encode("a", true, false), (std::vector<int32_t>{1, 3}));

  auto e = spm_writer();
  e.set_bool("tokenizer.ggml.add_eos_token", true);
  e.set_bool("tokenizer.ggml.add_space_prefix", false);
  auto t = build(e);
  EXPECT_EQ(t->encode("a", true, false), (std::vector<int32_t>{1, 0, 2}));  // "a" alone is not a token: <unk>
}

TEST(TokenizerVocab, BytePairMerges) {
  auto tok = build(bpe_writer("gpt-2"));
  const int32_t ab = 256, abc = 257, sp_a = 258, sp = ' ', d = 'd';  // byte symbols sit at their byte's id
  EXPECT_EQ(tok->encode("ab", false, false), (std::vector<int32_t>{ab}));
  // " abd": a+b (rank 0) is merged before Ġ+a (rank 2), so "Ġa" never forms.
  EXPECT_EQ(tok->encode("abc abd", false, false), (std::vector<int32_t>{abc, sp, ab, d}));
  EXPECT_EQ(tok->encode(" ac", false, false), (std::vector<int32_t>{sp_a, 'c'}));
  EXPECT_EQ(tok->decode(tok->encode("abc abd\n\xF0\x9F\xA6\x99", false, false)), "abc abd\n\xF0\x9F\xA6\x99");
  EXPECT_FALSE(tok->add_bos());  // gpt-2: no BOS by default
  EXPECT_EQ(tok->pre_type(), PreType::Gpt2);
}

TEST(TokenizerVocab, PreTokenizerDefaults) {
  auto llama3 = bpe_writer("llama-bpe", {"<|begin_of_text|>", "<|eot_id|>"});
  llama3.set_u32("tokenizer.ggml.bos_token_id", 259);
  auto t = build(llama3);
  EXPECT_TRUE(t->add_bos());  // llama3 family adds BOS by default
  EXPECT_EQ(t->encode("ab", true, false), (std::vector<int32_t>{259, 256}));
  // EOT found by its text, made a control token and end-of-generation.
  EXPECT_EQ(t->eot(), 260);
  EXPECT_TRUE(t->is_eog(260));
  EXPECT_TRUE(t->is_control(260));
  EXPECT_EQ(t->token_to_piece(260), "");
  EXPECT_EQ(t->encode("ab<|eot_id|>", false, true), (std::vector<int32_t>{256, 260}));

  auto unknown = build(bpe_writer("some-new-pre"));  // falls back to default, with a warning
  EXPECT_EQ(unknown->pre_type(), PreType::Default);
  EXPECT_EQ(unknown->encode("ab", false, false), (std::vector<int32_t>{256}));
}

// Each chat family's end-of-turn marker ends generation when the vocabulary
// has it (found by its text, as llama.cpp does); the markers that open a turn
// do not. GLM-4's turns end when the model writes the next role marker: its
// GGUFs name <|user|> as the EOT token, and that makes it end generation.
TEST(TokenizerVocab, FamilyEndOfTurnMarkersEndGeneration) {
  struct Family {
    const char* name;
    std::vector<std::string> markers;
    std::vector<std::string> eog, not_eog;
    const char* eot_key;  // tokenizer.ggml.eot_token_id names this marker
  };
  const Family families[] = {
      {"ChatML (Qwen)", {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}, {"<|im_end|>", "<|endoftext|>"}, {"<|im_start|>"}, nullptr},
      {"Gemma", {"<start_of_turn>", "<end_of_turn>"}, {"<end_of_turn>"}, {"<start_of_turn>"}, nullptr},
      {"Phi-3", {"<|user|>", "<|assistant|>", "<|end|>", "<|endoftext|>"}, {"<|end|>", "<|endoftext|>"},
       {"<|user|>", "<|assistant|>"}, nullptr},
      {"GLM-4", {"<|user|>", "<|assistant|>", "<|observation|>", "<|endoftext|>"}, {"<|user|>", "<|endoftext|>"},
       {"<|assistant|>"}, "<|user|>"},
  };
  for (const Family& f : families) {
    SCOPED_TRACE(f.name);
    auto w = bpe_writer("gpt-2", f.markers);
    const int32_t first = 259;  // after the 256 byte symbols and ab, abc, Ġa
    auto id_of = [&](const std::string& marker) {
      return first + int32_t(std::find(f.markers.begin(), f.markers.end(), marker) - f.markers.begin());
    };
    if (f.eot_key) w.set_u32("tokenizer.ggml.eot_token_id", uint32_t(id_of(f.eot_key)));
    auto t = build(w);
    for (const std::string& m : f.eog) EXPECT_TRUE(t->is_eog(id_of(m))) << m;
    for (const std::string& m : f.not_eog) EXPECT_FALSE(t->is_eog(id_of(m))) << m;
  }
}

// Literal ranges: control-token text overlapping one stays text and joins the
// text around it in one fragment; outside the ranges it is still special;
// user-defined tokens are split out everywhere (as without parse_special).
TEST(TokenizerVocab, LiteralRangesKeepSpecialTextAsText) {
  auto w = bpe_writer("gpt-2", {"<|end|>", "<x>"});
  std::vector<int32_t> types(256 + 3 + 2, 1);
  types[259] = 3;  // control
  types[260] = 4;  // user-defined
  w.set_i32s("tokenizer.ggml.token_type", types);
  auto t = build(w);
  const int32_t end = 259, x = 260;
  const std::string text = "ab<|end|>ab<|end|>";
  std::vector<int32_t> expected = t->encode("ab<|end|>ab", false, false);
  expected.push_back(end);
  const TextRange first_marker[] = {{2, 7}};
  EXPECT_EQ(t->encode(text, false, true, first_marker), expected);
  const TextRange inside[] = {{4, 1}};  // any overlap keeps it text
  EXPECT_EQ(t->encode(text, false, true, inside), expected);
  EXPECT_EQ(std::count(expected.begin(), expected.end(), end), 1);
  EXPECT_EQ(t->encode(text, false, true), (std::vector<int32_t>{256, end, 256, end}));
  const TextRange all[] = {{0, 3}};
  EXPECT_EQ(t->encode("<x>", false, true, all), (std::vector<int32_t>{x}));
}

}  // namespace
}  // namespace rf
