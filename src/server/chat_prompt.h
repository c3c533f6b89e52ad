// Chat prompts: renders a chat request's messages with the chat template
// chosen where the model was loaded (cli/chat_template_choice.h) and tokenizes
// the result with special tokens parsed. BOS is added when the vocabulary
// wants one and the rendered text does not already start with it (llama.cpp's
// rule: never two). A template that does not parse does not stop the server:
// chat requests then fail with a 400 carrying the parse error.
//
// Special-token text inside the messages (e.g. "<|im_start|>system" in a
// user's content, or in a role) stays text: it is tokenized as plain text,
// never as control tokens, so a client cannot forge turns of the template.
// Only the template's own markup becomes control tokens. How: before
// rendering, each occurrence in a message string is swapped for a marker of
// private-use characters; in the rendered text the markers are put back to
// the texts they stand for, and the tokenizer parses special tokens
// everywhere but there (Tokenizer::encode's literal ranges): the ids are
// those of the same text in a vocabulary without those special tokens.
// `special_in_content` turns this off (the text is parsed as a whole).
// Thread-safe (const).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/protocol.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rf::server {

class ChatPrompt {
 public:
  // `origin` names where the template came from, for messages.
  ChatPrompt(const Tokenizer& tok, std::string source, std::string origin, bool special_in_content = false);

  // The rendered prompt text, `tools` (unless null) given to the template
  // as the variable `tools`, as transformers does, and each member of
  // `kwargs` (an object, or null) as a variable of its own (a request's
  // chat_template_kwargs: enable_thinking, reasoning_effort, ...); throws
  // ApiError 400 when the template fails.
  std::string render(const Json& messages, bool add_generation_prompt, const Json& tools = Json(),
                     const Json& kwargs = Json()) const;
  // The prompt's token ids (render, then tokenize as described above);
  // `rendered`, if given, gets the rendered text (special-token text from
  // the messages appearing as markers).
  std::vector<int32_t> tokenize(const Json& messages, bool add_generation_prompt, const Json& tools = Json(),
                                const Json& kwargs = Json(), std::string* rendered = nullptr) const;
  // The format the template's model writes tool calls in (found once).
  ToolCallFormat tool_format() const { return tool_format_; }
  // The format the template's model thinks in (found once).
  ReasoningFormat reasoning_format() const { return reasoning_format_; }

  bool valid() const { return tmpl_ != nullptr; }
  const std::string& error() const { return error_; }  // why the template did not parse
  const std::string& origin() const { return origin_; }

 private:
  // Swaps special-token texts (and stray marker characters) in every string
  // of `v` for markers; `literals` gets the texts, by marker number.
  void mark_specials(Json& v, std::vector<std::string>& literals) const;
  void mark_string(std::string& s, std::vector<std::string>& literals) const;
  std::vector<int32_t> encode_marked(const std::string& text, const std::vector<std::string>& literals) const;

  const Tokenizer& tok_;
  std::unique_ptr<ChatTemplate> tmpl_;
  ToolCallFormat tool_format_;
  ReasoningFormat reasoning_format_;
  std::string error_, origin_;
  std::string bos_text_, eos_text_;
  bool special_in_content_;
  std::vector<std::string> specials_by_byte_[256];  // control-token texts by first byte, longest first
};

}  // namespace rf::server
