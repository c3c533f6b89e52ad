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

namespace rf::server {

class ModelService {
 public:
  // `names`: the served name first, then aliases (the model path, its file name).
  ModelService(ServingEngine& engine, const ChatPrompt& chat, std::vector<std::string> names);

  ServingEngine& engine() const { return engine_; }
  const Tokenizer& tokenizer() const { return engine_.tokenizer(); }
  const ChatPrompt& chat() const { return chat_; }
  const std::string& name() const { return names_.front(); }
  bool answers_to(const std::string& model) const;
  int64_t created() const { return created_; }
  int32_t max_model_len() const { return engine_.limits().max_model_len; }
  int32_t n_vocab() const { return engine_.limits().n_vocab; }

  // "cmpl-..." / "chatcmpl-..." ids, unique within and across runs.
  std::string next_id(const char* prefix);
  // A fresh seed for a request that gave none.
  uint64_t next_seed();

  // Set when the engine is about to stop: waiting requests give up (503).
  void mark_stopping() { stopping_.store(true); }
  bool stopping() const { return stopping_.load(); }

 private:
  ServingEngine& engine_;
  const ChatPrompt& chat_;
  std::vector<std::string> names_;
  int64_t created_;
  uint64_t id_base_;
  std::atomic<uint64_t> counter_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace rf::server
