// Request parsing and validation (src/server/protocol.h): every prompt form,
// parameter types and ranges, logit_bias, unsupported parameters named in a
// 400, unknown fields ignored, /tokenize and /detokenize bodies, and the
// OpenAI error body.
#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/protocol.h"

namespace rf::server {
namespace {

GenerationRequest completion(const std::string& body) { return parse_completion_request(parse_json_body(body)); }
GenerationRequest chat(const std::string& body) { return parse_chat_request(parse_json_body(body)); }

// The ApiError a call throws (status 0 when it throws none).
template <typename F>
ApiError error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "no error", "");
}

#define EXPECT_API_ERROR(expr, status_, param_)                 \
  do {                                                          \
    const ApiError _e = error_of([&] { (void)(expr); });        \
    EXPECT_EQ(_e.status(), status_) << #expr << ": " << _e.what(); \
    EXPECT_EQ(_e.param(), param_) << #expr << ": " << _e.what(); \
  } while (0)

TEST(ServerProtocol, BodyMustBeAJsonObject) {
  EXPECT_API_ERROR(parse_json_body("{bad"), 400, "");
  EXPECT_API_ERROR(parse_json_body(""), 400, "");
  EXPECT_API_ERROR(parse_json_body("[1,2]"), 400, "");
  EXPECT_API_ERROR(parse_json_body("\"text\""), 400, "");
  EXPECT_API_ERROR(parse_json_body("{\"a\":1} trailing"), 400, "");
  EXPECT_EQ(error_of([] { parse_json_body("null"); }).code(), "invalid_json");
  // A number beyond a double (found by fuzz_request) is bad JSON too, not an internal error.
  EXPECT_EQ(error_of([] { parse_json_body("{\"max_tokens\": 1e999}"); }).code(), "invalid_json");
  EXPECT_TRUE(parse_json_body("{\"a\":[1,{\"b\":2}]}").is_object());
}

TEST(ServerProtocol, DeepNestingIsRefused) {
  const std::string deep = "{\"a\":" + std::string(200, '[') + std::string(200, ']') + "}";
  EXPECT_API_ERROR(parse_json_body(deep), 400, "");
  const std::string ok = "{\"a\":" + std::string(30, '[') + std::string(30, ']') + "}";
  EXPECT_NO_THROW(parse_json_body(ok));
}

TEST(ServerProtocol, PromptForms) {
  auto r = completion(R"({"prompt":"Once upon"})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_FALSE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.prompts[0].text, "Once upon");

  r = completion(R"({"prompt":["a","b","c"]})");
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(r.prompts[2].text, "c");

  r = completion(R"({"prompt":[1,403,407]})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.prompts[0].tokens, (std::vector<int32_t>{1, 403, 407}));

  r = completion(R"({"prompt":[[1,2],[3]]})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].tokens, (std::vector<int32_t>{3}));
}

TEST(ServerProtocol, BadPrompts) {
  EXPECT_API_ERROR(completion("{}"), 400, "prompt");
  EXPECT_API_ERROR(completion(R"({"prompt":null})"), 400, "prompt");
  EXPECT_API_ERROR(completion(R"({"prompt":5})"), 400, "prompt");
  EXPECT_API_ERROR(completion(R"({"prompt":{}})"), 400, "prompt");
  EXPECT_API_ERROR(completion(R"({"prompt":[]})"), 400, "prompt");
  EXPECT_API_ERROR(completion(R"({"prompt":["a",1]})"), 400, "prompt");
  EXPECT_API_ERROR(completion(R"({"prompt":[1,"a"]})"), 400, "prompt");
  EXPECT_API_ERROR(completion(R"({"prompt":[1,-2]})"), 400, "prompt");
  EXPECT_API_ERROR(completion(R"({"prompt":[1,2.5]})"), 400, "prompt");
  EXPECT_API_ERROR(completion(R"({"prompt":[1,99999999999]})"), 400, "prompt");
  EXPECT_API_ERROR(completion(R"({"prompt":[[1],[]]})"), 400, "prompt");
  EXPECT_API_ERROR(completion(R"({"prompt":[[1],"a"]})"), 400, "prompt");
  std::string many = "{\"prompt\":[";
  for (size_t i = 0; i <= kMaxPrompts; ++i) many += std::string(i ? "," : "") + "\"p\"";
  EXPECT_API_ERROR(completion(many + "]}"), 400, "prompt");
}

TEST(ServerProtocol, DefaultsAndSampling) {
  auto r = completion(R"({"prompt":"x"})");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FALSE(r.seed_given);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
  EXPECT_TRUE(r.speculative);
  EXPECT_FALSE(chat(R"({"messages":[{"role":"user","content":"hi"}],"speculative":false})").speculative);

  r = completion(R"({"prompt":"x","max_tokens":32,"temperature":0,"top_p":0.5,"top_k":40,"min_p":0.1,
                     "seed":-1,"presence_penalty":1.5,"frequency_penalty":-0.5,"repetition_penalty":1.1,
                     "min_tokens":4,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},
                     "logprobs":3,"user":"u","speculative":false,"some_future_field":{"x":1}})");
  EXPECT_EQ(*r.max_tokens, 32);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.sampling.seed, ~uint64_t(0));
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 1.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.min_tokens, 4);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_FALSE(r.speculative);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 3);

  // null is "not given"; an integral float counts as an integer; top_k -1 is off.
  r = completion(R"({"prompt":"x","max_tokens":16.0,"temperature":null,"stop":null,"top_k":-1,"logprobs":null})");
  EXPECT_EQ(*r.max_tokens, 16);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FALSE(r.logprobs);

  r = completion(R"({"prompt":"x","logprobs":0})");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 0);
}

