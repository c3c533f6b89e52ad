// Engine requests from parsed requests, and /tokenize and /detokenize.
#include "server/request_builder.h"

#include "core/utf8.h"
#include "server/api_error.h"
#include "server/reasoning_grammar.h"
#include "server/tool_calls.h"

namespace rf::server {
namespace {

std::vector<int32_t> prompt_tokens(const ModelService& svc, const PromptInput& p, bool add_special = true,
                                   bool parse_special = true) {
  if (!p.is_tokens) {
    try {
      return svc.tokenizer().encode(p.text, add_special, parse_special);
    } catch (const Error& e) {  // the tokenizer refuses the text
      throw invalid_request(e.what(), "prompt");
    }
  }
  for (int32_t t : p.tokens)
    if (t >= svc.n_vocab())
      throw invalid_request("prompt token id " + std::to_string(t) + " is out of range [0, " +
                                std::to_string(svc.n_vocab()) + ")", "prompt");
  return p.tokens;
}

// The template variables of a chat request: its own, and enable_thinking
// false where the budget is 0 (no thinking) and the request did not say.
Json template_kwargs(const GenerationRequest& req, int32_t budget, ReasoningFormat f) {
  Json kwargs = req.chat_template_kwargs.is_object() ? req.chat_template_kwargs : Json::object();
  if (budget == 0 && f != ReasoningFormat::None && !kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = false;
  return kwargs;
}

// The grammar a chat reply is held to: a forced call, or the request's; a
// response_format or a forced call constrains what follows the thinking.
std::shared_ptr<const grammar::Grammar> reply_grammar(const ModelService& svc, const GenerationRequest& req,
                                                      ReasoningFormat f, bool starts_inside) {
  std::shared_ptr<const grammar::Grammar> g = req.grammar;
  if (req.tool_call_forced) {  // the reply: calls of the offered functions, in the model's format
    try {
      g = std::make_shared<const grammar::Grammar>(
          tool_call_grammar(svc.chat().tool_format(), req.tools, req.tool_call_name, req.parallel_tool_calls));
    } catch (const Error& e) {
      throw invalid_request(std::string("a tool's parameters cannot be enforced: ") + e.what(), "tools");
    }
  }
  if (!g || req.raw_grammar || f == ReasoningFormat::None) return g;
  if (f == ReasoningFormat::Harmony)
    throw invalid_request("'response_format' and forced tool calls ('tool_choice' required or a named function) are "
                          "not supported for models of the harmony format: a grammar cannot produce its channel "
                          "markers (control tokens)",
                          req.tool_call_forced ? "tool_choice" : "response_format");
  return std::make_shared<const grammar::Grammar>(after_thinking(*g, starts_inside, kThinkOpen, kThinkClose));
}

}  // namespace

PreparedRequests prepare_requests(ModelService& svc, const GenerationRequest& req) {
  const bool chat = is_chat(req.endpoint);
  const char* prompt_param = chat ? "messages" : "prompt";
  PreparedRequests out;
  std::vector<std::vector<int32_t>> prompts;
  int32_t budget = -1;
  if (chat) {
    out.reasoning = svc.reasoning_format();
    budget = req.reasoning_budget.value_or(svc.options().reasoning_budget);
    if (req.raw_grammar && req.reasoning_budget && *req.reasoning_budget >= 0)
      throw invalid_request("'reasoning_budget' cannot be combined with 'grammar', which constrains the whole reply "
                            "(the thinking included)", "reasoning_budget");
    if (req.raw_grammar) budget = -1;
    std::string rendered;
    prompts.push_back(svc.chat().tokenize(req.messages, req.add_generation_prompt, req.tools,
                                          template_kwargs(req, budget, out.reasoning), &rendered));
    out.starts_inside = req.add_generation_prompt && starts_inside_thinking(out.reasoning, rendered);
  } else {
    for (const PromptInput& p : req.prompts) prompts.push_back(prompt_tokens(svc, p));
  }

  for (const auto& [t, bias] : req.logit_bias)
    if (t >= svc.n_vocab())
      throw invalid_request("'logit_bias' names token " + std::to_string(t) + ", outside the vocabulary [0, " +
                                std::to_string(svc.n_vocab()) + ")", "logit_bias");
  for (int32_t t : req.stop_token_ids)
    if (t >= svc.n_vocab())
      throw invalid_request("'stop_token_ids' names token " + std::to_string(t) + ", outside the vocabulary [0, " +
                                std::to_string(svc.n_vocab()) + ")", "stop_token_ids");
  if (int64_t(prompts.size()) * req.n > kMaxChoices)
    throw invalid_request(std::to_string(prompts.size()) + " prompts x n = " + std::to_string(req.n) + " is more than " +
                              std::to_string(kMaxChoices) + " choices",
                          "n");
  const std::shared_ptr<const grammar::Grammar> grammar =
      chat ? reply_grammar(svc, req, out.reasoning, out.starts_inside) : req.grammar;
  const ThinkingControl thinking = thinking_control(out.reasoning, out.starts_inside, budget, svc.tokenizer());
  const int64_t ctx = svc.max_model_len();
  for (auto& ids : prompts) {
    if (ids.empty()) throw invalid_request("the prompt is empty", prompt_param);
    const int64_t n_prompt = int64_t(ids.size());
    out.prompt_tokens.push_back(int32_t(n_prompt));
    int64_t max_tokens = req.max_tokens ? *req.max_tokens : chat ? ctx - n_prompt : 16;
    if (n_prompt + std::max<int64_t>(max_tokens, 1) > ctx)
      throw invalid_request("this model's maximum context length is " + std::to_string(ctx) + " tokens; the prompt has " +
                                std::to_string(n_prompt) + " tokens and " + std::to_string(max_tokens) +
                                " more were asked for (" + std::to_string(n_prompt + max_tokens) + " in total)",
                            req.max_tokens ? "max_tokens" : prompt_param, "context_length_exceeded");
    if (req.min_tokens > max_tokens)
      throw invalid_request("'min_tokens' (" + std::to_string(req.min_tokens) + ") is more than max_tokens (" +
                                std::to_string(max_tokens) + ")", "min_tokens");
    for (int32_t j = 0; j < req.n; ++j) {
      Request r;
      r.prompt = ids;
      r.logit_bias = req.logit_bias;
      r.sampling = req.sampling;
      r.sampling.seed = req.seed_given ? req.sampling.seed + uint64_t(j) : svc.next_seed();
      r.max_tokens = int32_t(max_tokens);
      r.min_tokens = req.min_tokens;
      r.ignore_eos = req.ignore_eos;
      r.speculative = req.speculative;
      r.stop = req.stop;
      r.stop_token_ids = req.stop_token_ids;
      r.logprobs = req.logprobs;
      r.grammar = grammar;
      r.thinking = thinking;
      r.render_special = out.reasoning == ReasoningFormat::Harmony;  // its markers are control tokens
      out.requests.push_back(std::move(r));
    }
  }
  return out;
}

std::vector<int32_t> tokenize_request(const ModelService& svc, const TokenizeRequest& req) {
  if (req.chat) return svc.chat().tokenize(req.messages, req.add_generation_prompt, req.tools, req.chat_template_kwargs);
  return prompt_tokens(svc, PromptInput{false, req.prompt, {}}, req.add_special_tokens, req.parse_special);
}

std::string detokenize_request(const ModelService& svc, const DetokenizeRequest& req) {
  for (int32_t t : req.tokens)
    if (t >= svc.tokenizer().n_vocab())
      throw invalid_request("token id " + std::to_string(t) + " is out of range [0, " +
                                std::to_string(svc.tokenizer().n_vocab()) + ")", "tokens");
  return utf8::sanitize(svc.tokenizer().decode(req.tokens, /*render_special=*/true));
}

}  // namespace rf::server
