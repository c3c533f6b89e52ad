// The OpenAI request model: what a POST /v1/completions or
// /v1/chat/completions body means once parsed and validated — and the
// bodies of POST /tokenize and /detokenize (vLLM's and llama.cpp's
// extension: the token ids a prompt or a chat becomes, and back). Parsing checks
// JSON well-formedness, types and ranges and throws ApiError (400, naming
// the parameter) for anything wrong; unknown fields are ignored, known
// OpenAI parameters this server lacks are refused by name. Turning prompts
// into token ids needs the model and happens later (generation.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/sampling.h"
#include "grammar/grammar.h"

namespace rf::server {

using Json = nlohmann::ordered_json;  // keeps the client's key order (chat templates' tojson shows it)

// A body or event as compact JSON text for the wire: invalid UTF-8 in its
// strings becomes U+FFFD rather than an exception.
inline std::string wire_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The API a generation answers in: OpenAI's completions and chat
// completions, Anthropic's messages (server/anthropic.h), OpenAI's
// responses (server/responses.h). The last two arrive as chat requests.
enum class Endpoint { Completions, ChatCompletions, Messages, Responses };
inline bool is_chat(Endpoint e) { return e != Endpoint::Completions; }

// One prompt of a completions request: text, or token ids given as they are.
struct PromptInput {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> tokens;
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;                 // "" when the client named none
  std::vector<PromptInput> prompts;  // completions: one choice per prompt
  Json messages = Json::array();     // chat: [{role, content: string, ...}]
  bool add_generation_prompt = true; // chat (extension)

  std::optional<int64_t> max_tokens; // unset: 16 (completions) or the rest of the context (chat)
  int32_t min_tokens = 0;            // extension
  bool ignore_eos = false;           // extension
  bool speculative = true;           // extension: false opts out of speculative decoding (same output, no proposals)
  SamplingParams sampling;           // top_logprobs included
  bool seed_given = false;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;  // extension (vLLM): sampling one ends the choice
  int32_t n = 1;                     // choices per prompt
  // Chat tools: the offered functions ({type, function: {name, description,
  // parameters}}, null when none) go to the chat template as `tools`; with
  // tool_choice auto the reply is parsed for calls (server/tool_calls.h).
  Json tools;
  std::vector<std::string> tool_names;
  bool tool_choice_auto = false;
  // tool_choice "required" (any offered function) or a named one: the reply
  // is constrained to calls (server/tool_calls.h, tool_call_grammar).
  bool tool_call_forced = false;
  std::string tool_call_name;        // the named function ("" : any)
  bool parallel_tool_calls = true;
  // Structured output: `response_format` json_object / json_schema, or
  // llama.cpp's `grammar` (GBNF), compiled (null: free text).
  std::shared_ptr<const grammar::Grammar> grammar;
  bool raw_grammar = false;          // `grammar` (GBNF): it constrains the whole reply, thinking included
  // Reasoning (chat): template variables beyond messages and tools
  // (chat_template_kwargs, e.g. enable_thinking; reasoning_effort lands
  // here too), null when none; the thinking budget in tokens (-1: none;
  // unset: the server's --reasoning-budget).
  Json chat_template_kwargs;
  std::optional<int32_t> reasoning_budget;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias in [-100, 100]), sorted by id
  bool logprobs = false;             // completions: `logprobs` is set; chat: `logprobs: true`
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
};

// POST /tokenize: {"prompt": "..."} (tokenized as a completions prompt), or
// {"messages": [...]} (the chat prompt a chat completion would get: the
// template rendered, special-token text in messages kept as text, BOS).
struct TokenizeRequest {
  std::string model;
  bool chat = false;                  // messages were given rather than a prompt
  std::string prompt;
  Json messages = Json::array();      // validated as for a chat completion
  Json tools;                         // messages: rendered with these tools (null: none)
  bool add_special_tokens = true;     // prompt: BOS (and EOS) as the vocabulary wants
  bool add_generation_prompt = true;  // messages
  Json chat_template_kwargs;          // messages: template variables (null: none)
  bool parse_special = true;          // prompt: special-token text becomes control tokens (llama.cpp's `parse_special`)
  bool return_token_strs = false;     // also the vocabulary's text of each token
  bool with_pieces = false;           // llama.cpp's shape: tokens as [{"id", "piece"}]
};

// POST /detokenize: {"tokens": [ids]} -> the text, special tokens rendered.
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

// Request limits the parser enforces.
constexpr size_t kMaxPrompts = 256;       // prompts in one completions batch
constexpr int64_t kMaxN = 128;            // n: choices per prompt
constexpr int64_t kMaxChoices = 256;      // prompts x n in one request
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopTokenIds = 256;
constexpr size_t kMaxJsonDepth = 64;
constexpr int32_t kMaxLogprobs = kMaxTopLogprobs;

// Parses a request body: malformed JSON, a body that is not an object, or
// nesting deeper than kMaxJsonDepth -> ApiError 400.
Json parse_json_body(std::string_view body);

GenerationRequest parse_completion_request(const Json& body);
GenerationRequest parse_chat_request(const Json& body);
TokenizeRequest parse_tokenize_request(const Json& body);
DetokenizeRequest parse_detokenize_request(const Json& body);

}  // namespace rf::server