TEST(ServerProtocol, WrongTypes) {
  EXPECT_API_ERROR(completion(R"({"prompt":"x","max_tokens":"16"})"), 400, "max_tokens");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","max_tokens":1.5})"), 400, "max_tokens");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","temperature":"hot"})"), 400, "temperature");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","stream":"yes"})"), 400, "stream");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","stream":1})"), 400, "stream");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","seed":"42"})"), 400, "seed");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","stop":5})"), 400, "stop");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","stop":["a",5]})"), 400, "stop");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","model":7})"), 400, "model");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","logprobs":true})"), 400, "logprobs");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","ignore_eos":"true"})"), 400, "ignore_eos");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","speculative":0})"), 400, "speculative");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","stream":true,"stream_options":true})"), 400, "stream_options");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","logit_bias":[1]})"), 400, "logit_bias");
}

TEST(ServerProtocol, OutOfRangeValues) {
  EXPECT_API_ERROR(completion(R"({"prompt":"x","temperature":-0.1})"), 400, "temperature");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","temperature":2.5})"), 400, "temperature");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","top_p":0})"), 400, "top_p");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","top_p":1.01})"), 400, "top_p");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","top_k":-2})"), 400, "top_k");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","min_p":1.5})"), 400, "min_p");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","max_tokens":0})"), 400, "max_tokens");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","max_tokens":-5})"), 400, "max_tokens");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","max_tokens":1e300})"), 400, "max_tokens");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","max_tokens":99999999999999999999999})"), 400, "max_tokens");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","presence_penalty":3})"), 400, "presence_penalty");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","frequency_penalty":-2.5})"), 400, "frequency_penalty");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","repetition_penalty":0})"), 400, "repetition_penalty");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","min_tokens":-1})"), 400, "min_tokens");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","logprobs":21})"), 400, "logprobs");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","n":0})"), 400, "n");
  EXPECT_API_ERROR(completion(R"({"prompt":"x","stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})"),
                   400, "stop");
}

