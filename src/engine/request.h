// A generation request and its handle: the thread-safe stream of events a
// client reads (text deltas, token ids, logprobs, the finish) and cancel().
// A consumer either blocks in next(timeout) or, from an event loop, sets a
// listener that tells it when next(0) has something to give.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/pooling.h"
#include "core/sampling.h"
#include "grammar/grammar.h"

namespace rf {

enum class FinishReason { None, Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", ...

// A reply that thinks before it answers: its thinking section, delimited in
// the generated text by `open` and `close`, is tracked to count its tokens
// (StreamEvent::reasoning_tokens) and, with a budget, ended by force once it
// has run that many tokens (llama.cpp's reasoning budget): the next tokens
// are then `forced_close`, one a step, whatever the model would draw.
struct ThinkingControl {
  bool enabled = false;
  bool starts_inside = false;         // the prompt opened the section (the template wrote `open`)
  std::string open, close;            // e.g. "<think>", "</think>"
  int32_t budget = -1;                // thinking tokens before the close is forced; -1: no limit
  std::vector<int32_t> forced_close;  // the tokens that end the section
};

struct Request {
  std::vector<int32_t> prompt;        // token ids (BOS included if wanted)
  SamplingParams sampling;
  int32_t max_tokens = 16;            // new tokens at most
  int32_t min_tokens = 0;             // EOS and stop strings ignored before this many
  bool ignore_eos = false;
  std::vector<std::string> stop;      // stop strings (not included in the output)
  std::vector<int32_t> stop_token_ids;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to its logit), one entry per token
  bool logprobs = false;              // report the chosen token's logprob (and top_logprobs alternatives)
  // Structured output: every drawn token keeps the text a prefix of a
  // sentence of this grammar, and end of generation comes only where the
  // grammar accepts (null: free text).
  std::shared_ptr<const grammar::Grammar> grammar;
  bool render_special = false;        // control tokens' text appears in `text` (formats that need their markers)
  ThinkingControl thinking;
  // Speculative decoding may verify proposals for this request when the
  // engine runs it (engine/speculative.h); false: one token a step. The
  // output is the same either way.
  bool speculative = true;
  // An embedding request (not None): the prompt is computed without a
  // sampling step, its final hidden states pooled this way and L2-normalised
  // into the final event's `embedding`; max_tokens and sampling are unused.
  Pooling pooling = Pooling::None;
};

struct TokenLogprob {
  int32_t token;
  float logprob;
  std::vector<std::pair<int32_t, float>> top;
};

// One chunk of output. Text that might be the start of a stop string is held
// back until it cannot be, so `text` never contains any part of a stop string.
struct StreamEvent {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;  // parallel to tokens when requested
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  std::string error;                   // when finish_reason == Error
  int32_t prompt_tokens = 0;           // set on the final event
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0;
  int32_t reasoning_tokens = 0;        // of completion_tokens, those of the thinking section
  std::string stop_string;             // the stop string that ended the output, if one did
  std::vector<float> embedding;        // embedding requests: the pooled, normalised vector
};

class RequestStream {
 public:
  explicit RequestStream(uint64_t id) : id_(id), created_(std::chrono::steady_clock::now()) {}
  uint64_t id() const { return id_; }

  // Consumer side: waits for the next event (or the timeout); nullopt on timeout.
  std::optional<StreamEvent> next(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());
  // Consumer side, for event loops: `fn` is called after every push (on the
  // engine thread, outside the stream's lock), and at once when events are
  // already waiting. It must return quickly and may run once more after it
  // was replaced. nullptr removes it.
  void set_listener(std::function<void()> fn);
  // Asks the engine to stop this request; its blocks are freed within a step.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Producer side (engine thread).
  void push(StreamEvent ev);
  // The same without calling the listener: the event is queued (and
  // blocking consumers woken); the listener to call is returned (nullptr if
  // none), for the engine to call once its next step is on the GPU.
  using Listener = std::shared_ptr<const std::function<void()>>;
  Listener push_quiet(StreamEvent ev);
  bool finished() const;
  std::chrono::steady_clock::time_point created() const { return created_; }

 private:
  uint64_t id_;
  std::chrono::steady_clock::time_point created_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  bool done_ = false;
  Listener listener_;  // copied under mu_, called outside it
};

using RequestHandle = std::shared_ptr<RequestStream>;

}  // namespace rf
