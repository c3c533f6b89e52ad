// /v1/embeddings (served with --embeddings): `input` as a string, a list of
// strings, a list of token ids or a list of lists of them (at most
// kMaxEmbeddingInputs); `encoding_format` float (default) or base64 (the
// float32 values' little-endian bytes); `dimensions` keeps the first N
// values (a Matryoshka truncation), renormalised. Each input is one engine
// request (Request::pooling: the server's pooling) scheduled with the rest,
// so a batch is computed together; the body is OpenAI's list of
// embeddings with usage.prompt_tokens. Texts are tokenized as completion
// prompts are (BOS and EOS as the vocabulary wants them).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/model_service.h"
#include "server/pending_work.h"
#include "server/protocol.h"

namespace rf::server {

constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingsRequest {
  std::string model;
  std::vector<PromptInput> inputs;
  bool base64 = false;
  std::optional<int64_t> dimensions;
};

// Throws ApiError 400 naming the field.
EmbeddingsRequest parse_embeddings_request(const Json& body);

// The float32 values' little-endian bytes in base64 (OpenAI's encoding).
std::string base64_floats(const std::vector<float>& v);

class Embeddings : public PendingWork {
 public:
  // Tokenizes and submits every input; throws ApiError (400, 503).
  Embeddings(ModelService& svc, const EmbeddingsRequest& req);
  ~Embeddings() override;
  void set_listener(std::function<void()> fn) override;
  std::optional<std::string> pull_result() override;
  void check_stopping() const override;
  bool pull_events(std::string&) override { return true; }  // (never streamed)
  bool idle_events(std::string&) override { return true; }

 private:
  void cancel();
  ModelService& svc_;
  EmbeddingsRequest req_;
  std::vector<RequestHandle> handles_;
  std::vector<std::vector<float>> vectors_;
  std::vector<bool> done_;
  size_t live_ = 0;
  int64_t prompt_tokens_ = 0;
};

}  // namespace rf::server
