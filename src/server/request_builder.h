// From a parsed request to engine requests: prompts tokenized or the chat
// rendered (with the request's template variables), n requests per prompt,
// sampling and limits checked against the model; for chat replies the
// reasoning format they are parsed with, whether the prompt opened the
// thinking, what the engine tracks and budgets of it, and structured output
// placed after the thinking (server/reasoning_grammar.h). Also /tokenize
// and /detokenize, which share the prompt code.
#pragma once

#include <string>
#include <vector>

#include "engine/request.h"
#include "server/model_service.h"
#include "server/protocol.h"
#include "server/reasoning.h"

namespace rf::server {

struct PreparedRequests {
  std::vector<Request> requests;  // choice p * n + j for prompt p (OpenAI's order)
  ReasoningFormat reasoning = ReasoningFormat::None;  // chat: how replies are parsed
  bool starts_inside = false;     // chat: the prompt opened the thinking
  std::vector<int32_t> prompt_tokens;  // each prompt's length, in prompt order
};

// n per prompt, choice j's seed the request's seed + j when one was given.
// Throws ApiError 400 (empty prompt, token id out of range, context
// exceeded, chat template failure, more than kMaxChoices choices, a
// constraint that cannot be combined with the reasoning format).
PreparedRequests prepare_requests(ModelService& svc, const GenerationRequest& req);
inline std::vector<Request> build_engine_requests(ModelService& svc, const GenerationRequest& req) {
  return prepare_requests(svc, req).requests;
}

// /tokenize: the ids a completion (prompt) or a chat completion (messages)
// would be given — the same code path. Throws ApiError 400.
std::vector<int32_t> tokenize_request(const ModelService& svc, const TokenizeRequest& req);
// /detokenize: the text of the ids, special tokens rendered, as valid UTF-8.
// Throws ApiError 400 for an id outside the vocabulary.
std::string detokenize_request(const ModelService& svc, const DetokenizeRequest& req);

}  // namespace rf::server
