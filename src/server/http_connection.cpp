// Connection: the per-connection state machine (see http_connection.h).
//   Idle -> Head -> Body -> Respond -> Idle (keep-alive) ... or -> Linger -> Closed
#include "server/http_connection.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <mutex>

#include "core/log.h"
#include "server/http_wire.h"

namespace rf::server {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kReadChunk = 16 * 1024;
// Bytes read past the request being answered: pipelined requests, and the
// watch for a client that leaves. Beyond it reading pauses until the answer is out.
constexpr size_t kReadAhead = 64 * 1024;
constexpr auto kHeartbeat = 1000ms;     // quiet this long: the deferred response's idle()
constexpr auto kFirstReprobe = 100ms;   // after EOF: the second probe shows a full close
constexpr auto kLingerTime = 2000ms;    // reading what a refused client still sends

}  // namespace

// Posts a wake-up to the connection's strand from any thread, at most one
// pending at a time; inert once disarmed (the connection closed).
class Connection::Waker {
 public:
  Waker(asio::any_io_executor ex, std::weak_ptr<Connection> conn) : ex_(std::move(ex)), conn_(std::move(conn)) {}
  void wake() {
    if (pending_.exchange(true)) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (!armed_) return;
    asio::post(ex_, [conn = conn_] {
      if (auto c = conn.lock()) c->on_wake();
    });
  }
  void rearm() { pending_ = false; }  // on the strand, before pulling
  void disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
  }

 private:
  asio::any_io_executor ex_;
  std::weak_ptr<Connection> conn_;
  std::atomic<bool> pending_{false};
  std::mutex mu_;
  bool armed_ = true;
};

Connection::Connection(Socket socket, HttpHandler& handler, const ConnectionOptions& options,
                       std::function<void(Connection*)> on_closed)
    : socket_(std::move(socket)),
      handler_(handler),
      opts_(options),
      on_closed_(std::move(on_closed)),
      read_timer_(socket_.get_executor()),
      write_timer_(socket_.get_executor()),
      tick_timer_(socket_.get_executor()) {}

Connection::~Connection() {
  if (waker_) waker_->disarm();
}

void Connection::start() {
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    self->arm_read_deadline(self->opts_.header_timeout);  // a new connection must send its head in time
    self->process();
  });
}

void Connection::close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->abort(); });
}

// ---- deadlines ----

void Connection::arm_read_deadline(std::chrono::milliseconds d) {
  const uint64_t gen = ++read_gen_;
  read_timer_.expires_after(d);
  read_timer_.async_wait([self = shared_from_this(), gen](const boost::system::error_code& ec) {
    if (ec || gen != self->read_gen_ || self->phase_ == Phase::Closed) return;
    switch (self->phase_) {
      case Phase::Head:
      case Phase::Body:
        self->refuse(408, self->phase_ == Phase::Head ? "the request head did not arrive in time"
                                                      : "the request body did not arrive in time");
        break;
      default: self->close_now(); break;  // idle too long, or done lingering
    }
  });
}

void Connection::cancel_read_deadline() {
  ++read_gen_;
  read_timer_.cancel();
}

void Connection::arm_tick(std::chrono::milliseconds d) {
  const uint64_t gen = ++tick_gen_;
  tick_timer_.expires_after(d);
  tick_timer_.async_wait([self = shared_from_this(), gen](const boost::system::error_code& ec) {
    if (!ec && gen == self->tick_gen_) self->on_tick();
  });
}

// ---- reading ----

void Connection::read_more() {
  if (reading_ || peer_eof_ || phase_ == Phase::Closed) return;
  if (phase_ == Phase::Respond && in_.size() >= kReadAhead) return;  // resumes after the response
  if (phase_ == Phase::Idle || phase_ == Phase::Head) {
    const HttpLimits& l = opts_.limits;
    if (in_.size() > l.max_url_bytes + l.max_header_bytes + 2 * kReadChunk) return;  // the parser refuses first
  }
  reading_ = true;
  if (!read_chunk_) read_chunk_ = std::make_unique<char[]>(kReadChunk);
  socket_.async_read_some(asio::buffer(read_chunk_.get(), kReadChunk),
                          [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
                            self->on_read(ec, n);
                          });
}

