// One WebSocket client following a run (GET /api/runs/{run}/live). Messages go out one write
// at a time from a queue on the session's strand. The queue is bounded in messages and in
// bytes: a client that falls that far behind is disconnected rather than let the server's
// memory grow; it reconnects and reloads the history. A message is shared by every
// subscriber of its run, but each queue counts it whole: the bound is on what one client
// keeps alive. Every queue also draws on the server's budget for unsent bytes, which HTTP
// answers share (server_limits.h: kMaxUnsentBytes).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "monitor/server/run_address.h"
#include "monitor/server/session_slots.h"
#include "monitor/server/shared_state.h"

namespace kiln::monitor {

class WebsocketSession : public std::enable_shared_from_this<WebsocketSession> {
 public:
  // Holds one of the server's subscriber slots for its life.
  WebsocketSession(boost::asio::ip::tcp::socket&& socket, SharedState& state, StoredRow run,
                   SessionSlots::Slot slot);

  // Completes the handshake the HTTP session read, then subscribes to the run's feed.
  void run(boost::beast::http::request<boost::beast::http::string_body> request);

  // Queues a message; callable from any thread.
  void send(std::shared_ptr<const std::string> message);
  // Sends what is queued, then closes ("going away"): the server is stopping.
  void close();

 private:
  void on_accept(boost::beast::error_code error);
  void read();
  void on_read(boost::beast::error_code error);
  void enqueue(std::shared_ptr<const std::string> message);
  void write_front();
  void on_write(boost::beast::error_code error);
  void close_when_sent();

  boost::beast::websocket::stream<boost::beast::tcp_stream> ws_;
  boost::beast::flat_buffer buffer_;
  SharedState& state_;
  SessionSlots::Slot slot_;
  StoredRow run_;
  // A queued message holds its share of the server's budget for unsent bytes until written.
  struct Queued {
    std::shared_ptr<const std::string> message;
    SessionSlots::Slot share;
  };
  std::deque<Queued> queue_;
  size_t queued_bytes_ = 0;  // of the messages in queue_
  bool dropped_ = false;
  bool closing_ = false;
};

}  // namespace kiln::monitor
