// The other APIs' requests as the chat requests they mean: Anthropic's
// Messages (system, tool_result blocks ahead of the turn's text as tool
// messages, tool_use blocks as tool_calls with JSON-text arguments, thinking
// blocks as reasoning_content, tool_choice and thinking mapped, fields
// checked by Anthropic's names) and the Responses API (input items to
// messages: function_call joined to its assistant turn, outputs as tool
// messages, reasoning items attached to the next assistant turn; the stored
// conversation of previous_response_id first, a 404 when it is not there);
// embeddings inputs; base64 of float32 values; Anthropic's error shape.
#include <gtest/gtest.h>

#include "server/anthropic.h"
#include "server/api_error.h"
#include "server/embeddings.h"
#include "server/responses.h"

namespace rf::server {
namespace {

ApiError error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError";
  return ApiError(0, "", "");
}

Json body(const char* text) { return parse_json_body(text); }

TEST(AnthropicRequest, TurnsBecomeChatMessages) {
  const GenerationRequest r = parse_anthropic_messages(body(R"({
    "model": "m", "max_tokens": 64, "system": [{"type": "text", "text": "Be brief."}],
    "messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "call it", "signature": "s"},
                                        {"type": "text", "text": "Checking."},
                                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "text", "text": "And?"},
                                   {"type": "tool_result", "tool_use_id": "toolu_1", "content": "20 C"}]}],
    "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "thinking": {"type": "enabled", "budget_tokens": 16},
    "stop_sequences": ["END"], "temperature": 0.5, "top_k": 5})"));
  EXPECT_EQ(r.endpoint, Endpoint::Messages);
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[0], Json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(r.messages[2]["reasoning_content"], "call it");
  EXPECT_EQ(r.messages[2]["content"], "Checking.");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], Json({{"city", "Paris"}}));  // (objects for templates)
  EXPECT_EQ(r.messages[3], Json({{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "20 C"}}));
  EXPECT_EQ(r.messages[4], Json({{"role", "user"}, {"content", "And?"}}));
  EXPECT_EQ(r.tool_names, std::vector<std::string>{"get_weather"});
  EXPECT_TRUE(r.tool_call_forced);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.reasoning_budget, 16);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], true);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.max_tokens, 64);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 5);

  const GenerationRequest off = parse_anthropic_messages(
      body(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "disabled"}, "tool_choice": {"type": "none"}})"));
  EXPECT_EQ(off.reasoning_budget, 0);
  EXPECT_FALSE(off.tool_choice_auto);
  EXPECT_FALSE(off.tool_call_forced);
}

TEST(AnthropicRequest, FieldsCheckedByTheirNames) {
  const char* cases[][2] = {
      {R"({"messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
      {R"({"max_tokens": 8, "messages": []})", "messages"},
      {R"({"max_tokens": 8, "messages": [{"role": "tool", "content": "x"}]})", "messages[0].role"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image"}]}]})", "messages[0].content[0]"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}]})", "messages[0].content[0]"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]})", "messages[0].content[0].tool_use_id"},
      {R"({"max_tokens": 8, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": 1}]}]})", "messages[0].content[0].input"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "system": 5})", "system"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}]})", "tools[0].input_schema"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "enabled", "budget_tokens": 8}})", "thinking.budget_tokens"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "temperature": 2})", "temperature"},
      {R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}], "stop_sequences": [1]})", "stop_sequences"},
  };
  for (const auto& [text, param] : cases) {
    const ApiError e = error_of([&] { parse_anthropic_messages(body(text)); });
    EXPECT_EQ(e.status(), 400) << text;
    EXPECT_EQ(e.param(), param) << text << ": " << e.what();
  }
  EXPECT_EQ(parse_anthropic_count_tokens(body(R"({"messages": [{"role": "user", "content": "x"}]})")).messages.size(), 1u);
}

TEST(AnthropicErrors, AnthropicsShapeByStatus) {
  const Json e = Json::parse(anthropic_error_body(invalid_request("bad", "x")));
  EXPECT_EQ(e, Json::parse(R"({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})"));
  EXPECT_STREQ(anthropic_error_type(401), "authentication_error");
  EXPECT_STREQ(anthropic_error_type(404), "not_found_error");
  EXPECT_STREQ(anthropic_error_type(413), "request_too_large");
  EXPECT_STREQ(anthropic_error_type(503), "overloaded_error");
  EXPECT_STREQ(anthropic_error_type(500), "api_error");
}

