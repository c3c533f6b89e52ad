// Connection: one HTTP/1.1 client connection, served without a thread of its
// own. All of its work runs on its strand (the socket's executor); the I/O
// threads of the server take turns. It owns:
//  - reading: one read at a time into a bounded buffer, parsed by a
//    RequestParser; pipelined requests wait in the buffer and are answered
//    in order; a half-closed client (EOF after its requests) gets its answers;
//  - the head first: the handler may answer from the headers (auth, routing)
//    before the body is read; `Expect: 100-continue` is honoured after that;
//  - deadlines: the head (from its first byte; from accept for the first
//    request), the body, idle keep-alive, and a write that makes no
//    progress (a client that stopped reading);
//  - a deferred response (a generation): pulled when the handler wakes it
//    and the previous write is done (back-pressure), with a heartbeat when
//    quiet. While it runs the socket is watched: on EOF the client is probed
//    (an interim 100 Continue, or an SSE comment), and a failed write means
//    it is gone: the response is dropped, which cancels the generation;
//  - closing: after a response that closes the connection it stops
//    sending and discards what the client still sends for a moment, so the
//    response is not lost to a reset.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/http_handler.h"
#include "server/http_parse.h"

namespace rf::server {

struct ConnectionOptions {
  HttpLimits limits;
  std::chrono::milliseconds header_timeout{10000};      // the whole head
  std::chrono::milliseconds body_timeout{60000};        // the whole body, after the head
  std::chrono::milliseconds keep_alive_timeout{65000};  // idle between requests
  std::chrono::milliseconds write_timeout{30000};       // a write without progress
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Socket = boost::asio::ip::tcp::socket;  // its executor must be a strand

  // `on_closed` runs once, on the strand, when the connection has closed.
  Connection(Socket socket, HttpHandler& handler, const ConnectionOptions& options,
             std::function<void(Connection*)> on_closed);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void start();
  // Thread-safe. Ends the connection now, cancelling what it runs.
  void close();

 private:
  enum class Phase { Idle, Head, Body, Respond, Linger, Closed };
  class Waker;

  void process();  // moves the state machine on with what was read
  void read_more();
  void on_read(const boost::system::error_code& ec, size_t n);
  void on_head();
  void dispatch();
  void refuse(int status, const std::string& message);
  void respond(HttpResponse r);
  void begin_response(const HttpResponse& r);
  void pump();  // pulls the deferred response when nothing is being written
  void emit(Pulled& p);
  void on_wake();
  void on_tick();
  void probe();
  void queue(std::string bytes);
  void flush();
  void write_some();
  void on_write(const boost::system::error_code& ec, size_t n);
  void after_response();
  void linger();
  void abort();  // the client is gone or broke the protocol
  void close_now();

  void arm_read_deadline(std::chrono::milliseconds d);
  void cancel_read_deadline();
  void arm_tick(std::chrono::milliseconds d);

  Socket socket_;
  HttpHandler& handler_;
  const ConnectionOptions& opts_;
  std::function<void(Connection*)> on_closed_;
  boost::asio::steady_timer read_timer_, write_timer_, tick_timer_;
  uint64_t read_gen_ = 0, write_gen_ = 0, tick_gen_ = 0;  // a timer's wait is current only with its generation

  Phase phase_ = Phase::Idle;
  boost::beast::flat_buffer in_;  // read, not parsed yet
  // The pending read's target. Reads never go straight into in_: parsing
  // consumes in_ while a read is pending, and a flat_buffer emptied by
  // consume() restarts at its front, away from where that read writes.
  std::unique_ptr<char[]> read_chunk_;
  std::optional<RequestParser> parser_;
  bool reading_ = false, peer_eof_ = false;
  uint64_t requests_ = 0;  // answered on this connection

  int version_ = 11;        // of the request being answered
  bool keep_alive_ = true;  // the request allows the connection to stay open
  bool close_after_ = false;
  bool response_done_ = false;  // the response is complete once the writes are done
  std::string out_, writing_;   // queued; being written
  size_t written_ = 0;          // of writing_

  std::unique_ptr<DeferredResponse> deferred_;
  std::shared_ptr<Waker> waker_;
  bool head_sent_ = false, streamed_ = false;
  std::chrono::steady_clock::time_point last_write_;
  int probes_ = 0;
};

}  // namespace rf::server
