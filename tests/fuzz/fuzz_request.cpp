// libFuzzer target: the path from a request body to generation parameters
// (server/protocol.h) — parse_json_body, then parse_completion_request,
// parse_chat_request, Anthropic's parse_anthropic_messages
// (server/anthropic.h) or parse_responses_request (server/responses.h) —
// never crashes and either refuses the body with an ApiError (4xx) or
// yields parameters inside their documented ranges.
// Input: byte 0 picks the endpoint (mod 4: completions, chat, messages,
// responses); the rest is the body.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "server/anthropic.h"
#include "server/api_error.h"
#include "server/protocol.h"
#include "server/responses.h"

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "fuzz_request: invariant violated: %s\n", what);
  std::abort();
}

void check(const rf::server::GenerationRequest& r) {
  const rf::SamplingParams& s = r.sampling;
  if (!(s.temperature >= 0 && s.temperature <= 2)) violated("temperature in [0, 2]");
  if (!(s.top_p > 0 && s.top_p <= 1)) violated("top_p in (0, 1]");
  if (s.top_k < 0) violated("top_k >= 0");
  if (!(s.min_p >= 0 && s.min_p <= 1)) violated("min_p in [0, 1]");
  if (!(s.presence_penalty >= -2 && s.presence_penalty <= 2)) violated("presence_penalty in [-2, 2]");
  if (!(s.frequency_penalty >= -2 && s.frequency_penalty <= 2)) violated("frequency_penalty in [-2, 2]");
  if (!(s.repetition_penalty > 0 && s.repetition_penalty <= 10)) violated("repetition_penalty in (0, 10]");
  if (s.top_logprobs < 0 || s.top_logprobs > rf::server::kMaxLogprobs) violated("top_logprobs in range");
  if (r.max_tokens && *r.max_tokens < 1) violated("max_tokens >= 1");
  if (r.min_tokens < 0) violated("min_tokens >= 0");
  if (r.stop.size() > rf::server::kMaxStopStrings) violated("at most kMaxStopStrings stop strings");
  for (const auto& stop : r.stop)
    if (stop.empty()) violated("no empty stop string");
  if (r.include_usage && !r.stream) violated("include_usage only with stream");
  for (size_t i = 0; i < r.logit_bias.size(); ++i) {
    const auto& [token, bias] = r.logit_bias[i];
    if (token < 0) violated("logit_bias token ids >= 0");
    if (!(bias >= -100 && bias <= 100)) violated("logit_bias values in [-100, 100]");
    if (i > 0 && token <= r.logit_bias[i - 1].first) violated("logit_bias sorted by id, one entry per id");
  }
  if (r.endpoint == rf::server::Endpoint::Completions) {
    if (r.prompts.empty() || r.prompts.size() > rf::server::kMaxPrompts) violated("1..kMaxPrompts prompts");
    for (const auto& p : r.prompts)
      if (p.is_tokens && p.tokens.empty()) violated("no empty token prompt");
  } else {
    if (!r.messages.is_array() || r.messages.empty()) violated("a non-empty message list");
    for (const auto& m : r.messages)
      if (!m.is_object() || !m["role"].is_string() || !m["content"].is_string()) violated("messages have role and content strings");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int endpoint = data[0] % 4;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  static rf::server::ResponseStore store(1 << 16);  // (empty: a previous_response_id is a 404)
  try {
    const rf::server::Json j = rf::server::parse_json_body(body);
    switch (endpoint) {
      case 0: check(rf::server::parse_completion_request(j)); break;
      case 1: check(rf::server::parse_chat_request(j)); break;
      case 2: check(rf::server::parse_anthropic_messages(j)); break;
      default: check(rf::server::parse_responses_request(j, store).chat); break;
    }
  } catch (const rf::server::ApiError& e) {
    if (e.status() < 400 || e.status() >= 500) violated("refusals are 4xx");
  }
  return 0;
}
