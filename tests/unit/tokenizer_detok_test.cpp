// GPT-2's byte map and the incremental detokenizer: characters split across
// tokens are held back, invalid bytes become U+FFFD, and streamed output
// always equals the sanitized whole decode (core/utf8.h's own tests are in
// core_text_test.cpp).
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/utf8.h"
#include "testdata.h"
#include "tokenizer/byte_map.h"
#include "tokenizer/tokenizer.h"

namespace rf {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(ByteMap, ByteLevelTableIsABijection) {
  for (int b = 0; b < 256; ++b) {
    const std::string& u = byte_map::to_unicode(uint8_t(b));
    size_t pos = 0;
    uint32_t cp = 0;
    ASSERT_TRUE(utf8::decode(u, pos, cp));
    EXPECT_EQ(pos, u.size());
    EXPECT_EQ(byte_map::to_byte(cp), b);
  }
  EXPECT_EQ(byte_map::to_unicode(' '), "\xC4\xA0");  // 'Ġ'
  EXPECT_EQ(byte_map::to_unicode('\n'), "\xC4\x8A");  // 'Ċ'
  EXPECT_EQ(byte_map::to_unicode('A'), "A");
  EXPECT_EQ(byte_map::to_byte(0x2581), -1);
}

std::unique_ptr<Tokenizer> load(const char* rel) { return Tokenizer::from_file(test::testdata_path(rel)); }

TEST(IncrementalDetokenizer, HoldsBackSplitCharacters) {
  RF_REQUIRE_TESTDATA("vocab/ggml-vocab-llama-spm.gguf");
  auto tok = load("vocab/ggml-vocab-llama-spm.gguf");
  auto byte = [&](int b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    const int32_t id = tok->vocab().find(hex);
    EXPECT_GE(id, 0) << hex;
    return id;
  };
  // The llama emoji is four byte tokens in this vocabulary.
  const auto ids = tok->encode("\xF0\x9F\xA6\x99", false, false);
  ASSERT_EQ(ids.size(), 5u);  // "▁" then the four bytes
  IncrementalDetokenizer d(*tok);
  EXPECT_EQ(d.push(ids[0]), "");  // the leading space of the first piece is dropped
  EXPECT_EQ(d.push(ids[1]), "");
  EXPECT_EQ(d.push(ids[2]), "");
  EXPECT_TRUE(d.has_pending());
  EXPECT_EQ(d.push(ids[3]), "");
  EXPECT_EQ(d.push(ids[4]), "\xF0\x9F\xA6\x99");
  EXPECT_FALSE(d.has_pending());
  EXPECT_EQ(d.flush(), "");

  // A sequence broken by a normal token: U+FFFD, then the token's text.
  const int32_t hello = tok->encode("Hello", false, false).back();
  IncrementalDetokenizer e(*tok);
  EXPECT_EQ(e.push(hello), "Hello");
  EXPECT_EQ(e.push(byte(0xE2)), "");
  EXPECT_EQ(e.push(byte(0x82)), "");
  EXPECT_EQ(e.push(hello), kFffd + " Hello");
  EXPECT_EQ(e.push(byte(0xFF)), kFffd);
  EXPECT_EQ(e.push(byte(0xF0)), "");
  EXPECT_EQ(e.flush(), kFffd);  // an unfinished sequence at the end
  EXPECT_THROW(e.push(tok->n_vocab()), Error);
}

// For every vocabulary: streamed text == sanitized whole decode, and each
// push returns valid UTF-8.
TEST(IncrementalDetokenizer, StreamEqualsDecode) {
  RF_REQUIRE_TESTDATA("vocab/ggml-vocab-gpt-2.gguf");
  const std::vector<std::string> texts = {
      "Hello world! \xF0\x9F\xA6\x99 llamas \xF0\x9F\x98\x80\xE2\x80\x8D\xF0\x9F\x91\x8D and \xE4\xB8\xAD\xE6\x96\x87"
      " \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 caf\xC3\xA9 e\xCC\x81 \xE2\x82\xAC" "5",
      "   \n\n\t spaces\xE3\x80\x80 and \xC2\xA0 more",
      "\xF0\x90\x90\x80\xF0\x90\x90\x81\xF0\x9D\x95\x8F \xE1\x9E\x80\xE1\x9E\xB6"};
  for (const char* v : {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf",
                        "vocab/ggml-vocab-deepseek-coder.gguf"}) {
    auto tok = load(v);
    bool held_back = false;
    for (const std::string& text : texts) {
      for (bool special : {false, true}) {
        const auto ids = tok->encode(text, true, false);
        IncrementalDetokenizer d(*tok, special);
        std::string streamed;
        for (int32_t id : ids) {
          const std::string part = d.push(id);
          EXPECT_TRUE(utf8::is_valid(part)) << v;
          held_back |= d.has_pending();
          streamed += part;
        }
        streamed += d.flush();
        EXPECT_EQ(streamed, utf8::sanitize(tok->decode(ids, special))) << v;
        if (!special) {
          EXPECT_EQ(streamed, text) << v;
        }
      }
    }
    // Multi-byte characters do get split across tokens in these texts.
    EXPECT_TRUE(held_back) << v;
  }
}

}  // namespace
}  // namespace rf
