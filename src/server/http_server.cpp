// HttpServer: the listener, the I/O threads, the set of open connections
// (for the connection limit, draining and stop) and the lifecycle.
#include "server/http_server.h"

#include <sys/resource.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "server/api_routes.h"
#include "server/http_connection.h"
#include "server/http_wire.h"

namespace rf::server {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr int kListenBacklog = 1024;
constexpr auto kAcceptRetry = std::chrono::milliseconds(50);  // out of descriptors: try again soon
constexpr auto kStopGrace = std::chrono::milliseconds(500);   // for closing connections to finish

// Raises the soft limit on open files to the hard one: every connection is one.
size_t raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit want = rl;
    want.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  return rl.rlim_cur == RLIM_INFINITY ? SIZE_MAX : size_t(rl.rlim_cur);
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(HttpOptions o) : opts(std::move(o)), routes(opts.api_key) {
    conn_opts.limits = opts.limits;
    conn_opts.header_timeout = opts.header_timeout;
    conn_opts.body_timeout = opts.body_timeout;
    conn_opts.keep_alive_timeout = opts.keep_alive_timeout;
    conn_opts.write_timeout = opts.write_timeout;
    routes.set_connection_count([this] { return open_connections(); });
  }

  // Declared before the io_context: connections, destroyed with its
  // handlers, still unregister from here.
  HttpOptions opts;
  ConnectionOptions conn_opts;
  ApiRoutes routes;
  std::mutex conns_mu;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> conns;
  size_t max_connections = 0;

  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor{asio::make_strand(ioc)};
  asio::steady_timer accept_retry{acceptor.get_executor()};
  std::vector<std::thread> threads;
  std::atomic<bool> listening{false};
  bool stopped = false;
  int bound_port = -1;

  size_t open_connections() {
    std::lock_guard<std::mutex> lock(conns_mu);
    return conns.size();
  }
  std::vector<std::shared_ptr<Connection>> connections() {
    std::vector<std::shared_ptr<Connection>> out;
    std::lock_guard<std::mutex> lock(conns_mu);
    for (auto& [p, w] : conns)
      if (auto c = w.lock()) out.push_back(std::move(c));
    return out;
  }

  void accept();
  void on_accept(const boost::system::error_code& ec, tcp::socket socket);
  void refuse_connection(tcp::socket& socket);
  void run_io();
};

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](const boost::system::error_code& ec, tcp::socket socket) {
    on_accept(ec, std::move(socket));
  });
}

void HttpServer::Impl::on_accept(const boost::system::error_code& ec, tcp::socket socket) {
  if (!acceptor.is_open() || ec == asio::error::operation_aborted) {
    listening = false;
    return;
  }
  if (ec) {  // out of descriptors or memory, or a connection reset before it was taken: go on
    log_warn("http: accept failed: ", ec.message());
    accept_retry.expires_after(kAcceptRetry);
    accept_retry.async_wait([this](const boost::system::error_code& e) {
      if (!e) accept();
    });
    return;
  }
  boost::system::error_code opt_ec;
  socket.set_option(tcp::no_delay(true), opt_ec);  // SSE events leave at once
  if (open_connections() >= max_connections) {
    refuse_connection(socket);
  } else {
    // Unregistering is the connection's last act; it runs on its strand.
    auto conn = std::make_shared<Connection>(std::move(socket), routes, conn_opts, [this](Connection* c) {
      std::lock_guard<std::mutex> lock(conns_mu);
      conns.erase(c);
    });
    {
      std::lock_guard<std::mutex> lock(conns_mu);
      conns.emplace(conn.get(), conn);
    }
    conn->start();
  }
  accept();
}

// Over the connection limit: a best-effort 503, then close.
void HttpServer::Impl::refuse_connection(tcp::socket& socket) {
  HttpResponse r = routes.refuse(503, "too many connections: try again later");
  r.headers.emplace_back("Retry-After", "1");
  r.close = true;
  routes.responded(503);
  const std::string bytes = serialize_response(r, Framing{11, false});
  boost::system::error_code ec;
  socket.non_blocking(true, ec);
  socket.write_some(asio::buffer(bytes), ec);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

void HttpServer::Impl::run_io() {
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {  // a handler's bug must not take the thread (or the process) down
      log_error("http: I/O thread: ", e.what());
    }
  }
}

HttpServer::HttpServer(HttpOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  Impl& m = *impl_;
  boost::system::error_code ec;
  tcp::endpoint endpoint;
  const auto address = asio::ip::make_address(m.opts.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, uint16_t(m.opts.port));
  } else {
    tcp::resolver resolver(m.ioc);
    auto results = resolver.resolve(m.opts.host, std::to_string(m.opts.port), tcp::resolver::passive, ec);
    if (ec || results.empty()) fail("cannot listen on ", m.opts.host, ":", m.opts.port, " (", ec.message(), ")");
    endpoint = results.begin()->endpoint();
  }
  m.acceptor.open(endpoint.protocol(), ec);
  if (!ec) m.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(endpoint, ec);
  if (!ec) m.acceptor.listen(kListenBacklog, ec);
  if (ec) fail("cannot listen on ", m.opts.host, ":", m.opts.port, " (", ec.message(), ")");
  m.bound_port = m.acceptor.local_endpoint().port();

  const size_t fds = raise_fd_limit();
  m.max_connections = std::min(m.opts.max_connections, fds > 128 ? fds - 64 : fds);
  if (m.max_connections < m.opts.max_connections)
    log_warn("http: at most ", m.max_connections, " connections (the open-file limit is ", fds, ")");

  m.work.emplace(m.ioc.get_executor());
  m.listening = true;
  asio::post(m.acceptor.get_executor(), [&m] { m.accept(); });
  const int n = std::max(1, m.opts.io_threads);
  for (int i = 0; i < n; ++i) m.threads.emplace_back([&m] { m.run_io(); });
  log_info("http: listening on ", m.opts.host, ":", m.bound_port, " with ", n, " I/O threads");
}

int HttpServer::port() const { return impl_->bound_port; }

bool HttpServer::listening() const { return impl_->listening.load(); }

void HttpServer::set_service(ModelService* svc) { impl_->routes.set_service(svc); }

void HttpServer::begin_shutdown() { impl_->routes.begin_shutdown(); }

bool HttpServer::wait_idle(std::chrono::milliseconds timeout) { return impl_->routes.wait_idle(timeout); }

void HttpServer::stop() {
  Impl& m = *impl_;
  if (m.stopped) return;
  m.stopped = true;
  m.routes.begin_shutdown();
  if (!m.threads.empty()) {
    auto closed = std::make_shared<std::promise<void>>();
    asio::post(m.acceptor.get_executor(), [&m, closed] {
      boost::system::error_code ec;
      m.acceptor.close(ec);
      m.accept_retry.cancel();
      closed->set_value();
    });
    closed->get_future().wait_for(std::chrono::seconds(1));
    for (auto& c : m.connections()) c->close();
    const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
    while (m.open_connections() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  m.listening = false;
  m.work.reset();
  m.ioc.stop();
  for (auto& t : m.threads) t.join();
  m.threads.clear();
}

}  // namespace rf::server
