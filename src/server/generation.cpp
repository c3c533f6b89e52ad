// Generation: building engine requests, submitting, and taking what the
// handles have ready as a JSON body or SSE events.
#include "server/generation.h"

#include <chrono>

#include "core/utf8.h"
#include "server/api_error.h"

namespace rf::server {
namespace {

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

std::unique_ptr<ReplyWriter> openai_writer(ModelService& svc, const GenerationRequest& req) {
  return std::make_unique<OpenAIWriter>(make_meta(svc, req), svc.tokenizer());
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

Generation::Generation(ModelService& svc, const GenerationRequest& req, std::unique_ptr<ReplyWriter> writer)
    : svc_(svc),
      writer_(writer ? std::move(writer) : openai_writer(svc, req)),
      chat_(is_chat(req.endpoint)),
      logprobs_(req.logprobs),
      n_per_prompt_(size_t(req.n)) {
  PreparedRequests prepared = prepare_requests(svc, req);
  std::vector<Request>& requests = prepared.requests;
  prompt_tokens_ = prepared.prompt_tokens;
  const size_t n = requests.size();
  if (chat_) {
    ReplyParserOptions o;
    o.reasoning = prepared.reasoning;
    o.starts_inside = prepared.starts_inside;
    o.parse_tools = req.tool_choice_auto || req.tool_call_forced;
    o.tool_format = svc.chat().tool_format();
    o.tool_names = req.tool_names;
    o.parallel_tool_calls = req.parallel_tool_calls;
    for (size_t i = 0; i < n; ++i) {
      o.id_prefix = svc.next_id("c", '_').substr(2) + "_" + std::to_string(i);
      parsers_.emplace_back(o);
    }
  }
  handles_.resize(n);
  held_.resize(n);
  for (size_t i = 0; i < n; ++i) {
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
  results_.resize(n);
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

void Generation::on_event(size_t i, StreamEvent& ev, std::string* sse) {
  ChoiceResult& c = results_[i];
  // A prompt's first choice has news: its prompt is computed (or it ended).
  if (n_per_prompt_ > 1 && i % n_per_prompt_ == 0) submit_followers(i);
  ReplyDelta d;
  if (chat_) d = parsers_[i].push(ev.text);
  else d.content = ev.text;
  if (logprobs_) c.logprobs.insert(c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
  if (!chat_) c.text += ev.text;
  if (sse && (!d.empty() || (logprobs_ && !ev.logprobs.empty()))) writer_->delta(*sse, i, d, ev.logprobs);
  if (!ev.finished) return;
  done_[i] = true;
  --live_;
  if (!finished_normally(ev.finish_reason)) {
    if (!failure_) failure_ = finish_error(ev);
    return;
  }
  if (chat_) {
    std::vector<ToolCall> calls;
    const ReplyDelta rest = parsers_[i].finish(calls);
    if (sse && !rest.empty()) writer_->delta(*sse, i, rest, {});
    if (sse && !calls.empty()) writer_->tool_calls(*sse, i, calls);
    const ReplyResult& r = parsers_[i].result();
    c.text = r.content;
    c.reasoning = r.reasoning;
    c.tool_calls = r.calls;
  }
  // The prompt counts once for its n choices.
  const bool first = i % n_per_prompt_ == 0;
  c.finish = ev.finish_reason;
  c.prompt_tokens = first ? ev.prompt_tokens : 0;
  c.completion_tokens = ev.completion_tokens;
  c.cached_tokens = first ? ev.cached_prompt_tokens : 0;
  c.reasoning_tokens = ev.reasoning_tokens;
  c.stop_string = ev.stop_string;
  usage_.add(c);
  if (sse) writer_->finish(*sse, i, c);
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
  if (failure_) writer_->error(out, *failure_);
  else writer_->end(out, usage_);
  ended_ = true;
  cancel();  // after a failure, the other choices
  return true;
}

bool Generation::pull_events(std::string& out) {
  if (ended_) return true;
  if (!started_) {
    started_ = true;
    writer_->begin(out, handles_.size(), prompt_tokens_);
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
  writer_->keep_alive(out);
  return false;
}

std::optional<std::string> Generation::pull_result() {
  drain(nullptr);
  if (failure_) {
    cancel();
    throw *failure_;
  }
  if (live_ > 0) return std::nullopt;
  return writer_->body(results_, usage_);
}

void Generation::check_stopping() const {
  if (live_ > 0 && svc_.stopping()) throw shutdown_error();
}

}  // namespace rf::server
