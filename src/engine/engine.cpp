// Engine implementation: admission, the step, token processing and finish.
#include "engine/engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

#include "core/log.h"
#include "engine/engine_active.h"

namespace rf {

using Clock = std::chrono::steady_clock;


Engine::Engine(const Model& model, const Tokenizer& tokenizer, Backend& backend, EngineConfig config)
    : Engine(model, tokenizer, std::span<Backend* const>(std::array<Backend*, 1>{&backend}), {}, config) {}

Engine::Engine(const Model& model, const Tokenizer& tokenizer, std::span<Backend* const> backends,
               std::span<Communicator* const> comms, EngineConfig config)
    : model_(model), tokenizer_(tokenizer), config_(config) {
  const ModelConfig& mc = model.config();
  RF_CHECK(config_.block_size > 0 && config_.block_size <= 1024, "engine: bad block size ", config_.block_size);
  if (config_.max_model_len <= 0) config_.max_model_len = mc.n_ctx_train;
  config_.max_num_batched_tokens = std::max(config_.max_num_batched_tokens, 1);
  BackendLimits limits;
  limits.max_tokens = config_.max_num_batched_tokens;
  limits.max_seqs = config_.max_num_seqs;
  const SpeculativeConfig& spec = config_.speculative;
  spec.validate();
  // A sequence verifying proposals takes a logit row for each and one more.
  limits.max_logits = config_.max_num_seqs * (spec.enabled() ? 1 + spec.draft_max : 1);
  RF_CHECK(!spec.enabled() || !mc.has_recurrent(), "speculative decoding (--spec-type ", spec_type_name(spec.type),
           ") is not supported for models with recurrent layers (", mc.arch,
           "): their state cannot be rolled back past rejected tokens; run without --spec-type");
  limits.max_blocks_per_seq = (config_.max_model_len + config_.block_size - 1) / config_.block_size;
  KVBudget budget;
  budget.num_blocks = config_.num_blocks;
  budget.kv_bytes = config_.kv_memory_bytes;
  budget.memory_utilization = config_.memory_utilization;
  budget.max_seqs = config_.max_num_seqs;
  budget.max_model_len = config_.max_model_len;
  budget.max_chunk = config_.max_num_batched_tokens;
  // Hybrid models: a state slot per sequence and the prefix checkpoints.
  if (config_.state_checkpoints < 0) config_.state_checkpoints = config_.prefix_caching ? config_.max_num_seqs : 0;
  if (!mc.has_recurrent()) config_.state_checkpoints = 0;
  if (mc.has_recurrent()) budget.state_rows = config_.max_num_seqs + config_.state_checkpoints;
  // The draft model's runner first: on a GPU the target's KV cache is then
  // planned from the memory its weights, workspace and KV leave.
  if (spec.enabled() && spec.type == SpecType::Draft) {
    RF_CHECK(backends.size() == 1, "speculative decoding with a draft model is not supported with tensor parallelism");
    RF_CHECK(spec.draft_backend != backends[0], "the draft model needs a backend of its own (one backend holds one "
                                                "model's step buffers and graphs)");
    RF_CHECK(spec.draft_backend->device() == backends[0]->device(), "the draft model is on another kind of device");
    draft_model_ = std::make_unique<DraftProposer>(*spec.draft, tokenizer, mc.n_vocab, *spec.draft_backend,
                                                   config_.max_num_seqs, config_.max_num_batched_tokens,
                                                   config_.max_model_len, config_.block_size);
    // A share of device memory for the model: less what the draft took.
    if (budget.memory_utilization > 0 && spec.draft_backend->total_memory() > 0) {
      budget.memory_utilization -= float(double(spec.draft_backend->allocated_bytes()) /
                                         double(spec.draft_backend->total_memory()));
      RF_CHECK(budget.memory_utilization > 0, "the draft model takes all of --gpu-memory-utilization");
    }
  }
  runner_ = std::make_unique<StepRunner>(model, backends, comms, limits, budget, config_.block_size,
                                         config_.kv_cache_dtype);
  config_.num_blocks = runner_->num_blocks();
  pool_ = std::make_unique<BlockPool>(config_.num_blocks, config_.block_size);
  const KVGroupLayout& groups = runner_->kv_groups();
  scheduler_ = std::make_unique<Scheduler>(
      SchedulerConfig{config_.max_num_seqs, config_.max_num_batched_tokens, config_.prefix_caching,
                      groups.group_windows(), mc.has_recurrent() ? config_.max_num_seqs : 0,
                      config_.state_checkpoints},
      *pool_);
  group_blocks_.resize(size_t(groups.n_groups()));
  for (int32_t t = 0; t < mc.n_vocab && t < tokenizer.n_vocab(); ++t)
    if (tokenizer.is_eog(t)) eog_tokens_.push_back(t);
  metrics_.kv_blocks_total = config_.num_blocks;
  metrics_.kv_blocks_free = config_.num_blocks;
  log_info("engine: ", config_.num_blocks, " KV blocks of ", config_.block_size, " tokens x ", groups.group_size(),
           " layers (", dtype_name(runner_->kv_type()), ", ", double(runner_->kv_bytes()) / 1e6, " MB", runner_->n_ranks() > 1 ? " over the ranks" : "",
           "), KV ", groups.summary(), "; one sequence holds up to ", max_sequence_tokens(), " tokens; max ",
           config_.max_num_seqs, " sequences, ", config_.max_num_batched_tokens, " tokens per step, context ",
           config_.max_model_len);
  if (spec.enabled() && spec.type == SpecType::Ngram) {
    proposer_ = std::make_unique<NgramProposer>(spec.ngram_min, spec.ngram_max);
    log_info("engine: speculative decoding: ngram, ", spec.draft_min, "..", spec.draft_max,
             " proposed tokens a step (n-grams of ", spec.ngram_min, "..", spec.ngram_max, " tokens)");
  }
  if (draft_model_)
    log_info("engine: speculative decoding: draft model ", spec.draft->config().summary(), ", ", spec.draft_min, "..",
             spec.draft_max, " proposed tokens a step; its KV cache ", draft_model_->num_blocks(), " blocks");
  if (mc.has_recurrent())
    log_info("engine: recurrent state of ", mc.n_recurrent(), " layers: ", double(runner_->state_row_bytes()) / 1e6,
             " MB per sequence; ", config_.max_num_seqs, " sequence slots and ", config_.state_checkpoints,
             " prefix checkpoints (", double(runner_->state_bytes()) / 1e6, " MB", runner_->n_ranks() > 1 ? " over the ranks" : "", ")");
}

int32_t Engine::max_sequence_tokens() const {
  return runner_->kv_groups().max_tokens_for_blocks(config_.num_blocks, config_.block_size,
                                                    config_.max_num_batched_tokens);
}

Engine::~Engine() { stop(); }

void Engine::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  threaded_ = true;
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    threaded_ = false;
  }
  // Whatever is left ends as cancelled.
  admit_new();
  std::vector<Active*> left;
  for (auto& [id, a] : active_) left.push_back(a.get());
  for (Active* a : left) finish(*a, FinishReason::Cancelled);
  update_gauges();
  wake_listeners();
}

