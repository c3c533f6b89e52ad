// ApiRoutes: routing, authentication, readiness, the error responses, and
// GenerationResponse — a Generation driven as a DeferredResponse.
#include "server/api_routes.h"

#include "core/log.h"
#include "server/anthropic.h"
#include "server/api_error.h"
#include "server/embeddings.h"
#include "server/generation.h"
#include "server/protocol.h"
#include "server/response_format.h"
#include "server/responses.h"

namespace rf::server {
namespace {

HttpResponse json_response(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

enum class ErrorShape { OpenAI, Anthropic };

HttpResponse error_response(const ApiError& e, ErrorShape shape = ErrorShape::OpenAI) {
  HttpResponse r = json_response(e.status(), shape == ErrorShape::Anthropic ? anthropic_error_body(e) : error_body(e));
  if (e.status() == 503) r.headers.emplace_back("Retry-After", e.code() == "queue_full" ? "1" : "5");
  if (e.status() == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

// The error response for the exception being handled.
HttpResponse current_error_response(ErrorShape shape = ErrorShape::OpenAI) {
  try {
    throw;
  } catch (const ApiError& e) {
    return error_response(e, shape);
  } catch (const EngineBusy& e) {
    return error_response(service_unavailable(e.what(), "queue_full"), shape);
  } catch (const nlohmann::json::exception& e) {  // a JSON value of an unexpected shape: the client's
    return error_response(invalid_request(e.what()), shape);
  } catch (const std::bad_alloc&) {
    return error_response(internal_error("out of memory"), shape);
  } catch (const std::exception& e) {
    log_error("http: internal error: ", e.what());
    return error_response(internal_error(e.what()), shape);
  } catch (...) {
    log_error("http: internal error: unknown exception");
    return error_response(internal_error("unknown error"), shape);
  }
}

// Runs `f`, turning every exception into an error response of `shape`.
template <typename F>
HandlerResult guarded(F&& f, ErrorShape shape = ErrorShape::OpenAI) {
  try {
    return f();
  } catch (...) {
    return current_error_response(shape);
  }
}

std::string model_object(const ModelService& svc) {
  Json m = {{"id", svc.name()},
            {"object", "model"},
            {"created", svc.created()},
            {"owned_by", "rocmforge"},
            {"max_model_len", svc.max_model_len()}};
  return wire_json(m);
}

// %XX escapes in a path segment (a model id may hold '/' as %2F).
std::string percent_decode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += char(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

constexpr std::string_view kModelPrefix = "/v1/models/";
constexpr std::string_view kResponsePrefix = "/v1/responses/";

// Pending work (a Generation, embeddings) as a DeferredResponse: an SSE
// stream (the head at once, then events) or one JSON body when it is done.
// Holds its place in the in-flight count; destroyed before its end, it
// counts a client that left and the work's destructor cancels what still
// runs.
class GenerationResponse : public DeferredResponse {
 public:
  GenerationResponse(std::unique_ptr<PendingWork> gen, bool stream, std::shared_ptr<ApiRoutes::InFlight> in_flight,
                     HttpMetrics& metrics, ErrorShape shape = ErrorShape::OpenAI)
      : gen_(std::move(gen)), stream_(stream), shape_(shape), in_flight_(std::move(in_flight)), metrics_(metrics) {
    std::lock_guard<std::mutex> lock(in_flight_->mu);
    ++in_flight_->count;
  }
  ~GenerationResponse() override {
    if (!ended_) metrics_.count_disconnect();
    gen_.reset();
    {
      std::lock_guard<std::mutex> lock(in_flight_->mu);
      --in_flight_->count;
    }
    in_flight_->cv.notify_all();
  }

  void start(std::function<void()> wake) override { gen_->set_listener(std::move(wake)); }

  void pull(Pulled& out) override {
    if (ended_) return;
    if (!stream_) {
      finish_with([&] { return gen_->pull_result(); }, out);
      return;
    }
    if (!head_sent_) {
      head_sent_ = true;
      HttpResponse head;
      head.content_type = "text/event-stream";
      head.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
      head.streamed = true;
      out.start = std::move(head);
    }
    ended_ = out.end = gen_->pull_events(out.data);
  }

  void idle(Pulled& out) override {
    if (ended_) return;
    if (stream_) {
      ended_ = out.end = gen_->idle_events(out.data);
      return;
    }
    finish_with([&] {
      gen_->check_stopping();
      return std::optional<std::string>();
    }, out);
  }

 private:
  // Non-streamed: the response once `f` gives a body, or the error it throws.
  template <typename F>
  void finish_with(F&& f, Pulled& out) {
    try {
      std::optional<std::string> body = f();
      if (!body) return;
      out.start = json_response(200, std::move(*body));
    } catch (...) {
      out.start = current_error_response(shape_);
    }
    ended_ = out.end = true;
  }

  std::unique_ptr<PendingWork> gen_;
  bool stream_;
  ErrorShape shape_;
  std::shared_ptr<ApiRoutes::InFlight> in_flight_;
  HttpMetrics& metrics_;
  bool head_sent_ = false, ended_ = false;
};

}  // namespace

ApiRoutes::ApiRoutes(const std::string& api_key) : key_(api_key) {}

ApiRoutes::~ApiRoutes() = default;

void ApiRoutes::set_service(ModelService* svc) {
  service_ = svc;
  State expected = State::Loading;
  state_.compare_exchange_strong(expected, State::Ready);
}

bool ApiRoutes::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(in_flight_->mu);
  return in_flight_->cv.wait_for(lock, timeout, [&] { return in_flight_->count == 0; });
}

ApiRoutes::Route ApiRoutes::route_of(const HttpRequestHead& head) {
  const std::string_view path = head.path();
  if (head.method == "GET") {
    if (path == "/health") return Route::Health;
    if (path == "/metrics") return Route::Metrics;
    if (path == "/v1/models") return Route::Models;
    if (path.size() > kModelPrefix.size() && path.substr(0, kModelPrefix.size()) == kModelPrefix) return Route::Model;
    if (path.size() > kResponsePrefix.size() && path.substr(0, kResponsePrefix.size()) == kResponsePrefix)
      return Route::GetResponse;
  } else if (head.method == "POST") {
    if (path == "/v1/completions") return Route::Completions;
    if (path == "/v1/chat/completions") return Route::ChatCompletions;
    if (path == "/v1/messages") return Route::Messages;
    if (path == "/v1/messages/count_tokens") return Route::CountTokens;
    if (path == "/v1/responses") return Route::Responses;
    if (path == "/v1/embeddings") return Route::Embeddings;
    if (path == "/tokenize") return Route::Tokenize;
    if (path == "/detokenize") return Route::Detokenize;
  } else if (head.method == "DELETE") {
    if (path.size() > kResponsePrefix.size() && path.substr(0, kResponsePrefix.size()) == kResponsePrefix)
      return Route::DeleteResponse;
  }
  return Route::None;
}

ModelService& ApiRoutes::ready_service() const {
  if (state_.load() == State::Draining) throw service_unavailable("the server is shutting down", "shutting_down");
  ModelService* svc = service_.load();
  if (!svc) throw service_unavailable("the model is loading", "model_loading");
  return *svc;
}

HttpResponse ApiRoutes::refuse(int status, const std::string& message) {
  return json_response(status, error_body_for_status(status, message));
}

std::optional<HttpResponse> ApiRoutes::check_head(const HttpRequestHead& head) {
  const Route route = route_of(head);
  if (route == Route::None) return refuse(404, "no route for " + head.method + " " + std::string(head.path()));
  if (route == Route::Metrics) return std::nullopt;
  const ErrorShape shape = route == Route::Messages || route == Route::CountTokens ? ErrorShape::Anthropic
                                                                                  : ErrorShape::OpenAI;
  try {
    const std::string_view bearer = head.header("Authorization"), key = head.header("x-api-key");
    if (route != Route::Health && !(key_.accepts(bearer) || (!key.empty() && key_.accepts_key(key))))
      throw authentication_failed(bearer.empty() && key.empty()
                                      ? "missing API key: send the header 'Authorization: Bearer KEY' or 'x-api-key: KEY'"
                                      : "incorrect API key");
    ready_service();
  } catch (const ApiError& e) {
    return error_response(e, shape);
  }
  return std::nullopt;
}

HandlerResult ApiRoutes::handle(HttpRequest& request) {
  const Route route = route_of(request.head);
  if (route == Route::Metrics) {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_text();
    return r;
  }
  if (route == Route::Messages || route == Route::CountTokens)
    return guarded([&]() -> HandlerResult { return generation(request, route); }, ErrorShape::Anthropic);
  return guarded([&]() -> HandlerResult {
    ModelService& svc = ready_service();
    switch (route) {
      case Route::Health: return json_response(200, R"({"status":"ok"})");
      case Route::Models: return json_response(200, "{\"object\":\"list\",\"data\":[" + model_object(svc) + "]}");
      case Route::Model: {
        const std::string id = percent_decode(request.head.path().substr(kModelPrefix.size()));
        if (!svc.answers_to(id)) throw model_not_found(id);
        return json_response(200, model_object(svc));
      }
      case Route::Completions:
      case Route::ChatCompletions:
      case Route::Responses:
      case Route::Embeddings: return generation(request, route);
      case Route::GetResponse:
      case Route::DeleteResponse: return stored_response(request, route);
      case Route::Tokenize: {
        const TokenizeRequest r = parse_tokenize_request(parse_json_body(request.body));
        if (!r.model.empty() && !svc.answers_to(r.model)) throw model_not_found(r.model);
        return json_response(200, tokenize_body(tokenize_request(svc, r), svc.max_model_len(),
                                                r.return_token_strs ? &svc.tokenizer() : nullptr,
                                                r.with_pieces ? &svc.tokenizer() : nullptr));
      }
      case Route::Detokenize: {
        const DetokenizeRequest r = parse_detokenize_request(parse_json_body(request.body));
        if (!r.model.empty() && !svc.answers_to(r.model)) throw model_not_found(r.model);
        return json_response(200, detokenize_body(detokenize_request(svc, r)));
      }
      default: return refuse(404, "no route for " + request.head.method + " " + std::string(request.head.path()));
    }
  });
}

HandlerResult ApiRoutes::generation(const HttpRequest& request, Route route) {
  ModelService& svc = ready_service();
  const Json body = parse_json_body(request.body);
  auto check_model = [&](const std::string& model) {
    if (!model.empty() && !svc.answers_to(model)) throw model_not_found(model);
  };
  auto response_model = [&](const std::string& model) { return model.empty() ? svc.name() : model; };
  switch (route) {
    case Route::Messages: {
      const GenerationRequest gr = parse_anthropic_messages(body);
      check_model(gr.model);
      auto writer = std::make_unique<AnthropicWriter>(svc.next_id("msg", '_'), response_model(gr.model));
      auto gen = std::make_unique<Generation>(svc, gr, std::move(writer));
      return std::make_unique<GenerationResponse>(std::move(gen), gr.stream, in_flight_, metrics_, ErrorShape::Anthropic);
    }
    case Route::CountTokens: {
      const GenerationRequest gr = parse_anthropic_count_tokens(body);
      check_model(gr.model);
      const std::vector<int32_t> ids = prepare_requests(svc, gr).requests.front().prompt;
      return json_response(200, "{\"input_tokens\":" + std::to_string(ids.size()) + "}");
    }
    case Route::Responses: {
      const ResponsesRequest rr = parse_responses_request(body, svc.responses());
      check_model(rr.chat.model);
      auto writer = std::make_unique<ResponsesWriter>(svc.next_id("resp", '_'), response_model(rr.chat.model), rr, &svc.responses());
      auto gen = std::make_unique<Generation>(svc, rr.chat, std::move(writer));
      return std::make_unique<GenerationResponse>(std::move(gen), rr.chat.stream, in_flight_, metrics_);
    }
    case Route::Embeddings: {
      if (!svc.options().embeddings)
        throw ApiError(501, "this server does not serve embeddings: start it with --embeddings", "invalid_request_error",
                       "", "embeddings_disabled");
      const EmbeddingsRequest er = parse_embeddings_request(body);
      check_model(er.model);
      return std::make_unique<GenerationResponse>(std::make_unique<Embeddings>(svc, er), false, in_flight_, metrics_);
    }
    default: {
      const GenerationRequest gr =
          route == Route::Completions ? parse_completion_request(body) : parse_chat_request(body);
      check_model(gr.model);
      auto gen = std::make_unique<Generation>(svc, gr);
      return std::make_unique<GenerationResponse>(std::move(gen), gr.stream, in_flight_, metrics_);
    }
  }
}

HandlerResult ApiRoutes::stored_response(const HttpRequest& request, Route route) {
  ModelService& svc = ready_service();
  const std::string id = percent_decode(request.head.path().substr(kResponsePrefix.size()));
  auto not_found = [&] {
    return ApiError(404, "Response with id '" + id + "' not found", "invalid_request_error", "response_id",
                    "response_not_found");
  };
  if (route == Route::DeleteResponse) {
    if (!svc.responses().erase(id)) throw not_found();
    return json_response(200, Json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}}.dump());
  }
  const std::optional<ResponseStore::Entry> e = svc.responses().get(id);
  if (!e) throw not_found();
  return json_response(200, e->response);
}

std::string ApiRoutes::metrics_text() const {
  std::string text;
  ModelService* svc = service_.load();
  if (svc) text = svc->engine().metrics_text();
  size_t in_flight = 0;
  {
    std::lock_guard<std::mutex> lock(in_flight_->mu);
    in_flight = in_flight_->count;
  }
  text += metrics_.prometheus_text(in_flight, connections_ ? connections_() : 0, svc && state_.load() == State::Ready);
  return text;
}

}  // namespace rf::server
