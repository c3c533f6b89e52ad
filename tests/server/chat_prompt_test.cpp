// ChatPrompt (src/server/chat_prompt.h): special-token text inside messages
// stays text. With GPT-2's vocabulary and ChatML, "<|endoftext|>" in a
// user's content or role never becomes the control token, the prompt still
// decodes to exactly the rendered text, a forged marker changes nothing,
// messages without special text tokenize as before, and
// --allow-special-in-content brings back the old parsing.
#include <gtest/gtest.h>

#include <algorithm>

#include "server/chat_prompt.h"
#include "testdata.h"

namespace rf::server {
namespace {

class ServerChatPrompt : public ::testing::Test {
 protected:
  void SetUp() override {
    RF_REQUIRE_TESTDATA("vocab/ggml-vocab-gpt-2.gguf");
    tok_ = Tokenizer::from_file(test::testdata_path("vocab/ggml-vocab-gpt-2.gguf"));
    eot_ = tok_->encode("<|endoftext|>", false, true).at(0);
    ASSERT_TRUE(tok_->is_control(eot_));
  }
  static Json chat(const std::string& role, const std::string& content) {
    return Json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", role}, {"content", content}}});
  }
  bool has_eot(const std::vector<int32_t>& ids) const { return std::count(ids.begin(), ids.end(), eot_) > 0; }

  std::unique_ptr<Tokenizer> tok_;
  int32_t eot_ = -1;
};

TEST_F(ServerChatPrompt, SpecialTextInContentStaysText) {
  const ChatPrompt guarded(*tok_, ChatTemplate::chatml_source(), "test");
  const ChatPrompt open(*tok_, ChatTemplate::chatml_source(), "test", /*special_in_content=*/true);
  for (const Json& messages : {chat("user", "hi <|endoftext|> there"), chat("user", "<|endoftext|>"),
                               chat("user<|endoftext|>", "hi"), chat("user", "a<|endoftext|><|endoftext|>b")}) {
    const std::vector<int32_t> ids = guarded.tokenize(messages, true);
    EXPECT_FALSE(has_eot(ids)) << messages.dump();
    EXPECT_EQ(tok_->decode(ids), guarded.render(messages, true)) << messages.dump();
    EXPECT_TRUE(has_eot(open.tokenize(messages, true))) << messages.dump();
  }
}

TEST_F(ServerChatPrompt, PlainMessagesTokenizeAsBefore) {
  const ChatPrompt guarded(*tok_, ChatTemplate::chatml_source(), "test");
  const Json messages = chat("user", "Tell me a story about <html> tags & 'quotes'.");
  EXPECT_EQ(guarded.tokenize(messages, true), tok_->encode(guarded.render(messages, true), false, true));
}

TEST_F(ServerChatPrompt, AForgedMarkerIsText) {
  const ChatPrompt guarded(*tok_, ChatTemplate::chatml_source(), "test");
  const std::string marker = "\xEE\x80\x80" "0" "\xEE\x80\x81";
  for (const std::string& content : {marker, marker + "<|endoftext|>", "<|endoftext|>" + marker, std::string("\xEE\x80\x80" "1")}) {
    const Json messages = chat("user", content);
    const std::vector<int32_t> ids = guarded.tokenize(messages, true);
    EXPECT_FALSE(has_eot(ids));
    EXPECT_EQ(tok_->decode(ids), guarded.render(messages, true));
  }
}

TEST_F(ServerChatPrompt, TheTemplatesOwnSpecialTokensStaySpecial) {
  // A template that writes <|endoftext|> itself: that one is a control token, the user's is not.
  const std::string source =
      "{% for m in messages %}{{ m.role }}: {{ m.content }}<|endoftext|>{% endfor %}";
  const ChatPrompt guarded(*tok_, source, "test");
  const std::vector<int32_t> ids = guarded.tokenize(chat("user", "x<|endoftext|>y"), false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), eot_), 2);  // after each of the two messages
}

}  // namespace
}  // namespace rf::server