size_t Engine::active_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_t(outstanding_);
}

ServingLimits Engine::limits() const {
  return ServingLimits{config_.max_model_len, model_.config().n_vocab, config_.max_num_seqs, config_.max_queue,
                       model_.config().n_embd,
                       config_.pooling != Pooling::None ? config_.pooling : model_.config().pooling};
}

RequestHandle Engine::submit(Request req) {
  const int32_t n_prompt = int32_t(req.prompt.size());
  RF_CHECK(n_prompt > 0, "the prompt is empty");
  for (int32_t t : req.prompt)
    RF_CHECK(t >= 0 && t < model_.config().n_vocab, "prompt token id ", t, " is out of range [0, ",
             model_.config().n_vocab, ")");
  if (req.pooling != Pooling::None) {  // embeddings: the prompt alone
    req.max_tokens = 0;
    req.min_tokens = 0;
    req.grammar = nullptr;
    req.thinking = ThinkingControl{};
  } else {
    RF_CHECK(req.max_tokens >= 1, "max_tokens must be at least 1");
  }
  RF_CHECK(int64_t(n_prompt) + req.max_tokens <= config_.max_model_len, "this model's maximum context length is ",
           config_.max_model_len, " tokens; the request has ", n_prompt, " prompt tokens and asks for ",
           req.max_tokens, " more (", int64_t(n_prompt) + req.max_tokens, " in total)");
  RF_CHECK(int64_t(n_prompt) + req.max_tokens <= max_sequence_tokens(), "the request needs ",
           int64_t(n_prompt) + req.max_tokens, " tokens of KV cache; the whole cache holds ", max_sequence_tokens(),
           " for one sequence");
  RF_CHECK(req.min_tokens >= 0 && req.min_tokens <= req.max_tokens, "min_tokens must be in [0, max_tokens]");
  for (const auto& [t, bias] : req.logit_bias)
    RF_CHECK(t >= 0 && t < model_.config().n_vocab && std::isfinite(bias), "logit_bias: token id ", t,
             " is out of range [0, ", model_.config().n_vocab, ") or its bias is not finite");
  req.sampling.top_logprobs = std::clamp(req.sampling.top_logprobs, 0, kMaxTopLogprobs);
  std::unique_ptr<Active> a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // While stop() runs. Afterwards the engine is back in manual mode (step()),
    // where submitting is valid; servers refuse late requests themselves.
    if (stopping_ && threaded_) throw EngineBusy("the server is shutting down");
    // Refused only when every sequence slot is taken and max_queue requests
    // already wait for one.
    if (outstanding_ >= int64_t(config_.max_num_seqs) + config_.max_queue)
      throw EngineBusy(str("the request queue is full (", config_.max_queue, " waiting for one of ",
                           config_.max_num_seqs, " sequence slots)"));
    ++outstanding_;
    ++metrics_.queue_depth;
    a = std::make_unique<Active>(tokenizer_, std::move(req), next_id_++);
  }
  a->seq.tokens = a->req.prompt;
  a->seq.n_prompt = n_prompt;
  // Pooling over the first or every token needs each computed here, none
  // taken from the prefix cache.
  a->seq.reuse_prefix = a->req.pooling != Pooling::Mean && a->req.pooling != Pooling::Cls;
  for (int32_t t : a->seq.tokens) a->penalties[t] = PenaltyToken{t, 0, 1};
  RequestHandle h = a->handle;
  metrics_.requests_total++;
  metrics_.prompt_tokens += uint64_t(n_prompt);
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back(std::move(a));
  }
  cv_.notify_all();
  return h;
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    bool worked = false;
    try {
      worked = step();
    } catch (const std::exception& e) {
      log_error("engine step failed: ", e.what());
      wake_listeners();
    }
    if (!worked) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(20), [&] { return stopping_ || !inbox_.empty(); });
    }
  }
}

