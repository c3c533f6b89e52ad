// Response formatting (src/server/response_format.h, core/json_text.h,
// server/http_metrics.h): JSON escaping stays valid for any bytes; full responses
// and SSE chunks have OpenAI's shapes for completions and chat, with
// logprobs, usage and finish reasons.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "server/http_metrics.h"
#include "server/response_format.h"
#include "testdata.h"
#include "tokenizer/tokenizer.h"

namespace rf::server {
namespace {

using nlohmann::json;

TEST(ServerJsonText, EscapesAndStaysValid) {
  const std::string cases[] = {"plain", "quote \" backslash \\ slash /", "nl\ncr\rtab\t\b\f", std::string("nul\0x", 5),
                               "\x01\x1f\x7f", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"};
  for (const std::string& s : cases) {
    const std::string j = json_string(s);
    EXPECT_EQ(json::parse(j).get<std::string>(), s) << j;
  }
  // Invalid UTF-8 (a lone continuation, a cut sequence, an overlong, a surrogate) becomes U+FFFD.
  EXPECT_EQ(json::parse(json_string("a\x80z")).get<std::string>(), "a\xEF\xBF\xBDz");
  EXPECT_EQ(json::parse(json_string("\xe2\x82")).get<std::string>(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(json::parse(json_string("\xc0\xaf")).get<std::string>(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(json::parse(json_string("\xed\xa0\x80")).get<std::string>(), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  std::string n;
  append_json_number(n, -std::numeric_limits<double>::infinity());
  EXPECT_NO_THROW(json::parse(n));
}

// Splits an SSE body into its "data:" payloads; checks the framing.
std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event";
    if (end == std::string::npos) break;
    const std::string ev = body.substr(pos, end - pos);
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    out.push_back(ev.substr(6));
    pos = end + 2;
  }
  return out;
}

class ServerFormat : public ::testing::Test {
 protected:
  void SetUp() override {
    RF_REQUIRE_TESTDATA("stories260K.gguf");
    tok_ = Tokenizer::from_file(test::testdata_path("stories260K.gguf"));
  }
  ResponseFormatter formatter(Endpoint ep, bool logprobs = false, int top = 0, bool usage = false) {
    ResponseMeta m;
    m.endpoint = ep;
    m.id = ep == Endpoint::ChatCompletions ? "chatcmpl-1" : "cmpl-1";
    m.created = 1700000000;
    m.model = "stories \"260K\"";
    m.logprobs = logprobs;
    m.top_logprobs = top;
    m.include_usage = usage;
    return ResponseFormatter(m, *tok_);
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(ServerFormat, CompletionResponse) {
  const auto f = formatter(Endpoint::Completions);
  ChoiceResult a{"Once upon", {}, FinishReason::Length, "", 5, 16, 0, {}};
  ChoiceResult b{"The end.", {}, FinishReason::Stop, "", 4, 3, 2, {}};
  const json r = json::parse(f.full_response({a, b}));
  EXPECT_EQ(r["id"], "cmpl-1");
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["created"], 1700000000);
  EXPECT_EQ(r["model"], "stories \"260K\"");
  ASSERT_EQ(r["choices"].size(), 2u);
  EXPECT_EQ(r["choices"][0]["index"], 0);
  EXPECT_EQ(r["choices"][0]["text"], "Once upon");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(r["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(r["choices"][1]["index"], 1);
  EXPECT_EQ(r["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 9);
  EXPECT_EQ(r["usage"]["completion_tokens"], 19);
  EXPECT_EQ(r["usage"]["total_tokens"], 28);
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
}

TEST_F(ServerFormat, ChatResponse) {
  const auto f = formatter(Endpoint::ChatCompletions);
  const json r = json::parse(f.full_response({ChoiceResult{"Hi \"there\"\n", {}, FinishReason::Stop, "", 7, 3, 0, {}}}));
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Hi \"there\"\n");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["usage"]["total_tokens"], 10);
}

TEST_F(ServerFormat, CompletionLogprobs) {
  const auto f = formatter(Endpoint::Completions, true, 2);
  const std::vector<TokenLogprob> lps = {{432, -0.5f, {{432, -0.5f}, {383, -1.5f}, {322, -3.0f}}},
                                         {383, -1.0f, {{432, -0.2f}, {322, -2.0f}}}};
  const json r = json::parse(f.full_response({ChoiceResult{"x", lps, FinishReason::Length, "", 1, 2, 0, {}}}));
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 2u);
  EXPECT_EQ(lp["tokens"][0], tok_->token_to_piece(432, true));
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -1.0f);
  // The top 2 alternatives, plus the sampled token when it is not among them.
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(lp["top_logprobs"][1].size(), 3u);
  EXPECT_TRUE(lp["top_logprobs"][1].contains(tok_->token_to_piece(383, true)));
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_EQ(lp["text_offset"][1], tok_->token_to_piece(432, true).size());
}

TEST_F(ServerFormat, ChatLogprobs) {
  const auto f = formatter(Endpoint::ChatCompletions, true, 1);
  const std::vector<TokenLogprob> lps = {{432, -0.25f, {{432, -0.25f}, {383, -1.5f}}}};
  const json r = json::parse(f.full_response({ChoiceResult{"x", lps, FinishReason::Stop, "", 1, 1, 0, {}}}));
  const json& content = r["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 1u);
  const std::string piece = tok_->token_to_piece(432, true);
  EXPECT_EQ(content[0]["token"], piece);
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.25f);
  ASSERT_EQ(content[0]["bytes"].size(), piece.size());
  EXPECT_EQ(content[0]["bytes"][0], static_cast<unsigned char>(piece[0]));
  ASSERT_EQ(content[0]["top_logprobs"].size(), 1u);  // exactly top_logprobs alternatives
  EXPECT_EQ(content[0]["top_logprobs"][0]["token"], piece);
}

TEST_F(ServerFormat, CompletionStreamChunks) {
  const auto f = formatter(Endpoint::Completions, false, 0, /*usage=*/true);
  std::string body;
  size_t offset = 0;
  f.delta_chunk(body, 0, "Once", {}, offset);
  f.delta_chunk(body, 1, " upon \"a\"", {}, offset);
  f.finish_chunk(body, 0, FinishReason::Length);
  f.usage_chunk(body, Usage{5, 7, 1});
  ResponseFormatter::done_event(body);
  const auto events = sse_payloads(body);
  ASSERT_EQ(events.size(), 5u);
  const json c0 = json::parse(events[0]);
  EXPECT_EQ(c0["id"], "cmpl-1");
  EXPECT_EQ(c0["object"], "text_completion");
  EXPECT_EQ(c0["choices"][0]["text"], "Once");
  EXPECT_EQ(c0["choices"][0]["index"], 0);
  EXPECT_TRUE(c0["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(c0.contains("usage") && c0["usage"].is_null());
  EXPECT_EQ(json::parse(events[1])["choices"][0]["index"], 1);
  EXPECT_EQ(json::parse(events[1])["choices"][0]["text"], " upon \"a\"");
  EXPECT_EQ(json::parse(events[2])["choices"][0]["finish_reason"], "length");
  const json u = json::parse(events[3]);
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["total_tokens"], 12);
  EXPECT_EQ(u["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
  EXPECT_EQ(events[4], "[DONE]");
}

TEST_F(ServerFormat, ChatStreamChunks) {
  const auto f = formatter(Endpoint::ChatCompletions, true, 0);
  std::string body;
  size_t offset = 0;
  f.role_chunk(body, 0);
  f.delta_chunk(body, 0, "Hel", {{432, -0.1f, {}}}, offset);
  f.finish_chunk(body, 0, FinishReason::Stop);
  const auto events = sse_payloads(body);
  ASSERT_EQ(events.size(), 3u);
  const json role = json::parse(events[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_FALSE(role.contains("usage"));  // only with include_usage
  const json delta = json::parse(events[1]);
  EXPECT_EQ(delta["choices"][0]["delta"]["content"], "Hel");
  EXPECT_FALSE(delta["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(delta["choices"][0]["logprobs"]["content"][0]["logprob"].get<float>(), -0.1f);
  const json fin = json::parse(events[2]);
  EXPECT_TRUE(fin["choices"][0]["delta"].empty());
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerFormat, ChatToolCalls) {
  const auto f = formatter(Endpoint::ChatCompletions);
  const std::vector<ToolCall> calls = {{"call_a", "get_weather", R"({"city":"Paris"})"}, {"call_b", "search", "{}"}};
  ChoiceResult only{"", {}, FinishReason::Stop, "", 5, 9, 0, calls};
  ChoiceResult with_text{"Let me check.", {}, FinishReason::Stop, "", 5, 9, 0, {calls[0]}};
  ChoiceResult plain{"Hi", {}, FinishReason::Length, "", 5, 1, 0, {}};
  const json r = json::parse(f.full_response({only, with_text, plain}));
  const json& m0 = r["choices"][0]["message"];
  EXPECT_TRUE(m0["content"].is_null());  // calls only: content null
  ASSERT_EQ(m0["tool_calls"].size(), 2u);
  EXPECT_EQ(m0["tool_calls"][0], json::parse(R"({"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}})"));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(r["choices"][1]["message"]["content"], "Let me check.");
  EXPECT_EQ(r["choices"][1]["finish_reason"], "tool_calls");
  EXPECT_FALSE(r["choices"][2]["message"].contains("tool_calls"));
  EXPECT_EQ(r["choices"][2]["finish_reason"], "length");

  std::string body;
  f.tool_calls_chunk(body, 1, calls);
  f.finish_chunk(body, 1, FinishReason::Stop, true);
  const auto events = sse_payloads(body);
  ASSERT_EQ(events.size(), 2u);
  const json d = json::parse(events[0])["choices"][0];
  EXPECT_EQ(d["index"], 1);
  EXPECT_EQ(d["delta"]["tool_calls"][1]["index"], 1);  // streamed calls carry their index
  EXPECT_EQ(d["delta"]["tool_calls"][1]["function"]["name"], "search");
  EXPECT_EQ(json::parse(events[1])["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ServerFormatEvents, ErrorEvent) {
  std::string body;
  ResponseFormatter::error_event(body, internal_error("boom"));
  ASSERT_EQ(body.rfind("data: ", 0), 0u);
  ASSERT_EQ(body.substr(body.size() - 2), "\n\n");
  const json e = json::parse(body.substr(6, body.size() - 8));
  EXPECT_EQ(e["error"]["message"], "boom");
  EXPECT_EQ(e["error"]["type"], "server_error");
}

TEST(ServerHttpMetrics, CountsAndRenders) {
  HttpMetrics m;
  m.count_response(200);
  m.count_response(200);
  m.count_response(400);
  m.count_response(418);
  m.count_disconnect();
  EXPECT_EQ(m.responses(200), 2u);
  EXPECT_EQ(m.responses(400), 1u);
  const std::string text = m.prometheus_text(3, 9, true);
  EXPECT_NE(text.find("rocmforge_http_responses_total{code=\"200\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rocmforge_http_responses_total{code=\"other\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("rocmforge_http_client_disconnects_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("rocmforge_http_requests_in_flight 3\n"), std::string::npos);
  EXPECT_NE(text.find("rocmforge_server_ready 1\n"), std::string::npos);
  EXPECT_NE(text.find("rocmforge_http_connections 9\n"), std::string::npos);
  EXPECT_NE(text.find("process_resident_memory_bytes "), std::string::npos);
}

}  // namespace
}  // namespace rf::server
