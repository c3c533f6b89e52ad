// ReplyParser: one chat choice's reply as it streams in, split into what
// the client sees — reasoning, content and tool calls — in the model's
// formats: thinking per server/reasoning.h (Think) or server/harmony.h
// (Harmony, which also carries calls), then, in the content, tool calls per
// server/tool_calls.h when the request parses them. push() gives what may go
// out now: content is held back from where a call may start; finish() gives
// the rest and the calls. Fed the whole text at once, it gives the
// non-streamed reply: the same split as any streaming of the same text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/harmony.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace rf::server {

struct ReplyParserOptions {
  ReasoningFormat reasoning = ReasoningFormat::None;
  bool starts_inside = false;  // Think: the prompt opened the thinking
  bool parse_tools = false;
  ToolCallFormat tool_format = ToolCallFormat::Hermes;
  std::vector<std::string> tool_names;
  bool parallel_tool_calls = true;
  std::string id_prefix;       // calls' ids: "call_<id_prefix>_<i>"
};

struct ReplyDelta {
  std::string reasoning, content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

struct ReplyResult {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

class ReplyParser {
 public:
  explicit ReplyParser(ReplyParserOptions o);
  ReplyDelta push(std::string_view text);
  // The end of the reply: the held text (`delta`) and the calls. A call-free
  // reply's held content is in the delta; with calls, the content held from
  // where they start is not (it was the calls).
  ReplyDelta finish(std::vector<ToolCall>& calls);
  // Everything so far, as a non-streamed reply (after finish()).
  const ReplyResult& result() const { return result_; }

  static ReplyResult parse(const ReplyParserOptions& o, std::string_view text);

 private:
  void add_content(const std::string& fresh, ReplyDelta& d, bool final);

  ReplyParserOptions o_;
  std::optional<ThinkSplitter> think_;
  std::optional<HarmonyParser> harmony_;
  std::vector<ToolCall> harmony_calls_;
  std::string content_;  // all content so far (tool calls parse it)
  size_t sent_ = 0;      // of it, what went out
  ReplyResult result_;
};

}  // namespace rf::server
