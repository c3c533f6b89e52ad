// HttpServer implementation: httplib setup (sockets, limits, the growing
// connection pool, error bodies), the routes, authentication, readiness and
// draining. See http_server.h.
#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"
#include "server/connection_pool.h"
#include "server/generation.h"
#include "server/http_metrics.h"
#include "server/protocol.h"

namespace rf::server {
namespace {

enum class State { Loading, Ready, Draining };

constexpr int kListenBacklog = 1024;  // httplib listens with a backlog of 5: bursts of connects would wait
constexpr size_t kMinConnectionThreads = 8;
constexpr std::chrono::seconds kThreadIdleTimeout{30};

// httplib's task queue, served by a ConnectionPool (one thread per open connection).
class PoolTaskQueue : public httplib::TaskQueue {
 public:
  explicit PoolTaskQueue(std::shared_ptr<ConnectionPool> pool) : pool_(std::move(pool)) {}
  void enqueue(std::function<void()> fn) override { pool_->enqueue(std::move(fn)); }
  void shutdown() override { pool_->shutdown(); }

 private:
  std::shared_ptr<ConnectionPool> pool_;
};

// Compares API keys without an early exit (the length may leak; the bytes do not).
bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

void reply_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void reply_error(httplib::Response& res, const ApiError& e) {
  reply_json(res, e.status(), error_body(e));
  if (e.status() == 503) res.set_header("Retry-After", e.code() == "queue_full" ? "1" : "5");
  if (e.status() == 401) res.set_header("WWW-Authenticate", "Bearer");
}

std::string model_object(const ModelService& svc) {
  Json m = {{"id", svc.name()},
            {"object", "model"},
            {"created", svc.created()},
            {"owned_by", "rocmforge"},
            {"max_model_len", svc.max_model_len()}};
  return m.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(HttpOptions o) : opts(std::move(o)) {}

  HttpOptions opts;
  httplib::Server svr;
  std::atomic<ModelService*> service{nullptr};
  std::atomic<State> state{State::Loading};
  HttpMetrics metrics;
  std::thread listener;
  std::atomic<bool> listening{false};
  int bound_port = -1;
  int listen_fd = -1;

  std::mutex pool_mu;
  std::shared_ptr<ConnectionPool> pool;

  std::mutex idle_mu;
  std::condition_variable idle_cv;
  size_t in_flight = 0;

  // Held by every API request until its response (or stream) ends.
  struct InFlight {
    explicit InFlight(Impl& i) : impl(i) {
      std::lock_guard<std::mutex> lock(impl.idle_mu);
      ++impl.in_flight;
    }
    ~InFlight() {
      {
        std::lock_guard<std::mutex> lock(impl.idle_mu);
        --impl.in_flight;
      }
      impl.idle_cv.notify_all();
    }
    Impl& impl;
  };

  size_t in_flight_now() {
    std::lock_guard<std::mutex> lock(idle_mu);
    return in_flight;
  }
  size_t connection_threads() {
    std::lock_guard<std::mutex> lock(pool_mu);
    return pool ? pool->threads() : 0;
  }

  void configure();
  void add_routes();
  void check_api_key(const httplib::Request& req) const;
  ModelService& ready_service() const;
  void handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);

  // Runs `f`, turning every exception into an OpenAI error response.
  template <typename F>
  void guarded(httplib::Response& res, F&& f) {
    try {
      f();
    } catch (const ApiError& e) {
      reply_error(res, e);
    } catch (const EngineBusy& e) {
      reply_error(res, service_unavailable(e.what(), "queue_full"));
    } catch (const nlohmann::json::exception& e) {  // a JSON value of an unexpected shape: the client's
      reply_error(res, invalid_request(e.what()));
    } catch (const std::bad_alloc&) {
      reply_error(res, internal_error("out of memory"));
    } catch (const std::exception& e) {
      log_error("http: internal error: ", e.what());
      reply_error(res, internal_error(e.what()));
    }
  }
};

void HttpServer::Impl::configure() {
  svr.set_socket_options([this](socket_t sock) {
    int yes = 1;  // SO_REUSEADDR only: httplib's default SO_REUSEPORT would let two servers share a port
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = sock;
  });
  svr.set_tcp_nodelay(true);  // accepted sockets inherit it: SSE events leave at once
  svr.set_payload_max_length(opts.max_body_bytes);
  svr.set_keep_alive_max_count(1000);
  svr.new_task_queue = [this] {
    auto p = std::make_shared<ConnectionPool>(kMinConnectionThreads, opts.max_connection_threads,
                                              std::chrono::milliseconds(kThreadIdleTimeout));
    {
      std::lock_guard<std::mutex> lock(pool_mu);
      pool = p;
    }
    return new PoolTaskQueue(std::move(p));
  };
  const httplib::Server::HandlerWithResponse fill_error_body = [this](const httplib::Request& req,
                                                                       httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    switch (res.status) {
      case 404: message = "no route for " + req.method + " " + req.path; break;
      case 413: message = "the request body is larger than the limit of " + std::to_string(opts.max_body_bytes) + " bytes"; break;
      case 414: message = "the request URI is too long"; break;
      case 400: message = "malformed HTTP request"; break;
      default: message = "HTTP error " + std::to_string(res.status); break;
    }
    res.set_content(error_body_for_status(res.status, message), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  };
  svr.set_error_handler(fill_error_body);
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log_error("http: unhandled exception: ", what);
    reply_error(res, internal_error(what));
  });
  svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics.count_response(res.status);
    log_debug("http: ", req.method, " ", req.path, " -> ", res.status);
  });
}