TEST(ServerProtocol, StopStrings) {
  EXPECT_EQ(completion(R"({"prompt":"x","stop":"\n"})").stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(completion(R"({"prompt":"x","stop":["a","","bc"]})").stop, (std::vector<std::string>{"a", "bc"}));
}

TEST(ServerProtocol, UnsupportedParametersAreNamed) {
  auto code = [](const std::string& body, bool is_chat = false) {
    return error_of([&] { is_chat ? chat(body) : completion(body); });
  };
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt":"x","best_of":3})", "best_of"},
           {R"({"prompt":"x","echo":true})", "echo"},
           {R"({"prompt":"x","suffix":"end"})", "suffix"}}) {
    const ApiError e = code(body);
    EXPECT_EQ(e.status(), 400) << body;
    EXPECT_EQ(e.param(), param) << body;
    EXPECT_EQ(e.code(), "unsupported_parameter") << body;
    EXPECT_NE(std::string(e.what()).find(param), std::string::npos) << e.what();
  }
  const std::string m = R"("messages":[{"role":"user","content":"hi"}])";
  for (const auto& [extra, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("functions":[{"name":"f"}])", "functions"},
           {R"("function_call":"auto")", "function_call"}}) {
    const ApiError e = code("{" + m + "," + extra + "}", true);
    EXPECT_EQ(e.status(), 400) << extra;
    EXPECT_EQ(e.param(), param) << extra;
  }
  // Their "off" values are fine, and what is supported now.
  EXPECT_NO_THROW(completion(R"({"prompt":"x","n":1,"best_of":1,"echo":false,"suffix":"","logit_bias":{}})"));
  EXPECT_EQ(completion(R"({"prompt":"x","n":4})").n, 4);
  EXPECT_TRUE(chat("{" + m + R"(,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto"})").tool_choice_auto);
  EXPECT_TRUE(chat("{" + m + R"(,"response_format":{"type":"json_object"}})").grammar);
  EXPECT_TRUE(chat("{" + m + R"(,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"})").tool_call_forced);
  EXPECT_TRUE(completion(R"({"prompt":"x","grammar":"root ::= \"a\""})").grammar);
  EXPECT_NO_THROW(chat("{" + m + R"(,"tools":[],"tool_choice":"none","response_format":{"type":"text"},"n":1})"));
}

TEST(ServerProtocol, LogitBias) {
  auto r = completion(R"({"prompt":"x","logit_bias":{"50256":-100,"7":2.5,"0":100}})");
  EXPECT_EQ(r.logit_bias, (std::vector<std::pair<int32_t, float>>{{0, 100.0f}, {7, 2.5f}, {50256, -100.0f}}));
  r = chat(R"({"messages":[{"role":"user","content":"hi"}],"logit_bias":{"3":1}})");
  EXPECT_EQ(r.logit_bias, (std::vector<std::pair<int32_t, float>>{{3, 1.0f}}));
  EXPECT_TRUE(completion(R"({"prompt":"x","logit_bias":null})").logit_bias.empty());
  for (const char* bad : {R"([1])", R"("5")", R"({"-1":1})", R"({"a":1})", R"({"1.5":1})", R"({"":1})",
                          R"({"99999999999":1})", R"({"2147483648":1})", R"({"5":100.5})", R"({"5":-101})",
                          R"({"5":"1"})", R"({"5":null})", R"({"5":true})", R"({"5":1,"05":2})"}) {
    EXPECT_API_ERROR(completion(std::string(R"({"prompt":"x","logit_bias":)") + bad + "}"), 400, "logit_bias");
  }
}

TEST(ServerProtocol, TokenizeAndDetokenizeBodies) {
  auto t = parse_tokenize_request(parse_json_body(R"({"prompt":"Once upon"})"));
  EXPECT_FALSE(t.chat);
  EXPECT_EQ(t.prompt, "Once upon");
  EXPECT_TRUE(t.add_special_tokens);
  EXPECT_FALSE(t.return_token_strs);
  t = parse_tokenize_request(parse_json_body(R"({"prompt":"x","add_special_tokens":false,"return_token_strs":true,"model":"m"})"));
  EXPECT_FALSE(t.add_special_tokens);
  EXPECT_TRUE(t.return_token_strs);
  EXPECT_EQ(t.model, "m");
  // Messages as for a chat completion: content parts joined.
  t = parse_tokenize_request(parse_json_body(
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"add_generation_prompt":false})"));
  EXPECT_TRUE(t.chat);
  EXPECT_FALSE(t.add_generation_prompt);
  EXPECT_EQ(t.messages[0]["content"], "a\nb");
  auto tokenize = [](const std::string& body) { return parse_tokenize_request(parse_json_body(body)); };
  EXPECT_API_ERROR(tokenize("{}"), 400, "prompt");
  EXPECT_API_ERROR(tokenize(R"({"prompt":"x","messages":[{"role":"user","content":"y"}]})"), 400, "messages");
  EXPECT_API_ERROR(tokenize(R"({"prompt":5})"), 400, "prompt");
  EXPECT_API_ERROR(tokenize(R"({"messages":[]})"), 400, "messages");
  EXPECT_API_ERROR(tokenize(R"({"messages":[{"content":"y"}]})"), 400, "messages[0].role");
  EXPECT_API_ERROR(tokenize(R"({"prompt":"x","return_token_strs":"yes"})"), 400, "return_token_strs");

  auto d = parse_detokenize_request(parse_json_body(R"({"tokens":[1,2,3]})"));
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(parse_detokenize_request(parse_json_body(R"({"tokens":[]})")).tokens.empty());
  auto detokenize = [](const std::string& body) { return parse_detokenize_request(parse_json_body(body)); };
  EXPECT_API_ERROR(detokenize("{}"), 400, "tokens");
  EXPECT_API_ERROR(detokenize(R"({"tokens":"1 2"})"), 400, "tokens");
  EXPECT_API_ERROR(detokenize(R"({"tokens":[1,-2]})"), 400, "tokens");
  EXPECT_API_ERROR(detokenize(R"({"tokens":[1.5]})"), 400, "tokens");
}

