// Tool calls in replies (server/tool_calls.h): each family's format parsed
// into OpenAI calls, text that is not a call (bad JSON, an unknown tool)
// left as content, the format found from templates, the streaming
// hold-back of text where a call may start, and the grammar that forces
// calls (tool_choice required / named) accepting exactly well-formed calls,
// which parse back.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "grammar/matcher.h"
#include "server/tool_calls.h"

namespace rf::server {
namespace {

const std::vector<std::string> kTools = {"get_weather", "search"};

nlohmann::json args(const ToolCall& c) { return nlohmann::json::parse(c.arguments); }

TEST(ToolCalls, HermesCallsAndContent) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"q\\\": \\\"rain\\\"}\"}</tool_call>";
  const ParsedReply r = parse_tool_calls(ToolCallFormat::Hermes, text, kTools, "req_0");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(args(r.calls[0]), nlohmann::json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(r.calls[1].name, "search");
  EXPECT_EQ(args(r.calls[1]), nlohmann::json::parse(R"({"q": "rain"})"));  // arguments given as JSON text
  EXPECT_EQ(r.content, "Let me check.");
  EXPECT_EQ(r.calls[0].id, "call_req_0_0");
  EXPECT_NE(r.calls[0].id, r.calls[1].id);
}

TEST(ToolCalls, WhatIsNotACallStaysText) {
  for (const std::string& text : {
           std::string("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": </tool_call>"),  // bad JSON
           std::string("<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>"),              // not offered
           std::string("<tool_call>{\"arguments\": {}}</tool_call>"),                                    // no name
           std::string("<tool_call>{\"name\": \"search\", \"arguments\": [1]}</tool_call>"),             // not an object
           std::string("Just words."),
       }) {
    const ParsedReply r = parse_tool_calls(ToolCallFormat::Hermes, text, kTools, "x");
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

TEST(ToolCalls, MistralWithAndWithoutTheMarker) {
  for (const std::string& text : {std::string("Sure. [TOOL_CALLS] [{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}]"),
                                 std::string("[{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}]")}) {
    const ParsedReply r = parse_tool_calls(ToolCallFormat::Mistral, text, kTools, "m");
    ASSERT_EQ(r.calls.size(), 1u) << text;
    EXPECT_EQ(r.calls[0].name, "search");
    EXPECT_EQ(args(r.calls[0]), nlohmann::json::parse(R"({"q": "x"})"));
    EXPECT_EQ(r.content, text[0] == 'S' ? "Sure." : "");
  }
  const ParsedReply bad = parse_tool_calls(ToolCallFormat::Mistral, "[1, 2]", kTools, "m");
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "[1, 2]");
}

TEST(ToolCalls, Llama3JsonWholeReply) {
  const ParsedReply r = parse_tool_calls(
      ToolCallFormat::Llama3Json,
      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; {\"name\": \"search\", "
      "\"parameters\": {}}",
      kTools, "l");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(args(r.calls[0]), nlohmann::json::parse(R"({"city": "Oslo"})"));
  EXPECT_EQ(r.content, "");
  const ParsedReply prose = parse_tool_calls(ToolCallFormat::Llama3Json, "The weather is {fine}.", kTools, "l");
  EXPECT_TRUE(prose.calls.empty());
  EXPECT_EQ(prose.content, "The weather is {fine}.");
}

TEST(ToolCalls, FormatFromTheTemplate) {
  auto read = [](const std::string& name) {
    std::ifstream in(std::string(ROCMFORGE_TEST_TEMPLATES) + "/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(tool_call_format(read("chatml_tools.jinja")), ToolCallFormat::Hermes);
  EXPECT_EQ(tool_call_format(read("llama3_tools.jinja")), ToolCallFormat::Llama3Json);
  EXPECT_EQ(tool_call_format(read("mistral_v3.jinja")), ToolCallFormat::Mistral);
  EXPECT_EQ(tool_call_format("{{ messages }}"), ToolCallFormat::Hermes);
}

TEST(ToolCalls, StreamingHoldsBackWhereACallMayStart) {
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::Hermes, "Hello"), 5u);
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::Hermes, "Hello <tool_"), 6u);  // maybe a marker
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::Hermes, "Hi <tool_call>{\"na"), 3u);
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::Hermes, "a < b"), 5u);
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::Mistral, "Ok [TOOL_"), 3u);
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::Mistral, " [{\"name\""), 0u);
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::Llama3Json, "{\"name\": "), 0u);
  EXPECT_EQ(tool_call_safe_prefix(ToolCallFormat::Llama3Json, "It is sunny."), 12u);
}

TEST(ToolCalls, ForcedCallGrammarPerFormat) {
  const auto tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"enum": ["Oslo", "Paris"]}}, "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "search"}}])");
  struct Case {
    ToolCallFormat f;
    std::string good, good_many, wrong_args, wrong_name;
  };
  const Case cases[] = {
      {ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", "
       "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>"},
      {ToolCallFormat::Mistral, "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]",
       "[{\"name\": \"search\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
       "[{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Oslo\"}}]", "[{\"name\": \"rm\", \"arguments\": {}}]"},
      {ToolCallFormat::Llama3Json, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "",
       "{\"name\": \"get_weather\", \"parameters\": {}}", "{\"name\": \"rm\", \"parameters\": {}}"},
  };
  for (const Case& c : cases) {
    const grammar::Matcher any(tool_call_grammar(c.f, tools, "", true));
    EXPECT_TRUE(any.matches(c.good)) << c.good;
    const ParsedReply p = parse_tool_calls(c.f, c.good, {"get_weather", "search"}, "t");
    ASSERT_EQ(p.calls.size(), 1u) << c.good;
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(args(p.calls[0]), nlohmann::json::parse(R"({"city": "Oslo"})"));
    if (!c.good_many.empty()) {
      EXPECT_TRUE(any.matches(c.good_many)) << c.good_many;
      EXPECT_EQ(parse_tool_calls(c.f, c.good_many, {"get_weather", "search"}, "t").calls.size(), 2u);
      const grammar::Matcher single(tool_call_grammar(c.f, tools, "", false));
      EXPECT_FALSE(single.matches(c.good_many)) << "parallel_tool_calls false: one call";
    }
    EXPECT_FALSE(any.matches(c.wrong_args)) << c.wrong_args;
    EXPECT_FALSE(any.matches(c.wrong_name)) << c.wrong_name;
    const grammar::Matcher named(tool_call_grammar(c.f, tools, "search", true));
    EXPECT_FALSE(named.matches(c.good)) << "named: only search";
  }
  const auto bad = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "string", "pattern": "x"}}}])");
  try {
    tool_call_grammar(ToolCallFormat::Hermes, bad, "", true);
    FAIL() << "a schema with pattern compiled";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("tools[0].function.parameters"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rf::server
