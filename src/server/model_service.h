// ModelService: what the HTTP layer needs of a loaded model — the engine's
// serving interface (engine/serving.h: submit, tokenizer, limits, metrics),
// the chat prompt builder, the names the model answers to — plus
// per-request ids and seeds. The model and backend stay behind the engine. Created by `rocmforge
// serve` once the model is loaded; the HTTP server serves 503 until then.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/serving.h"
#include "server/chat_prompt.h"
#include "server/reasoning.h"
#include "server/response_store.h"

namespace rf::server {

// What `rocmforge serve` switches on beyond the model.
struct ServiceOptions {
  ReasoningMode reasoning_mode = ReasoningMode::Auto;  // --reasoning-format
  int32_t reasoning_budget = -1;      // --reasoning-budget: thinking tokens a reply may take (-1: no limit)
  bool embeddings = false;            // --embeddings: /v1/embeddings is served
  size_t responses_store_bytes = 0;   // --responses-store-mb: responses kept for previous_response_id (0: none)
};

class ModelService {
 public:
  // `names`: the served name first, then aliases (the model path, its file name).
  ModelService(ServingEngine& engine, const ChatPrompt& chat, std::vector<std::string> names,
               ServiceOptions options = {});

  ServingEngine& engine() const { return engine_; }
  const Tokenizer& tokenizer() const { return engine_.tokenizer(); }
  const ChatPrompt& chat() const { return chat_; }
  const std::string& name() const { return names_.front(); }
  bool answers_to(const std::string& model) const;
  int64_t created() const { return created_; }
  int32_t max_model_len() const { return engine_.limits().max_model_len; }
  int32_t n_vocab() const { return engine_.limits().n_vocab; }
  const ServiceOptions& options() const { return options_; }
  // The reasoning format chat replies are parsed with.
  ReasoningFormat reasoning_format() const {
    return effective_reasoning_format(options_.reasoning_mode, chat_.reasoning_format());
  }
  // Stored responses (/v1/responses, previous_response_id); thread-safe.
  ResponseStore& responses() { return responses_; }

  // "cmpl-..." / "chatcmpl-..." ids (`sep` after the prefix: Anthropic's
  // and the Responses API's ids use '_'), unique within and across runs.
  std::string next_id(const char* prefix, char sep = '-');
  // A fresh seed for a request that gave none.
  uint64_t next_seed();

  // Set when the engine is about to stop: waiting requests give up (503).
  void mark_stopping() { stopping_.store(true); }
  bool stopping() const { return stopping_.load(); }

 private:
  ServingEngine& engine_;
  const ChatPrompt& chat_;
  std::vector<std::string> names_;
  ServiceOptions options_;
  ResponseStore responses_;
  int64_t created_;
  uint64_t id_base_;
  std::atomic<uint64_t> counter_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace rf::server