TEST(ServerProtocol, StreamOptionsNeedStream) {
  EXPECT_API_ERROR(completion(R"({"prompt":"x","stream_options":{"include_usage":true}})"), 400, "stream_options");
  EXPECT_FALSE(completion(R"({"prompt":"x","stream":true,"stream_options":{}})").include_usage);
}

TEST(ServerProtocol, ChatMessages) {
  auto r = chat(R"({"messages":[{"role":"system","content":"Be brief."},
                                 {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
                                 {"role":"assistant","content":null,"name":"bot"}],
                    "max_completion_tokens":8,"max_tokens":100,"logprobs":true,"top_logprobs":2})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0]["content"], "Be brief.");
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_EQ(r.messages[2]["name"], "bot");  // other fields pass through to the template
  EXPECT_EQ(*r.max_tokens, 8);               // max_completion_tokens wins
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 2);
  EXPECT_EQ(*chat(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":5})").max_tokens, 5);
  EXPECT_TRUE(chat(R"({"messages":[{"role":"user","content":"x"}]})").add_generation_prompt);
  EXPECT_FALSE(chat(R"({"messages":[{"role":"user","content":"x"}],"add_generation_prompt":false})").add_generation_prompt);
}

TEST(ServerProtocol, BadChatMessages) {
  EXPECT_API_ERROR(chat("{}"), 400, "messages");
  EXPECT_API_ERROR(chat(R"({"messages":[]})"), 400, "messages");
  EXPECT_API_ERROR(chat(R"({"messages":"hi"})"), 400, "messages");
  EXPECT_API_ERROR(chat(R"({"messages":[5]})"), 400, "messages[0]");
  EXPECT_API_ERROR(chat(R"({"messages":[{"content":"x"}]})"), 400, "messages[0].role");
  EXPECT_API_ERROR(chat(R"({"messages":[{"role":1,"content":"x"}]})"), 400, "messages[0].role");
  EXPECT_API_ERROR(chat(R"({"messages":[{"role":"user","content":5}]})"), 400, "messages[0].content");
  EXPECT_API_ERROR(chat(R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})"),
                   400, "messages[0].content");
  EXPECT_API_ERROR(chat(R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})"), 400, "messages[0].content");
  EXPECT_API_ERROR(chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":1})"), 400, "logprobs");
  EXPECT_API_ERROR(chat(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})"), 400, "top_logprobs");
  EXPECT_API_ERROR(chat(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":50})"), 400,
                   "top_logprobs");
  EXPECT_API_ERROR(chat(R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})"), 400,
                   "max_completion_tokens");
}

TEST(ServerProtocol, ErrorBodyShape) {
  const auto body = nlohmann::ordered_json::parse(error_body(invalid_request("bad \"x\"", "temperature")));
  ASSERT_TRUE(body.contains("error"));
  const auto& e = body["error"];
  std::vector<std::string> keys;
  for (auto it = e.begin(); it != e.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"message", "type", "param", "code"}));
  EXPECT_EQ(e["message"], "bad \"x\"");
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_EQ(e["param"], "temperature");
  EXPECT_TRUE(e["code"].is_null());

  const auto busy = nlohmann::json::parse(error_body(service_unavailable("full", "queue_full")));
  EXPECT_EQ(busy["error"]["type"], "server_error");
  EXPECT_TRUE(busy["error"]["param"].is_null());
  EXPECT_EQ(busy["error"]["code"], "queue_full");
  EXPECT_EQ(model_not_found("m").status(), 404);
  EXPECT_EQ(authentication_failed("no").status(), 401);
  EXPECT_EQ(nlohmann::json::parse(error_body_for_status(413, "too big"))["error"]["code"], "payload_too_large");
}

}  // namespace
}  // namespace rf::server