void Engine::admit_new() {
  std::list<std::unique_ptr<Active>> fresh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fresh.swap(inbox_);
  }
  for (auto& a : fresh) {
    Active* p = a.get();
    if (p->req.grammar) {  // structured output: the vocabulary's trie once, each grammar compiled once
      if (!grammars_) {
        token_bytes_ = grammar::token_bytes(tokenizer_);
        trie_ = std::make_unique<grammar::TokenTrie>(token_bytes_);
        grammars_ = std::make_unique<grammar::GrammarCache>(*trie_, eog_tokens_);
      }
      p->grammar = grammars_->get(*p->req.grammar);
      p->gcursor.state = p->grammar->matcher().initial();
    }
    // Which requests may verify proposals (engine/speculative.h).
    p->speculates = (proposer_ || draft_model_) && p->req.speculative && !p->grammar && !p->embedding() &&
                    !(p->req.thinking.enabled && p->req.thinking.budget >= 0);
    by_seq_[&p->seq] = p;
    active_[p->seq.id] = std::move(a);
    scheduler_->add(&p->seq);
  }
}

void Engine::handle_cancellations() {
  std::vector<Active*> cancelled;
  for (auto& [id, a] : active_)
    if (a->handle->cancelled()) cancelled.push_back(a.get());
  for (Active* a : cancelled) finish(*a, FinishReason::Cancelled);
}

