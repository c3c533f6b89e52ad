// libFuzzer target: a reply's split into reasoning, content and tool calls
// (server/reply_parser.h) never crashes, and streaming the text in pieces
// gives what parsing it whole gives: the same reasoning and calls, and the
// same content (up to where calls start, when there are calls).
// Input: byte 0 picks the format (bits 0-1: think tags, think tags opened by
// the prompt, harmony, none) and whether tools are parsed (bit 2); byte 1
// the piece size; the rest is the reply.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "server/reply_parser.h"

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_reply: invariant violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rf::server;
  if (size < 2) return 0;
  ReplyParserOptions o;
  const int format = data[0] & 3;
  o.reasoning = format == 2 ? ReasoningFormat::Harmony : format == 3 ? ReasoningFormat::None : ReasoningFormat::Think;
  o.starts_inside = format == 1;
  o.parse_tools = data[0] & 4;
  o.tool_names = {"f", "get_weather"};
  o.id_prefix = "x";
  const size_t step = size_t(data[1] % 16) + 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  const ReplyResult whole = ReplyParser::parse(o, text);
  ReplyParser p(o);
  std::string reasoning, content;
  for (size_t i = 0; i < text.size(); i += step) {
    const ReplyDelta d = p.push(text.substr(i, step));
    reasoning += d.reasoning;
    content += d.content;
  }
  std::vector<ToolCall> calls;
  const ReplyDelta d = p.finish(calls);
  reasoning += d.reasoning;
  content += d.content;
  if (reasoning != whole.reasoning) violated("streamed reasoning == whole reasoning");
  if (calls.size() != whole.calls.size()) violated("streamed calls == whole calls");
  for (size_t i = 0; i < calls.size(); ++i)
    if (calls[i].arguments != whole.calls[i].arguments || calls[i].name != whole.calls[i].name)
      violated("streamed calls == whole calls");
  if ((calls.empty() || o.reasoning == ReasoningFormat::Harmony) && content != whole.content)
    violated("streamed content == whole content");
  if (o.reasoning == ReasoningFormat::None && (!whole.reasoning.empty() || (calls.empty() && content != text)))
    violated("no format: all content");
  return 0;
}
