// /v1/embeddings: parsing, submitting, and the body.
#include "server/embeddings.h"

#include <cmath>
#include <cstring>

#include "core/json_text.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace rf::server {
namespace {

PromptInput token_input(const Json& ids, const std::string& param) {
  PromptInput p;
  p.is_tokens = true;
  for (const Json& t : ids) {
    if (!t.is_number_integer() && !t.is_number_unsigned())
      throw invalid_request("'" + param + "' must hold integer token ids", param);
    const int64_t id = t.is_number_unsigned() ? int64_t(std::min<uint64_t>(t.get<uint64_t>(), uint64_t(INT32_MAX) + 1))
                                              : t.get<int64_t>();
    if (id < 0 || id > INT32_MAX) throw invalid_request("'" + param + "' holds an invalid token id", param);
    p.tokens.push_back(int32_t(id));
  }
  if (p.tokens.empty()) throw invalid_request("'" + param + "' is an empty list of token ids", param);
  return p;
}

PromptInput text_input(const Json& s, const std::string& param) {
  if (s.get_ref<const std::string&>().empty()) throw invalid_request("'" + param + "' is an empty string", param);
  return PromptInput{false, s.get<std::string>(), {}};
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(const Json& body) {
  const FieldReader f(body);
  EmbeddingsRequest r;
  if (auto model = f.string("model")) r.model = *model;
  const Json* v = f.get("input");
  if (!v) throw invalid_request("'input' is required", "input");
  if (v->is_string()) {
    r.inputs.push_back(text_input(*v, "input"));
  } else if (v->is_array() && !v->empty()) {
    if (v->front().is_number()) {
      r.inputs.push_back(token_input(*v, "input"));
    } else {
      if (v->size() > kMaxEmbeddingInputs)
        throw invalid_request("'input' may hold at most " + std::to_string(kMaxEmbeddingInputs) + " inputs", "input");
      for (size_t i = 0; i < v->size(); ++i) {
        const Json& item = (*v)[i];
        const std::string param = "input[" + std::to_string(i) + "]";
        if (item.is_string() && v->front().is_string()) r.inputs.push_back(text_input(item, param));
        else if (item.is_array() && v->front().is_array()) r.inputs.push_back(token_input(item, param));
        else
          throw invalid_request("'input' must be a string, a list of strings, a list of token ids or a list of lists "
                                "of token ids, without mixing",
                                "input");
      }
    }
  } else {
    throw invalid_request("'input' must be a non-empty string or list", "input");
  }
  const std::string format = f.string("encoding_format").value_or("float");
  if (format != "float" && format != "base64")
    throw invalid_request("'encoding_format' must be 'float' or 'base64', not '" + format + "'", "encoding_format");
  r.base64 = format == "base64";
  r.dimensions = f.integer("dimensions", 1, INT32_MAX);
  if (const Json* user = f.get("user"); user && !user->is_string())
    throw invalid_request("'user' must be a string", "user");
  return r;
}

std::string base64_floats(const std::vector<float>& v) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + size_t(b)] = char((u >> (8 * b)) & 0xFF);  // little-endian
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = uint32_t(uint8_t(bytes[i])) << 16 | (i + 1 < bytes.size() ? uint32_t(uint8_t(bytes[i + 1])) << 8 : 0) |
                       (i + 2 < bytes.size() ? uint32_t(uint8_t(bytes[i + 2])) : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

Embeddings::Embeddings(ModelService& svc, const EmbeddingsRequest& req) : svc_(svc), req_(req) {
  const ServingLimits limits = svc.engine().limits();
  if (req.dimensions && *req.dimensions > limits.n_embd)
    throw invalid_request("'dimensions' is " + std::to_string(*req.dimensions) + "; this model's embeddings have " +
                              std::to_string(limits.n_embd),
                          "dimensions");
  std::vector<Request> requests;
  for (size_t i = 0; i < req.inputs.size(); ++i) {
    const PromptInput& in = req.inputs[i];
    const std::string param = req.inputs.size() > 1 ? "input[" + std::to_string(i) + "]" : "input";
    Request r;
    r.pooling = limits.pooling;
    if (in.is_tokens) {
      for (int32_t t : in.tokens)
        if (t >= limits.n_vocab)
          throw invalid_request("token id " + std::to_string(t) + " is out of range [0, " +
                                    std::to_string(limits.n_vocab) + ")", param);
      r.prompt = in.tokens;
    } else {
      try {
        r.prompt = svc.tokenizer().encode(in.text, /*add_special=*/true, /*parse_special=*/true);
      } catch (const Error& e) {
        throw invalid_request(e.what(), param);
      }
    }
    if (r.prompt.empty()) throw invalid_request("the input has no tokens", param);
    if (int64_t(r.prompt.size()) > limits.max_model_len)
      throw invalid_request("this model's maximum context length is " + std::to_string(limits.max_model_len) +
                                " tokens; the input has " + std::to_string(r.prompt.size()),
                            param, "context_length_exceeded");
    prompt_tokens_ += int64_t(r.prompt.size());
    requests.push_back(std::move(r));
  }
  for (Request& r : requests) {
    try {
      handles_.push_back(svc.engine().submit(std::move(r)));
    } catch (const EngineBusy& e) {
      cancel();
      throw service_unavailable(e.what(), svc.stopping() ? "shutting_down" : "queue_full");
    } catch (const Error& e) {
      cancel();
      throw invalid_request(e.what(), "input");
    }
  }
  vectors_.resize(handles_.size());
  done_.assign(handles_.size(), false);
  live_ = handles_.size();
}

Embeddings::~Embeddings() {
  for (auto& h : handles_) h->set_listener(nullptr);
  cancel();
}

void Embeddings::cancel() {
  for (auto& h : handles_)
    if (!h->finished()) h->cancel();
}

void Embeddings::set_listener(std::function<void()> fn) {
  for (auto& h : handles_) h->set_listener(fn);
}

void Embeddings::check_stopping() const {
  if (live_ > 0 && svc_.stopping())
    throw service_unavailable("the server stopped before the request finished", "shutting_down");
}

std::optional<std::string> Embeddings::pull_result() {
  for (size_t i = 0; i < handles_.size(); ++i)
    while (!done_[i]) {
      std::optional<StreamEvent> ev = handles_[i]->next(std::chrono::milliseconds(0));
      if (!ev) break;
      if (!ev->finished) continue;
      done_[i] = true;
      --live_;
      if (ev->finish_reason != FinishReason::Stop) {
        cancel();
        if (ev->finish_reason == FinishReason::Error) throw internal_error("embedding failed: " + ev->error);
        throw service_unavailable("the request was cancelled because the server is shutting down", "shutting_down");
      }
      vectors_[i] = std::move(ev->embedding);
    }
  if (live_ > 0) return std::nullopt;
  std::string out = "{\"object\":\"list\",\"data\":[";
  for (size_t i = 0; i < vectors_.size(); ++i) {
    std::vector<float>& v = vectors_[i];
    if (req_.dimensions && size_t(*req_.dimensions) < v.size()) {  // the first N, renormalised
      v.resize(size_t(*req_.dimensions));
      double norm = 0;
      for (float x : v) norm += double(x) * x;
      norm = std::sqrt(norm);
      if (norm > 0)
        for (float& x : v) x = float(x / norm);
    }
    if (i) out += ',';
    out += "{\"object\":\"embedding\",\"index\":" + std::to_string(i) + ",\"embedding\":";
    if (req_.base64) {
      append_json_string(out, base64_floats(v));
    } else {
      out += '[';
      for (size_t j = 0; j < v.size(); ++j) {
        if (j) out += ',';
        append_json_number(out, v[j]);
      }
      out += ']';
    }
    out += '}';
  }
  out += "],\"model\":";
  append_json_string(out, req_.model.empty() ? svc_.name() : req_.model);
  out += ",\"usage\":{\"prompt_tokens\":" + std::to_string(prompt_tokens_) +
         ",\"total_tokens\":" + std::to_string(prompt_tokens_) + "}}";
  return out;
}

}  // namespace rf::server
