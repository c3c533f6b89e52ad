// Reasoning in replies (server/reasoning.h, harmony.h, reply_parser.h): the
// Think format's split — open tag in the reply or in the prompt, never
// closed, not opened, tags split anywhere, whitespace at the seams — and
// harmony's channels (analysis, final, commentary preambles, calls to
// functions.NAME with the recipient before or after the channel, a body
// ended by generation's end), with tool calls after the thinking parsed as
// before and a call inside the thinking left alone; every split of the text
// into streamed pieces gives the whole text's result, and reasoning never
// shows in the content. The format is found from templates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/reply_parser.h"

namespace rf::server {
namespace {

const std::vector<std::string> kTools = {"get_weather", "search"};

ReplyParserOptions think(bool inside = false, bool tools = false) {
  ReplyParserOptions o;
  o.reasoning = ReasoningFormat::Think;
  o.starts_inside = inside;
  o.parse_tools = tools;
  o.tool_names = kTools;
  o.id_prefix = std::string("r");  // (assigning the literal trips a false -Wrestrict in GCC 12)
  return o;
}

ReplyParserOptions harmony(bool tools = true) {
  ReplyParserOptions o = think(false, tools);
  o.reasoning = ReasoningFormat::Harmony;
  return o;
}

// The text streamed in pieces of `step` bytes: what went out, and the calls.
ReplyResult streamed(const ReplyParserOptions& o, const std::string& text, size_t step) {
  ReplyParser p(o);
  ReplyResult out;
  for (size_t i = 0; i < text.size(); i += step) {
    const ReplyDelta d = p.push(std::string_view(text).substr(i, step));
    out.reasoning += d.reasoning;
    out.content += d.content;
  }
  const ReplyDelta d = p.finish(out.calls);
  out.reasoning += d.reasoning;
  out.content += d.content;
  return out;
}

// parse(text) == expected, and every streaming of it sends the same
// reasoning, the content up to where calls start (all of it without
// calls), and the same calls.
void expect_split(const ReplyParserOptions& o, const std::string& text, const std::string& reasoning,
                  const std::string& content, const std::vector<std::pair<std::string, std::string>>& calls = {}) {
  const ReplyResult whole = ReplyParser::parse(o, text);
  EXPECT_EQ(whole.reasoning, reasoning) << text;
  EXPECT_EQ(whole.content, content) << text;
  ASSERT_EQ(whole.calls.size(), calls.size()) << text;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(whole.calls[i].name, calls[i].first);
    EXPECT_EQ(nlohmann::json::parse(whole.calls[i].arguments), nlohmann::json::parse(calls[i].second));
    EXPECT_EQ(whole.calls[i].id, "call_r_" + std::to_string(i));
  }
  for (size_t step = 1; step <= text.size(); ++step) {
    const ReplyResult s = streamed(o, text, step);
    EXPECT_EQ(s.reasoning, reasoning) << "pieces of " << step << ": " << text;
    if (calls.empty() || o.reasoning == ReasoningFormat::Harmony) {
      EXPECT_EQ(s.content, content) << "pieces of " << step;
    } else {
      // What streamed is the content up to the calls (the whitespace before them included).
      std::string_view sent = s.content;
      while (!sent.empty() && (sent.back() == ' ' || sent.back() == '\n')) sent.remove_suffix(1);
      EXPECT_EQ(std::string_view(content).substr(0, sent.size()), sent) << "pieces of " << step;
    }
    ASSERT_EQ(s.calls.size(), calls.size());
    for (size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(s.calls[i].arguments, whole.calls[i].arguments);
    if (!reasoning.empty()) {
      EXPECT_EQ(s.content.find(reasoning), std::string::npos) << "reasoning in the content";
    }
  }
}

TEST(ThinkFormat, OpenTagInTheReplyOrThePrompt) {
  expect_split(think(), "<think>\nI should greet.\n</think>\n\nHello!", "I should greet.", "Hello!");
  expect_split(think(), "  <think>a</think>b", "a", "b");
  expect_split(think(true), "I think.\n</think>\n\nAnswer", "I think.", "Answer");
  expect_split(think(true), "<think>\nagain</think>x", "again", "x");  // a repeated open tag is dropped
  expect_split(think(), "<think>\n\n</think>\n\nHi", "", "Hi");        // empty thinking
}

TEST(ThinkFormat, NeverClosedNotOpenedAndPieces) {
  expect_split(think(true), "all of it is thinking", "all of it is thinking", "");
  expect_split(think(), "<think>abc</thi", "abc</thi", "");
  expect_split(think(), "Hello <think>x</think>", "", "Hello <think>x</think>");  // not at the start: content
  expect_split(think(), "<thin", "", "<thin");
  expect_split(think(), "<think>a < b and </ and </thinking</think>c</think>", "a < b and </ and </thinking", "c</think>");
  expect_split(think(true), "", "", "");
}

TEST(ThinkFormat, ToolCallsAfterTheThinking) {
  const std::string call = R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>)";
  expect_split(think(false, true), "<think>call it</think>\n" + call, "call it", "", {{"get_weather", R"({"city":"Paris"})"}});
  expect_split(think(true, true), "hmm</think>Checking.\n" + call, "hmm", "Checking.", {{"get_weather", R"({"city":"Paris"})"}});
  // A call inside the thinking is thinking.
  expect_split(think(false, true), "<think>maybe " + call + "</think>Done", "maybe " + call, "Done");
}

TEST(HarmonyFormat, ChannelsToReasoningAndContent) {
  expect_split(harmony(),
               "<|channel|>analysis<|message|>Think first.<|end|><|start|>assistant<|channel|>final<|message|>"
               "The answer.<|return|>",
               "Think first.", "The answer.");
  expect_split(harmony(), "<|channel|>final<|message|>Hi", "", "Hi");
  expect_split(harmony(), "<|channel|>commentary<|message|>Let me look.<|end|><|start|>assistant<|channel|>final"
                          "<|message|> Done",
               "", "Let me look. Done");
  expect_split(harmony(), "plain text", "", "plain text");
  expect_split(harmony(), "<|channel|>analysis<|message|>a <| b <|en", "a <| b <|en", "");
}

TEST(HarmonyFormat, CallsToFunctions) {
  expect_split(harmony(),
               "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
               "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
               "Need weather.", "", {{"get_weather", R"({"city":"Paris"})"}});
  // The recipient before the channel; the body ended by the end of generation.
  expect_split(harmony(), "<|start|>assistant to=functions.search<|channel|>commentary json<|message|>{\"q\": \"x\"}", "",
               "", {{"search", R"({"q":"x"})"}});
  // Not offered, not an object, or tools not parsed: content.
  expect_split(harmony(), "<|channel|>commentary to=functions.nope<|message|>{}<|call|>", "", "{}");
  expect_split(harmony(), "<|channel|>commentary to=functions.search<|message|>[1]<|call|>", "", "[1]");
  expect_split(harmony(false), "<|channel|>commentary to=functions.search<|message|>{\"q\":1}<|call|>", "",
               "{\"q\":1}");
}

TEST(ReasoningFormats, FoundFromTemplatesAndModes) {
  EXPECT_EQ(reasoning_format_of("{{ '<|im_start|>assistant\\n<think>\\n' }}"), ReasoningFormat::Think);
  EXPECT_EQ(reasoning_format_of("{% if '</think>' in content %}"), ReasoningFormat::Think);
  EXPECT_EQ(reasoning_format_of("<|start|>assistant<|channel|>final<|message|>"), ReasoningFormat::Harmony);
  EXPECT_EQ(reasoning_format_of("{{ '<|im_start|>' + message['role'] }}"), ReasoningFormat::None);
  EXPECT_EQ(effective_reasoning_format(ReasoningMode::Auto, ReasoningFormat::None), ReasoningFormat::None);
  EXPECT_EQ(effective_reasoning_format(ReasoningMode::Deepseek, ReasoningFormat::None), ReasoningFormat::Think);
  EXPECT_EQ(effective_reasoning_format(ReasoningMode::None, ReasoningFormat::Harmony), ReasoningFormat::None);
  EXPECT_EQ(reasoning_mode_from_name("deepseek"), ReasoningMode::Deepseek);
  EXPECT_FALSE(reasoning_mode_from_name("deepseek-legacy"));
  EXPECT_TRUE(starts_inside_thinking(ReasoningFormat::Think, "<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(starts_inside_thinking(ReasoningFormat::Think, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(starts_inside_thinking(ReasoningFormat::Harmony, "<think>"));
}

}  // namespace
}  // namespace rf::server