void Connection::on_read(const boost::system::error_code& ec, size_t n) {
  reading_ = false;
  if (phase_ == Phase::Closed) return;
  if (ec == asio::error::eof) {
    peer_eof_ = true;
  } else if (ec) {
    abort();
    return;
  } else {
    in_.commit(asio::buffer_copy(in_.prepare(n), asio::buffer(read_chunk_.get(), n)));
  }
  if (phase_ == Phase::Linger) {
    in_.consume(in_.size());
    if (peer_eof_) close_now();
    else read_more();
    return;
  }
  process();
}

void Connection::process() {
  for (;;) {
    switch (phase_) {
      case Phase::Idle:
        if (in_.size() == 0) {
          if (peer_eof_) return close_now();  // the client is done with this connection
          return read_more();
        }
        parser_.emplace(opts_.limits);
        phase_ = Phase::Head;
        if (requests_ > 0) arm_read_deadline(opts_.header_timeout);
        continue;
      case Phase::Head:
      case Phase::Body: {
        const auto data = in_.data();
        in_.consume(parser_->feed(std::string_view(static_cast<const char*>(data.data()), data.size())));
        switch (parser_->state()) {
          case RequestParser::State::Failed: return refuse(parser_->error_status(), parser_->error_message());
          case RequestParser::State::NeedMore:
            if (peer_eof_) return close_now();  // the client gave up on this request
            return read_more();
          case RequestParser::State::HeadDone: on_head(); continue;
          case RequestParser::State::BodyDone: dispatch(); continue;
        }
        return;
      }
      case Phase::Respond:
        if (peer_eof_ && deferred_ && probes_ == 0) probe();
        return read_more();
      case Phase::Linger:
      case Phase::Closed: return;
    }
  }
}

void Connection::on_head() {
  const HttpRequestHead& head = parser_->head();
  version_ = head.version;
  keep_alive_ = parser_->keep_alive();
  if (std::optional<HttpResponse> early = handler_.check_head(head)) {
    if (head.has_body) early->close = true;  // its body is not read
    return respond(std::move(*early));
  }
  if (head.has_body && parser_->expects_continue()) {
    queue(std::string(kContinue));
    flush();
  }
  parser_->begin_body();
  phase_ = Phase::Body;
  if (head.has_body) arm_read_deadline(opts_.body_timeout);
}

void Connection::dispatch() {
  cancel_read_deadline();
  HttpRequest request = parser_->take();
  parser_.reset();
  phase_ = Phase::Respond;
  HandlerResult result = handler_.handle(request);
  if (auto* response = std::get_if<HttpResponse>(&result)) return respond(std::move(*response));
  deferred_ = std::move(std::get<std::unique_ptr<DeferredResponse>>(result));
  head_sent_ = streamed_ = false;
  probes_ = 0;
  last_write_ = Clock::now();
  waker_ = std::make_shared<Waker>(socket_.get_executor(), weak_from_this());
  deferred_->start([w = waker_] { w->wake(); });
  arm_tick(kHeartbeat);
  pump();
}

// ---- responding ----

void Connection::refuse(int status, const std::string& message) {
  HttpResponse r = handler_.refuse(status, message);
  r.close = true;  // the rest of what the client sends cannot be trusted
  respond(std::move(r));
}

void Connection::respond(HttpResponse r) {
  cancel_read_deadline();
  phase_ = Phase::Respond;
  begin_response(r);
  response_done_ = true;
  flush();
}

void Connection::begin_response(const HttpResponse& r) {
  close_after_ = r.close || !keep_alive_ || handler_.draining() || (r.streamed && version_ < 11);
  handler_.responded(r.status);
  queue(serialize_response(r, Framing{version_, !close_after_}));
  head_sent_ = true;
  streamed_ = r.streamed;
}

void Connection::on_wake() {
  if (waker_) waker_->rearm();
  pump();
}

void Connection::pump() {
  if (!deferred_ || phase_ != Phase::Respond || !writing_.empty() || !out_.empty()) return;
  Pulled p;
  try {
    deferred_->pull(p);
  } catch (const std::exception& e) {  // a bug behind the handler: drop this connection, not the thread
    log_error("http: a response failed: ", e.what());
    return abort();
  }
  emit(p);
}