void Engine::update_gauges() {
  const auto running = int64_t(scheduler_->num_running());
  metrics_.running = running;
  {
    // Waiting: every request neither finished nor running — the scheduler's
    // queue and those submitted but not yet admitted (submit counts them in
    // at once, under the same lock), so a scrape right after a submit or a
    // cancellation never reads an idle engine that is not.
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.queue_depth = std::max<int64_t>(outstanding_ - running, 0);
  }
  metrics_.kv_blocks_free = pool_->num_free();
  metrics_.preemptions = scheduler_->num_preemptions();
  metrics_.kv_window_releases = scheduler_->num_window_releases();
}

bool Engine::step() {
  const auto t_start = Clock::now();
  admit_new();
  handle_cancellations();
  propose_drafts();
  std::vector<ScheduledSeq> sched = scheduler_->schedule();
  update_gauges();
  if (sched.empty()) {
    wake_listeners();
    return false;
  }

  batch_.reset(config_.block_size, runner_->limits().max_blocks_per_seq, runner_->kv_groups().n_groups());
  rows_.clear();
  penalties_.clear();
  sampled_.clear();
  sampled_seqs_.clear();
  embedding_rows_.clear();
  for (size_t i = 0; i < sched.size(); ++i) {
    const ScheduledSeq& e = sched[i];
    Active* a = by_seq_.at(e.seq);
    if (!a->admitted) {  // first scheduled: account the prefix-cache lookup
      a->admitted = true;
      a->cached_prompt = a->seq.n_cached;
      metrics_.prefix_cache_queried_tokens += uint64_t(a->seq.n_prompt);
      metrics_.prefix_cache_hit_tokens += uint64_t(a->cached_prompt);
    }
    for (size_t g = 0; g < group_blocks_.size(); ++g) group_blocks_[g] = e.seq->tables[g].blocks;
    const int32_t si = batch_.add_sequence(std::span<const int32_t>(e.seq->tokens.data() + e.start, size_t(e.n_new)),
                                           e.start, group_blocks_, e.sample && !a->embedding() && e.n_draft == 0,
                                           e.seq->state_slot);
    if (e.state_load >= 0) batch_.state_loads.push_back({e.state_load, e.seq->state_slot});
    if (e.state_save >= 0) batch_.state_saves.push_back({e.seq->state_slot, e.state_save});
    if (a->embedding()) {  // no sampling: its rows' hidden states are pooled after the pass
      embedding_rows_.push_back({a, batch_.seq_starts[size_t(si)], e.start, e.n_new, e.sample});
      continue;
    }
    if (e.sample) add_sample_rows(*a, e, i, si);
  }

  const auto t_forward = Clock::now();
  auto t_sample = t_forward;
  // The last step's wake-ups: after a GPU decode step's launch (one graph,
  // a few microseconds), so that the GPU does not wait on them; before a
  // step that carries prompt tokens, whose kernels are launched one by one
  // for longer than the wake-ups take (the GPU starts on the first), and
  // before a CPU step (its forward pass is the step itself).
  const bool wake_after_launch = runner_->forward_queues() && batch_.n_tokens() == batch_.n_seqs();
  try {
    if (!wake_after_launch) wake_listeners();
    runner_->forward(batch_, !embedding_rows_.empty());
    if (wake_after_launch) wake_listeners();
    token_masks();  // on the CPU while a GPU computes the logits
    t_sample = Clock::now();
    if (!rows_.empty()) runner_->sample(rows_, penalties_, results_);
    pool_embeddings();
  } catch (const std::exception& e) {
    log_error("forward pass failed: ", e.what());
    fail_step(sched, e.what());
    update_gauges();
    wake_listeners();
    return true;
  }
  const auto t_tokens = Clock::now();
  metrics_.steps++;
  take_tokens(sched);
  for (const EmbeddingRows& e : embedding_rows_)
    if (e.last) finish_embedding(*e.a);
  update_gauges();
  const auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  metrics_.observe_step_phase(EngineMetrics::kSchedule, seconds(t_start, t_forward));
  metrics_.observe_step_phase(EngineMetrics::kForward, seconds(t_forward, t_sample));
  metrics_.observe_step_phase(EngineMetrics::kSample, seconds(t_sample, t_tokens));
  const auto t_end = Clock::now();
  metrics_.observe_step_phase(EngineMetrics::kTokens, seconds(t_tokens, t_end));
  int64_t prompt_tokens = 0, decode_rows = 0;
  for (const ScheduledSeq& e : sched) {
    if (e.n_new > 1 && e.n_draft == 0) prompt_tokens += e.n_new;
    else ++decode_rows;
  }
  metrics_.observe_step_shape(prompt_tokens, decode_rows, seconds(t_start, t_end));
  return true;
}