TEST(ResponsesRequest, InputItemsBecomeChatMessages) {
  ResponseStore store(1 << 20);
  const ResponsesRequest r = parse_responses_request(body(R"({
    "instructions": "Be brief.", "max_output_tokens": 32,
    "input": [
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
      {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "call it"}]},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "20 C"},
      {"role": "assistant", "content": [{"type": "output_text", "text": "Warm."}]}],
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    "tool_choice": {"type": "function", "name": "get_weather"},
    "reasoning": {"effort": "low"}, "store": false})"), store);
  const Json& m = r.chat.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0], Json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(m[1], Json({{"role", "system"}, {"content", "Use tools."}}));
  EXPECT_EQ(m[2]["content"], "Weather?");
  EXPECT_EQ(m[3]["role"], "assistant");
  EXPECT_EQ(m[3]["reasoning_content"], "call it");
  ASSERT_EQ(m[3]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[3]["tool_calls"][0]["function"]["arguments"], Json({{"city", "Paris"}}));
  EXPECT_EQ(m[4], Json({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "20 C"}}));
  EXPECT_EQ(m[5]["content"], "Warm.");
  EXPECT_EQ(r.conversation.size(), 5u);  // the instructions are not carried on
  EXPECT_EQ(r.chat.endpoint, Endpoint::Responses);
  EXPECT_EQ(r.chat.max_tokens, 32);
  EXPECT_TRUE(r.chat.tool_call_forced);
  EXPECT_EQ(r.chat.tool_call_name, "get_weather");
  EXPECT_EQ(r.chat.chat_template_kwargs["reasoning_effort"], "low");
  EXPECT_FALSE(r.store);
  const ResponsesRequest json = parse_responses_request(
      body(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}})"), store);
  EXPECT_TRUE(json.chat.grammar);
  EXPECT_FALSE(json.chat.raw_grammar);
  EXPECT_TRUE(json.store);
}

TEST(ResponsesRequest, PreviousResponseComesFirstOrIsA404) {
  ResponseStore store(1 << 20);
  store.put("resp_1", ResponseStore::Entry{R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}])", "{}"});
  const ResponsesRequest r = parse_responses_request(body(R"({"input": "And?", "previous_response_id": "resp_1", "instructions": "New."})"), store);
  ASSERT_EQ(r.chat.messages.size(), 4u);
  EXPECT_EQ(r.chat.messages[0]["content"], "New.");
  EXPECT_EQ(r.chat.messages[2]["content"], "Hello");
  EXPECT_EQ(r.chat.messages[3]["content"], "And?");
  const ApiError e = error_of([&] { parse_responses_request(body(R"({"input": "x", "previous_response_id": "resp_2"})"), store); });
  EXPECT_EQ(e.status(), 404);
  EXPECT_EQ(e.code(), "previous_response_not_found");
  EXPECT_EQ(e.param(), "previous_response_id");
  const char* bad[][2] = {{R"({})", "input"},
                          {R"({"input": [{"type": "web_search_call"}]})", "input[0].type"},
                          {R"({"input": [{"type": "function_call_output", "call_id": "c"}]})", "input[0].output"},
                          {R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})", "input[0].content[0]"},
                          {R"({"input": "x", "tools": [{"type": "file_search"}]})", "tools[0].type"},
                          {R"({"input": "x", "text": {"format": {"type": "json_schema"}}})", "text.format.schema"},
                          {R"({"input": "x", "store": "yes"})", "store"}};
  for (const auto& [text, param] : bad) {
    const ApiError b = error_of([&] { parse_responses_request(body(text), store); });
    EXPECT_EQ(b.status(), 400) << text;
    EXPECT_EQ(b.param(), param) << text << ": " << b.what();
  }
}

TEST(Embeddings, InputsAndBase64) {
  EXPECT_EQ(parse_embeddings_request(body(R"({"input": "a"})")).inputs.size(), 1u);
  const EmbeddingsRequest ids = parse_embeddings_request(body(R"({"input": [[1, 2], [3]], "encoding_format": "base64", "dimensions": 8})"));
  ASSERT_EQ(ids.inputs.size(), 2u);
  EXPECT_EQ(ids.inputs[0].tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(ids.base64);
  EXPECT_EQ(ids.dimensions, 8);
  // 1.0f = 00 00 80 3f, -2.0f = 00 00 00 c0 (little-endian).
  EXPECT_EQ(base64_floats({1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(base64_floats({}), "");
}

}  // namespace
}  // namespace rf::server
