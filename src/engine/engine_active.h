// Engine::Active: the engine thread's state of one request beside its
// Sequence — the request, its stream, detokenizer, stop strings, penalties,
// grammar cursor, thinking tracker and embedding accumulation. Private to
// the engine's translation units (engine.cpp, engine_sampling.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"

namespace rf {

struct Engine::Active {
  Active(const Tokenizer& tok, Request r, uint64_t id)
      : req(std::move(r)), handle(std::make_shared<RequestStream>(id)), detok(tok, req.render_special, true),
        stop(req.stop), thinking(req.thinking) {
    seq.id = id;
  }
  bool embedding() const { return req.pooling != Pooling::None; }
  Sequence seq;
  Request req;
  RequestHandle handle;
  IncrementalDetokenizer detok;
  StopMatcher stop;
  std::unordered_map<int32_t, PenaltyToken> penalties;  // tokens seen, for penalties
  std::chrono::steady_clock::time_point last_token;
  bool got_first = false;
  bool admitted = false;
  int32_t cached_prompt = 0;  // prompt tokens found in the prefix cache at first admission
  // Structured output: the request's grammar (shared with requests using the
  // same one) and where the text is in it.
  std::shared_ptr<grammar::CompiledGrammar> grammar;
  grammar::GrammarCursor gcursor;
  ThinkingTracker thinking;
  // Speculative decoding may propose tokens for it (engine/speculative.h).
  bool speculates = false;
  // Embedding requests: the pooled hidden states so far (mean: their sum).
  std::vector<double> pooled;
  int32_t pooled_rows = 0;
  std::vector<float> result;  // embedding requests: the vector, for the final event
};

}  // namespace rf
