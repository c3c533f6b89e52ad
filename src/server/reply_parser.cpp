// ReplyParser: reasoning split, content hold-back and tool calls.
#include "server/reply_parser.h"

namespace rf::server {

ReplyParser::ReplyParser(ReplyParserOptions o) : o_(std::move(o)) {
  if (o_.reasoning == ReasoningFormat::Think) think_.emplace(o_.starts_inside);
  if (o_.reasoning == ReasoningFormat::Harmony) harmony_.emplace(o_.tool_names, o_.parse_tools);
}

void ReplyParser::add_content(const std::string& fresh, ReplyDelta& d, bool final) {
  content_ += fresh;
  // Harmony's calls are messages of their own: its content holds none.
  const bool hold = o_.parse_tools && !harmony_;
  const size_t safe = final || !hold ? content_.size() : std::max(sent_, tool_call_safe_prefix(o_.tool_format, content_));
  d.content.append(content_, sent_, safe - sent_);
  sent_ = safe;
}

ReplyDelta ReplyParser::push(std::string_view text) {
  ReplyDelta d;
  std::string content;
  if (think_) {
    think_->push(text, d.reasoning, content);
  } else if (harmony_) {
    harmony_->push(text, d.reasoning, content, harmony_calls_);
  } else {
    content = std::string(text);
  }
  result_.reasoning += d.reasoning;
  add_content(content, d, false);
  return d;
}

ReplyDelta ReplyParser::finish(std::vector<ToolCall>& calls) {
  ReplyDelta d;
  std::string content;
  if (think_) think_->finish(d.reasoning, content);
  if (harmony_) harmony_->finish(d.reasoning, content, harmony_calls_);
  result_.reasoning += d.reasoning;
  content_ += content;
  if (harmony_) {
    result_.calls = std::move(harmony_calls_);
    result_.content = content_;
  } else if (o_.parse_tools) {
    ParsedReply p = parse_tool_calls(o_.tool_format, content_, o_.tool_names, o_.id_prefix);
    result_.calls = std::move(p.calls);
    result_.content = result_.calls.empty() ? content_ : std::move(p.content);
  } else {
    result_.content = content_;
  }
  if (!o_.parallel_tool_calls && result_.calls.size() > 1) result_.calls.resize(1);
  for (size_t i = 0; i < result_.calls.size(); ++i)
    result_.calls[i].id = "call_" + o_.id_prefix + "_" + std::to_string(i);
  // What was held back goes out unless it was the calls.
  if (result_.calls.empty() || harmony_) d.content.append(content_, sent_, std::string::npos);
  sent_ = content_.size();
  calls = result_.calls;
  return d;
}

ReplyResult ReplyParser::parse(const ReplyParserOptions& o, std::string_view text) {
  ReplyParser p(o);
  p.push(text);
  std::vector<ToolCall> calls;
  p.finish(calls);
  return p.result();
}

}  // namespace rf::server