void Connection::emit(Pulled& p) {
  if (p.start) {
    begin_response(*p.start);
    if (!streamed_) p.end = true;
  }
  if (!p.data.empty() && head_sent_) queue(body_piece(p.data, version_));
  if (p.end) {
    if (streamed_) queue(body_end(version_));
    waker_->disarm();
    deferred_.reset();  // ended: nothing to cancel
    ++tick_gen_;
    tick_timer_.cancel();
    response_done_ = true;
  }
  flush();
}

void Connection::on_tick() {
  if (!deferred_ || phase_ != Phase::Respond) return;
  if (peer_eof_) return probe();
  if (writing_.empty() && out_.empty() && Clock::now() - last_write_ >= kHeartbeat) {
    Pulled p;
    try {
      deferred_->idle(p);
    } catch (const std::exception& e) {
      log_error("http: a response failed: ", e.what());
      return abort();
    }
    emit(p);
    if (!deferred_) return;
  }
  arm_tick(kHeartbeat);
}

// The client sent EOF while its answer is being made: a half-close, or it is
// gone. Only a write can tell: to a closed socket, the first write draws a
// reset and the next one fails. HTTP/1.0 has no interim responses: there EOF
// before the response counts as leaving.
void Connection::probe() {
  if (!head_sent_ && version_ < 11) return abort();
  if (writing_.empty() && out_.empty()) {
    if (head_sent_) queue(body_piece(": probe\n\n", version_));  // a streamed body: an SSE comment
    else queue(std::string(kContinue));
    flush();
  }
  ++probes_;
  arm_tick(probes_ == 1 ? std::chrono::milliseconds(kFirstReprobe) : std::chrono::milliseconds(kHeartbeat));
}

// ---- writing ----

void Connection::queue(std::string bytes) { out_ += bytes; }

void Connection::flush() {
  if (phase_ == Phase::Closed || !writing_.empty() || out_.empty()) return;
  writing_.swap(out_);
  written_ = 0;
  write_some();
}

void Connection::write_some() {
  const uint64_t gen = ++write_gen_;
  write_timer_.expires_after(opts_.write_timeout);
  write_timer_.async_wait([self = shared_from_this(), gen](const boost::system::error_code& ec) {
    if (!ec && gen == self->write_gen_) self->abort();  // the client stopped reading
  });
  socket_.async_write_some(asio::buffer(writing_.data() + written_, writing_.size() - written_),
                           [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
                             self->on_write(ec, n);
                           });
}

void Connection::on_write(const boost::system::error_code& ec, size_t n) {
  ++write_gen_;
  write_timer_.cancel();
  if (phase_ == Phase::Closed) return;
  if (ec) return abort();
  last_write_ = Clock::now();
  written_ += n;
  if (written_ < writing_.size()) return write_some();
  writing_.clear();
  if (!out_.empty()) return flush();
  if (response_done_) return after_response();
  pump();
}

void Connection::after_response() {
  response_done_ = false;
  head_sent_ = streamed_ = false;
  ++requests_;
  if (close_after_) return linger();
  phase_ = Phase::Idle;
  arm_read_deadline(opts_.keep_alive_timeout);
  process();
}

// Stops sending and reads (discarding) until the client closes, for a
// moment: closing with unread data would reset the connection, and the
// client could lose the response.
void Connection::linger() {
  phase_ = Phase::Linger;
  boost::system::error_code ec;
  socket_.shutdown(Socket::shutdown_send, ec);
  in_.consume(in_.size());
  if (peer_eof_ || ec) return close_now();
  arm_read_deadline(std::chrono::duration_cast<std::chrono::milliseconds>(kLingerTime));
  read_more();
}

void Connection::abort() {
  if (phase_ == Phase::Closed) return;
  deferred_.reset();  // before it ended: its generation is cancelled
  close_now();
}

void Connection::close_now() {
  if (phase_ == Phase::Closed) return;
  phase_ = Phase::Closed;
  if (waker_) waker_->disarm();
  deferred_.reset();
  parser_.reset();
  cancel_read_deadline();
  ++write_gen_;
  ++tick_gen_;
  write_timer_.cancel();
  tick_timer_.cancel();
  boost::system::error_code ec;
  socket_.close(ec);
  if (on_closed_) std::exchange(on_closed_, nullptr)(this);
}

}  // namespace rf::server
