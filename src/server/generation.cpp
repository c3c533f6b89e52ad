// Generation: building engine requests, submitting, and taking what the
// handles have ready as a JSON body or SSE events.
#include "server/generation.h"

#include <chrono>

#include "core/utf8.h"
#include "server/api_error.h"

namespace rf::server {
namespace {

std::vector<int32_t> prompt_tokens(const ModelService& svc, const PromptInput& p, bool add_special = true) {
  if (!p.is_tokens) {
    try {
      return svc.tokenizer().encode(p.text, add_special, /*parse_special=*/true);
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

ResponseMeta make_meta(ModelService& svc, const GenerationRequest& req) {
  ResponseMeta m;
  m.endpoint = req.endpoint;
  m.id = svc.next_id(req.endpoint == Endpoint::ChatCompletions ? "chatcmpl" : "cmpl");
  m.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  m.model = req.model.empty() ? svc.name() : req.model;
  m.logprobs = req.logprobs;
  m.top_logprobs = req.sampling.top_logprobs;
  m.include_usage = req.include_usage;
  return m;
}

}  // namespace

std::vector<Request> build_engine_requests(ModelService& svc, const GenerationRequest& req) {
  const bool chat = req.endpoint == Endpoint::ChatCompletions;
  const char* prompt_param = chat ? "messages" : "prompt";
  std::vector<std::vector<int32_t>> prompts;
  if (chat) prompts.push_back(svc.chat().tokenize(req.messages, req.add_generation_prompt, req.tools));
  else
    for (const PromptInput& p : req.prompts) prompts.push_back(prompt_tokens(svc, p));

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
  std::shared_ptr<const grammar::Grammar> grammar = req.grammar;
  if (req.tool_call_forced) {  // the reply: calls of the offered functions, in the model's format
    try {
      grammar = std::make_shared<const grammar::Grammar>(tool_call_grammar(
          svc.chat().tool_format(), req.tools, req.tool_call_name, req.parallel_tool_calls));
    } catch (const Error& e) {
      throw invalid_request(std::string("a tool's parameters cannot be enforced: ") + e.what(), "tools");
    }
  }
  const int64_t ctx = svc.max_model_len();
  std::vector<Request> out;
  for (auto& ids : prompts) {
    if (ids.empty()) throw invalid_request("the prompt is empty", prompt_param);
    const int64_t n_prompt = int64_t(ids.size());
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
      r.stop = req.stop;
      r.stop_token_ids = req.stop_token_ids;
      r.logprobs = req.logprobs;
      r.grammar = grammar;
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::vector<int32_t> tokenize_request(const ModelService& svc, const TokenizeRequest& req) {
  if (req.chat) return svc.chat().tokenize(req.messages, req.add_generation_prompt, req.tools);
  return prompt_tokens(svc, PromptInput{false, req.prompt, {}}, req.add_special_tokens);
}

std::string detokenize_request(const ModelService& svc, const DetokenizeRequest& req) {
  for (int32_t t : req.tokens)
    if (t >= svc.tokenizer().n_vocab())
      throw invalid_request("token id " + std::to_string(t) + " is out of range [0, " +
                                std::to_string(svc.tokenizer().n_vocab()) + ")", "tokens");
  return utf8::sanitize(svc.tokenizer().decode(req.tokens, /*render_special=*/true));
}

RequestHandle Generation::submit(Request r) {
  try {
    return svc_.engine().submit(std::move(r));
  } catch (const EngineBusy& e) {
    throw service_unavailable(e.what(), svc_.stopping() ? "shutting_down" : "queue_full");
  } catch (const Error& e) {
    throw invalid_request(e.what());
  }
}

Generation::Generation(ModelService& svc, const GenerationRequest& req)
    : svc_(svc),
      fmt_(make_meta(svc, req), svc.tokenizer()),
      n_per_prompt_(size_t(req.n)),
      parse_tools_(req.endpoint == Endpoint::ChatCompletions && (req.tool_choice_auto || req.tool_call_forced)),
      tool_format_(svc.chat().tool_format()),
      tool_names_(req.tool_names),
      parallel_tool_calls_(req.parallel_tool_calls) {
  std::vector<Request> requests = build_engine_requests(svc, req);
  handles_.resize(requests.size());
  held_.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (i % n_per_prompt_ != 0) {
      held_[i] = std::move(requests[i]);
      continue;
    }
    try {
      handles_[i] = submit(std::move(requests[i]));
    } catch (...) {
      cancel();  // what was submitted already (no destructor runs for a throwing constructor)
      throw;
    }
  }
  const size_t n = handles_.size();
  results_.resize(n);
  reply_.resize(n);
  sent_.assign(n, 0);
  text_offset_.assign(n, 0);
  done_.assign(n, false);
  live_ = n;
}

Generation::~Generation() {
  for (auto& h : handles_)
    if (h) h->set_listener(nullptr);
  cancel();
}

void Generation::cancel() {
  for (auto& h : handles_)
    if (h && !h->finished()) h->cancel();
}

void Generation::set_listener(std::function<void()> fn) {
  listener_ = fn;
  for (auto& h : handles_)
    if (h) h->set_listener(fn);
}

void Generation::submit_followers(size_t leader) {
  if (failure_) return;
  for (size_t i = leader + 1; i < leader + n_per_prompt_; ++i) {
    if (!held_[i]) continue;
    Request r = std::move(*held_[i]);
    held_[i].reset();
    try {
      handles_[i] = submit(std::move(r));
    } catch (const ApiError& e) {
      if (!failure_) failure_ = e;
      return;
    }
    if (listener_) handles_[i]->set_listener(listener_);
  }
}

namespace {

// The error a choice that did not end normally turns into.
ApiError finish_error(const StreamEvent& ev) {
  if (ev.finish_reason == FinishReason::Error) return internal_error("generation failed: " + ev.error);
  return service_unavailable("the request was cancelled because the server is shutting down", "shutting_down");
}

ApiError shutdown_error() {
  return service_unavailable("the server stopped before the request finished", "shutting_down");
}

bool finished_normally(FinishReason r) { return r == FinishReason::Stop || r == FinishReason::Length; }

}  // namespace

ParsedReply Generation::parse_reply(size_t i, const std::string& text) const {
  ParsedReply p = parse_tool_calls(tool_format_, text, tool_names_, fmt_.meta().id + "_" + std::to_string(i));
  if (!parallel_tool_calls_ && p.calls.size() > 1) p.calls.resize(1);
  return p;
}

// A streamed choice whose reply may hold tool calls: content goes out up to
// where a call may start; at the end, the calls (or the held text).
void Generation::on_tool_event(size_t i, StreamEvent& ev, std::string& sse) {
  std::string& reply = reply_[i];
  reply += ev.text;
  const size_t safe = ev.finished ? sent_[i] : std::max(sent_[i], tool_call_safe_prefix(tool_format_, reply));
  const std::string_view fresh = std::string_view(reply).substr(sent_[i], safe - sent_[i]);
  if (!fresh.empty() || (fmt_.meta().logprobs && !ev.logprobs.empty()))
    fmt_.delta_chunk(sse, int(i), fresh, ev.logprobs, text_offset_[i]);
  sent_[i] = safe;
  if (!ev.finished || !finished_normally(ev.finish_reason)) return;
  const ParsedReply p = parse_reply(i, reply);
  if (!p.calls.empty()) {
    fmt_.tool_calls_chunk(sse, int(i), p.calls);
  } else if (sent_[i] < reply.size()) {
    std::vector<TokenLogprob> none;
    fmt_.delta_chunk(sse, int(i), std::string_view(reply).substr(sent_[i]), none, text_offset_[i]);
  }
  results_[i].tool_calls = p.calls;
}

void Generation::on_event(size_t i, StreamEvent& ev, std::string* sse) {
  ChoiceResult& c = results_[i];
  // A prompt's first choice has news: its prompt is computed (or it ended).
  if (n_per_prompt_ > 1 && i % n_per_prompt_ == 0) submit_followers(i);
  if (sse && parse_tools_) {
    on_tool_event(i, ev, *sse);
  } else if (sse) {
    if (!ev.text.empty() || (fmt_.meta().logprobs && !ev.logprobs.empty()))
      fmt_.delta_chunk(*sse, int(i), ev.text, ev.logprobs, text_offset_[i]);
  } else {
    c.text += ev.text;
    if (fmt_.meta().logprobs) c.logprobs.insert(c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
  }
  if (!ev.finished) return;
  done_[i] = true;
  --live_;
  if (!finished_normally(ev.finish_reason)) {
    if (!failure_) failure_ = finish_error(ev);
    return;
  }
  // The prompt counts once for its n choices.
  const bool first = i % n_per_prompt_ == 0;
  c.finish = ev.finish_reason;
  c.prompt_tokens = first ? ev.prompt_tokens : 0;
  c.completion_tokens = ev.completion_tokens;
  c.cached_tokens = first ? ev.cached_prompt_tokens : 0;
  usage_.add(ChoiceResult{"", {}, c.finish, "", c.prompt_tokens, c.completion_tokens, c.cached_tokens, {}});
  if (!sse && parse_tools_) {
    ParsedReply p = parse_reply(i, c.text);
    if (!p.calls.empty()) {
      c.text = std::move(p.content);
      c.tool_calls = std::move(p.calls);
    }
  }
  if (sse) fmt_.finish_chunk(*sse, int(i), ev.finish_reason, !c.tool_calls.empty());
}

void Generation::drain(std::string* sse) {
  for (size_t i = 0; i < handles_.size() && !failure_; ++i)
    while (!done_[i] && handles_[i]) {
      std::optional<StreamEvent> ev = handles_[i]->next(std::chrono::milliseconds(0));
      if (!ev) break;
      on_event(i, *ev, sse);
    }
}

bool Generation::end_stream(std::string& out) {
  if (failure_) ResponseFormatter::error_event(out, *failure_);
  else if (fmt_.meta().include_usage) fmt_.usage_chunk(out, usage_);
  ResponseFormatter::done_event(out);
  ended_ = true;
  cancel();  // after a failure, the other choices
  return true;
}

bool Generation::pull_events(std::string& out) {
  if (ended_) return true;
  if (!started_) {
    started_ = true;
    if (fmt_.meta().endpoint == Endpoint::ChatCompletions)
      for (size_t i = 0; i < handles_.size(); ++i) fmt_.role_chunk(out, int(i));
  }
  drain(&out);
  if (live_ > 0 && !failure_) return false;
  return end_stream(out);
}

bool Generation::idle_events(std::string& out) {
  if (ended_) return true;
  if (svc_.stopping()) {
    if (!failure_) failure_ = shutdown_error();
    return end_stream(out);
  }
  out += ": keep-alive\n\n";
  return false;
}

std::optional<std::string> Generation::pull_result() {
  drain(nullptr);
  if (failure_) {
    cancel();
    throw *failure_;
  }
  if (live_ > 0) return std::nullopt;
  return fmt_.full_response(results_);
}

void Generation::check_stopping() const {
  if (live_ > 0 && svc_.stopping()) throw shutdown_error();
}

}  // namespace rf::server