void HttpServer::Impl::check_api_key(const httplib::Request& req) const {
  if (opts.api_key.empty()) return;
  const std::string auth = req.get_header_value("Authorization");
  if (auth.empty()) throw authentication_failed("missing API key: send the header 'Authorization: Bearer KEY'");
  const bool bearer = auth.size() > 7 && (auth.compare(0, 7, "Bearer ") == 0 || auth.compare(0, 7, "bearer ") == 0);
  if (!bearer || !constant_time_equal(auth.substr(7), opts.api_key))
    throw authentication_failed("incorrect API key");
}

ModelService& HttpServer::Impl::ready_service() const {
  if (state.load() == State::Draining) throw service_unavailable("the server is shutting down", "shutting_down");
  ModelService* svc = service.load();
  if (!svc) throw service_unavailable("the model is loading", "model_loading");
  return *svc;
}

void HttpServer::Impl::handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  auto token = std::make_shared<InFlight>(*this);
  guarded(res, [&] {
    check_api_key(req);
    ModelService& svc = ready_service();
    const Json body = parse_json_body(req.body);
    GenerationRequest gr =
        endpoint == Endpoint::Completions ? parse_completion_request(body) : parse_chat_request(body);
    if (!gr.model.empty() && !svc.answers_to(gr.model)) throw model_not_found(gr.model);
    if (!gr.stream) {
      Generation gen(svc, gr);
      reply_json(res, 200, gen.run_to_completion());
      return;
    }
    auto gen = std::make_shared<Generation>(svc, gr);
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    // Runs after the headers are sent; owns the request until the stream ends.
    // Runs outside httplib's exception handling: nothing may escape it.
    res.set_chunked_content_provider("text/event-stream", [this, gen, token](size_t, httplib::DataSink& sink) {
      try {
        if (!gen->stream([&sink](std::string_view s) { return sink.write(s.data(), s.size()); })) {
          metrics.count_disconnect();
          return false;
        }
        sink.done();
        return true;
      } catch (const std::exception& e) {
        log_error("http: stream failed: ", e.what());
        gen->cancel();
        return false;
      }
    });
  });
}

void HttpServer::Impl::add_routes() {
  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] {
      ready_service();
      reply_json(res, 200, R"({"status":"ok"})");
    });
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::string text;
    ModelService* svc = service.load();
    if (svc) text = svc->engine().metrics_text();
    text += metrics.prometheus_text(in_flight_now(), connection_threads(), svc && state.load() == State::Ready);
    res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      check_api_key(req);
      const ModelService& svc = ready_service();
      reply_json(res, 200, "{\"object\":\"list\",\"data\":[" + model_object(svc) + "]}");
    });
  });
  svr.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      check_api_key(req);
      const ModelService& svc = ready_service();
      const std::string id = req.matches[1];
      if (!svc.answers_to(id)) throw model_not_found(id);
      reply_json(res, 200, model_object(svc));
    });
  });
  svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Endpoint::Completions);
  });
  svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Endpoint::ChatCompletions);
  });
}

HttpServer::HttpServer(HttpOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->configure();
  impl_->add_routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  Impl& m = *impl_;
  if (m.opts.port == 0) {
    m.bound_port = m.svr.bind_to_any_port(m.opts.host);
  } else {
    m.bound_port = m.svr.bind_to_port(m.opts.host, m.opts.port) ? m.opts.port : -1;
  }
  if (m.bound_port <= 0)
    fail("cannot listen on ", m.opts.host, ":", m.opts.port, " (the address is in use or invalid)");
  if (m.listen_fd >= 0) ::listen(m.listen_fd, kListenBacklog);
  m.listening = true;
  m.listener = std::thread([&m] {
    const bool ok = m.svr.listen_after_bind();
    m.listening = false;
    if (!ok) log_error("http: the listener stopped with an error");
  });
  // stop() only works once httplib runs its accept loop.
  for (int i = 0; i < 500 && !m.svr.is_running() && m.listening; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  log_info("http: listening on ", m.opts.host, ":", m.bound_port);
}

int HttpServer::port() const { return impl_->bound_port; }

bool HttpServer::listening() const { return impl_->listening.load(); }

void HttpServer::set_service(ModelService* svc) {
  impl_->service = svc;
  State expected = State::Loading;
  impl_->state.compare_exchange_strong(expected, State::Ready);
}

void HttpServer::begin_shutdown() { impl_->state = State::Draining; }

bool HttpServer::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->idle_mu);
  return impl_->idle_cv.wait_for(lock, timeout, [&] { return impl_->in_flight == 0; });
}

void HttpServer::stop() {
  Impl& m = *impl_;
  if (!m.listener.joinable()) return;
  m.state = State::Draining;
  while (m.listening && !m.svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  m.svr.stop();  // closes the listener; listen_after_bind() returns once every connection thread is joined
  m.listener.join();
}

}  // namespace rf::server
