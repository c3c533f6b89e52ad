// Chat prompts: renders a chat request's messages with the chat template
// chosen where the model was loaded (cli/chat_template_choice.h) and tokenizes the result with
// special tokens parsed. BOS is added when the vocabulary wants one and the
// rendered text does not already start with it (llama.cpp's rule: never two).
// A template that does not parse does not stop the server: chat requests
// then fail with a 400 carrying the parse error. Thread-safe (const).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/protocol.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rf::server {

class ChatPrompt {
 public:
  // `origin` names where the template came from, for messages.
  ChatPrompt(const Tokenizer& tok, std::string source, std::string origin);

  // The rendered prompt text; throws ApiError 400 when the template fails.
  std::string render(const Json& messages, bool add_generation_prompt) const;
  // render() then tokenize.
  std::vector<int32_t> tokenize(const Json& messages, bool add_generation_prompt) const;

  bool valid() const { return tmpl_ != nullptr; }
  const std::string& error() const { return error_; }  // why the template did not parse
  const std::string& origin() const { return origin_; }

 private:
  const Tokenizer& tok_;
  std::unique_ptr<ChatTemplate> tmpl_;
  std::string error_, origin_;
  std::string bos_text_, eos_text_;
};

}  // namespace rf::server
