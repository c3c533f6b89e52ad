// Generation: building engine requests, submitting, collecting and streaming.
#include "server/generation.h"

#include <chrono>

#include "server/api_error.h"

namespace rf::server {
namespace {

using Clock = std::chrono::steady_clock;
// A stream with nothing to send for this long gets an SSE comment, so that a
// client that left is noticed even while its request waits in the queue.
constexpr std::chrono::milliseconds kHeartbeat{1000};
// How often a batch stream (several prompts) looks at its other handles.
constexpr std::chrono::milliseconds kBatchPoll{5};

std::vector<int32_t> prompt_tokens(ModelService& svc, const PromptInput& p) {
  if (!p.is_tokens) {
    try {
      return svc.tokenizer().encode(p.text, /*add_special=*/true, /*parse_special=*/true);
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
  if (chat) prompts.push_back(svc.chat().tokenize(req.messages, req.add_generation_prompt));
  else
    for (const PromptInput& p : req.prompts) prompts.push_back(prompt_tokens(svc, p));

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
    Request r;
    r.prompt = std::move(ids);
    r.sampling = req.sampling;
    if (!req.seed_given) r.sampling.seed = svc.next_seed();
    r.max_tokens = int32_t(max_tokens);
    r.min_tokens = req.min_tokens;
    r.ignore_eos = req.ignore_eos;
    r.stop = req.stop;
    r.logprobs = req.logprobs;
    out.push_back(std::move(r));
  }
  return out;
}

Generation::Generation(ModelService& svc, const GenerationRequest& req)
    : svc_(svc), fmt_(make_meta(svc, req), svc.tokenizer()) {
  std::vector<Request> requests = build_engine_requests(svc, req);
  handles_.reserve(requests.size());
  for (Request& r : requests) {
    try {
      handles_.push_back(svc.engine().submit(std::move(r)));
    } catch (const EngineBusy& e) {
      cancel();  // what was submitted already (no destructor runs for a throwing constructor)
      throw service_unavailable(e.what(), svc.stopping() ? "shutting_down" : "queue_full");
    } catch (const Error& e) {
      cancel();
      throw invalid_request(e.what());
    }
  }
}

Generation::~Generation() { cancel(); }

void Generation::cancel() {
  for (auto& h : handles_)
    if (!h->finished()) h->cancel();
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

}  // namespace

std::string Generation::run_to_completion() {
  std::vector<ChoiceResult> results(handles_.size());
  for (size_t i = 0; i < handles_.size(); ++i) {
    ChoiceResult& c = results[i];
    for (;;) {
      std::optional<StreamEvent> ev = handles_[i]->next(kHeartbeat);
      if (!ev) {
        if (svc_.stopping()) throw shutdown_error();
        continue;
      }
      c.text += ev->text;
      if (fmt_.meta().logprobs)
        c.logprobs.insert(c.logprobs.end(), ev->logprobs.begin(), ev->logprobs.end());
      if (!ev->finished) continue;
      if (ev->finish_reason != FinishReason::Stop && ev->finish_reason != FinishReason::Length)
        throw finish_error(*ev);
      c.finish = ev->finish_reason;
      c.prompt_tokens = ev->prompt_tokens;
      c.completion_tokens = ev->completion_tokens;
      c.cached_tokens = ev->cached_prompt_tokens;
      break;
    }
  }
  return fmt_.full_response(results);
}

bool Generation::stream(const Writer& write) {
  const size_t n = handles_.size();
  std::vector<size_t> text_offset(n, 0);
  std::vector<bool> done(n, false);
  size_t live = n;
  Usage usage;
  std::optional<ApiError> failure;
  std::string buf;
  auto on_event = [&](size_t i, const StreamEvent& ev) {
    if (!ev.text.empty() || (fmt_.meta().logprobs && !ev.logprobs.empty()))
      fmt_.delta_chunk(buf, int(i), ev.text, ev.logprobs, text_offset[i]);
    if (!ev.finished) return;
    done[i] = true;
    --live;
    if (ev.finish_reason == FinishReason::Stop || ev.finish_reason == FinishReason::Length) {
      fmt_.finish_chunk(buf, int(i), ev.finish_reason);
      usage.add(ChoiceResult{"", {}, ev.finish_reason, "", ev.prompt_tokens, ev.completion_tokens,
                             ev.cached_prompt_tokens});
    } else if (!failure) {
      failure = finish_error(ev);
    }
  };
  auto send = [&](std::string_view s) {
    if (write(s)) return true;
    cancel();
    return false;
  };

  if (fmt_.meta().endpoint == Endpoint::ChatCompletions)
    for (size_t i = 0; i < n; ++i) fmt_.role_chunk(buf, int(i));
  if (!buf.empty() && !send(buf)) return false;
  auto last_write = Clock::now();
  while (live > 0 && !failure) {
    buf.clear();
    size_t first = 0;
    while (done[first]) ++first;
    if (auto ev = handles_[first]->next(n == 1 ? kHeartbeat : kBatchPoll)) on_event(first, *ev);
    for (size_t i = 0; i < n; ++i)  // whatever else is ready, in one write
      while (!done[i]) {
        auto ev = handles_[i]->next(std::chrono::milliseconds(0));
        if (!ev) break;
        on_event(i, *ev);
      }
    const auto now = Clock::now();
    if (!buf.empty()) {
      if (!send(buf)) return false;
      last_write = now;
    } else if (now - last_write >= kHeartbeat) {
      if (svc_.stopping()) failure = shutdown_error();
      else if (!send(": keep-alive\n\n")) return false;
      last_write = now;
    }
  }
  buf.clear();
  if (failure) ResponseFormatter::error_event(buf, *failure);
  else if (fmt_.meta().include_usage) fmt_.usage_chunk(buf, usage);
  ResponseFormatter::done_event(buf);
  return send(buf);
}

}  // namespace rf::server