void Engine::run_until_idle() {
  while (step() || scheduler_->has_work()) {
  }
}

bool Engine::process_token(Active& a, const SampleResult& r) {
  Sequence& s = a.seq;
  const int32_t tok = r.token;
  s.tokens.push_back(tok);
  auto [it, fresh] = a.penalties.try_emplace(tok, PenaltyToken{tok, 0, 1});
  it->second.output_count++;
  metrics_.generation_tokens++;
  const auto now = Clock::now();
  if (!a.got_first) {
    a.got_first = true;
    metrics_.ttft.observe(std::chrono::duration<double>(now - a.handle->created()).count());
  } else {
    metrics_.tpot.observe(std::chrono::duration<double>(now - a.last_token).count());
  }
  a.last_token = now;

  const int32_t n_gen = s.n_generated();
  // Stops count from the min_tokens-th token on (EOS could not be drawn
  // before it; a stop string may have started in earlier text).
  const bool past_min = n_gen >= a.req.min_tokens;
  const bool is_stop_token = std::find(a.req.stop_token_ids.begin(), a.req.stop_token_ids.end(), tok) !=
                             a.req.stop_token_ids.end();
  const bool eos = past_min && ((!a.req.ignore_eos && tokenizer_.is_eog(tok)) || is_stop_token);
  if (a.grammar && !eos) {  // the grammar follows the text (its mask allowed this token)
    if (size_t(tok) >= token_bytes_.size() || !a.gcursor.advance(a.grammar->automaton(), token_bytes_[size_t(tok)])) {
      finish(a, FinishReason::Error, str("token ", tok, " does not fit the request's grammar"));
      return false;
    }
  }

  StreamEvent ev;
  ev.tokens.push_back(tok);
  if (a.req.logprobs) ev.logprobs.push_back(TokenLogprob{tok, r.logprob, r.top});
  FinishReason reason = FinishReason::None;
  if (eos) {
    reason = FinishReason::Stop;
  } else {
    const std::string piece = a.detok.push(tok);
    a.thinking.push(piece);
    ev.text = a.stop.push(piece, past_min);
    if (a.stop.stopped()) reason = FinishReason::Stop;
    else if (n_gen >= a.req.max_tokens || s.n_tokens() >= config_.max_model_len) reason = FinishReason::Length;
  }
  if (reason == FinishReason::None) {
    emit(*a.handle, std::move(ev));
    return true;
  }
  if (!a.stop.stopped()) ev.text += a.stop.push(a.detok.flush(), past_min) + a.stop.flush();
  emit(*a.handle, std::move(ev));
  finish(a, reason);
  return false;
}

