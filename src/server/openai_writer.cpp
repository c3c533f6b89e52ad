// OpenAIWriter: a ReplyWriter over ResponseFormatter.
#include "server/reply_writer.h"

namespace rf::server {

void OpenAIWriter::begin(std::string& out, size_t n_choices, const std::vector<int32_t>&) {
  text_offset_.assign(n_choices, 0);
  if (fmt_.meta().endpoint == Endpoint::ChatCompletions)
    for (size_t i = 0; i < n_choices; ++i) fmt_.role_chunk(out, int(i));
}

void OpenAIWriter::delta(std::string& out, size_t choice, const ReplyDelta& d, const std::vector<TokenLogprob>& lps) {
  const bool with_lps = fmt_.meta().logprobs && !lps.empty();
  static const std::vector<TokenLogprob> none;
  // The event's logprobs go with its first chunk.
  if (!d.reasoning.empty()) fmt_.reasoning_chunk(out, int(choice), d.reasoning, lps);
  if (!d.content.empty() || (with_lps && d.reasoning.empty()))
    fmt_.delta_chunk(out, int(choice), d.content, d.reasoning.empty() ? lps : none, text_offset_[choice]);
}

void OpenAIWriter::tool_calls(std::string& out, size_t choice, const std::vector<ToolCall>& calls) {
  fmt_.tool_calls_chunk(out, int(choice), calls);
}

void OpenAIWriter::finish(std::string& out, size_t choice, const ChoiceResult& c) {
  fmt_.finish_chunk(out, int(choice), c.finish, !c.tool_calls.empty());
}

void OpenAIWriter::end(std::string& out, const Usage& usage) {
  if (fmt_.meta().include_usage) fmt_.usage_chunk(out, usage);
  ResponseFormatter::done_event(out);
}

void OpenAIWriter::error(std::string& out, const ApiError& e) {
  ResponseFormatter::error_event(out, e);
  ResponseFormatter::done_event(out);
}

std::string OpenAIWriter::body(const std::vector<ChoiceResult>& choices, const Usage&) {
  return fmt_.full_response(choices);
}

}  // namespace rf::server
