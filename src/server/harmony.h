// The harmony format (gpt-oss) of a reply, parsed as text (the engine
// renders its control tokens for such requests). After the prompt's
// "<|start|>assistant" a reply is a run of messages, each
//   [<|start|>ROLE] HEADER <|message|> BODY (<|end|> | <|call|> | <|return|>)
// where the header names the channel ("<|channel|>analysis", "final",
// "commentary"), possibly a recipient (" to=functions.NAME", before or after
// the channel) and a content type (" <|constrain|>json" or " json"):
//  - analysis: reasoning;
//  - final, and commentary without a recipient (a preamble): content;
//  - to=functions.NAME: a call of NAME whose arguments are the body (JSON).
// <|call|> and <|return|> end generation (the engine never puts their text
// in the reply), so a body may simply stop. A call of a tool that was not
// offered, or whose arguments are not a JSON object, becomes content.
// Streaming: bodies go out as they come, except text that may be the start
// of a marker; calls are complete at their message's end.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/tool_calls.h"

namespace rf::server {

class HarmonyParser {
 public:
  // `tool_names`: the offered functions (calls of others are content);
  // `parse_tools` false makes every call content.
  HarmonyParser(std::vector<std::string> tool_names, bool parse_tools);

  // Appends what may go out now; complete calls are appended to `calls`.
  void push(std::string_view text, std::string& reasoning, std::string& content, std::vector<ToolCall>& calls);
  // The reply ended: the held text, and a call whose body simply stopped.
  void finish(std::string& reasoning, std::string& content, std::vector<ToolCall>& calls);

 private:
  enum class State { Header, Body };
  enum class Kind { Reasoning, Content, Call };
  void start_body(std::string_view header);  // the header decides the body's kind
  void end_body(std::string& content, std::vector<ToolCall>& calls);
  void emit(std::string_view text, std::string& reasoning, std::string& content);

  std::vector<std::string> tool_names_;
  bool parse_tools_;
  State state_ = State::Header;
  Kind kind_ = Kind::Content;
  std::string held_;       // text not yet handled (a header, or a body's possible marker)
  std::string call_name_;  // Call: the function
  std::string call_args_;  // Call: the body so far
};

}  // namespace rf::server