void Engine::finish(Active& a, FinishReason reason, const std::string& error) {
  a.seq.drop_drafts();  // a failed step's proposals were never output
  StreamEvent ev;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  ev.prompt_tokens = a.seq.n_prompt;
  ev.completion_tokens = a.seq.n_generated();
  ev.cached_prompt_tokens = a.cached_prompt;  // not n_cached: a recompute after preemption may hit generated tokens
  ev.reasoning_tokens = a.thinking.tokens();
  ev.embedding = std::move(a.result);
  if (a.stop.stopped()) ev.stop_string = a.stop.matched();
  if (a.seq.status != SeqStatus::Finished) scheduler_->finish(&a.seq);
  if (draft_model_) draft_model_->release(a.seq.id);
  metrics_.requests_finished++;
  if (reason == FinishReason::Cancelled) metrics_.requests_cancelled++;
  if (reason == FinishReason::Error) metrics_.requests_failed++;
  if (a.got_first) metrics_.e2e.observe(std::chrono::duration<double>(Clock::now() - a.handle->created()).count());
  {
    // Counted free before the handle says finished: a client that submits
    // again right after its request ended must find the slot free.
    std::lock_guard<std::mutex> lock(mu_);
    --outstanding_;
  }
  emit(*a.handle, std::move(ev));
  by_seq_.erase(&a.seq);
  active_.erase(a.seq.id);  // destroys a
}

void Engine::pool_embeddings() {
  const int32_t n_embd = model_.config().n_embd;
  for (const EmbeddingRows& e : embedding_rows_) {
    Active& a = *e.a;
    const Pooling p = a.req.pooling;
    // The rows this pooling reads: every row (mean), the first token's (cls)
    // or the last token's (last).
    int32_t first = e.first_row, n = e.n;
    if (p == Pooling::Cls) {
      if (e.start != 0) continue;
      n = 1;
    } else if (p == Pooling::Last) {
      if (!e.last) continue;
      first += e.n - 1;
      n = 1;
    }
    if (e.start == 0 || p != Pooling::Mean) {  // a fresh start (also a recompute after preemption)
      a.pooled.assign(size_t(n_embd), 0.0);
      a.pooled_rows = 0;
    }
    hidden_.resize(size_t(n) * size_t(n_embd));
    runner_->copy_hidden(first, n, hidden_.data());
    for (int32_t r = 0; r < n; ++r)
      for (int32_t j = 0; j < n_embd; ++j) a.pooled[size_t(j)] += double(hidden_[size_t(r) * size_t(n_embd) + size_t(j)]);
    a.pooled_rows += n;
  }
}

void Engine::finish_embedding(Active& a) {
  // The mean (or the one row), L2-normalised.
  a.result.resize(a.pooled.size());
  double norm = 0.0;
  for (double& v : a.pooled) {
    v /= std::max(a.pooled_rows, 1);
    norm += v * v;
  }
  norm = std::sqrt(norm);
  for (size_t j = 0; j < a.pooled.size(); ++j) a.result[j] = float(norm > 0.0 ? a.pooled[j] / norm : 0.0);
  finish(a, FinishReason::Stop);
}

void Engine::emit(RequestStream& stream, StreamEvent ev) {
  RequestStream::Listener l = stream.push_quiet(std::move(ev));
  if (l && (listeners_to_wake_.empty() || listeners_to_wake_.back() != l)) listeners_to_wake_.push_back(std::move(l));
}

void Engine::wake_listeners() {
  for (const RequestStream::Listener& l : listeners_to_wake_) (*l)();
  listeners_to_wake_.clear();
}

void Engine::fail_step(const std::vector<ScheduledSeq>& step, const std::string& error) {
  for (const ScheduledSeq& e : step) {
    auto it = by_seq_.find(e.seq);
    if (it != by_seq_.end()) finish(*it->second, FinishReason::Error, error);
  }
}

}  // namespace rf
