// One HTTP connection: reads a request (with a deadline and limits on header and body size),
// checks it comes from this server's own pages where a browser could have sent it for another
// site, answers it, then reads the next; one write in flight at a time. A WebSocket upgrade
// for /api/runs/{run}/live hands the socket to a WebsocketSession. Past the server's cap on
// connections (or, for an upgrade, on subscribers) the answer is 503 and the connection
// closes.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <array>
#include <memory>
#include <optional>
#include <string>

#include "monitor/server/api_reply.h"
#include "monitor/server/session_slots.h"
#include "monitor/server/shared_state.h"

namespace kiln::monitor {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  // Takes one of the server's connection slots, if one is free.
  HttpSession(boost::asio::ip::tcp::socket&& socket, SharedState& state);
  void run();

 private:
  void read();
  void on_read(boost::beast::error_code error);
  void upgrade(boost::beast::http::request<boost::beast::http::string_body>&& request);
  void write(Reply reply, bool keep_alive);
  void on_write(bool keep_alive, boost::beast::error_code error);
  // A chunked answer: the header, then each piece once the one before is written.
  void write_chunked(const Reply& reply, bool keep_alive);
  void write_next_chunk(bool keep_alive, boost::beast::error_code error);
  // After an error reply to a request whose body was not read: stop sending, read and drop
  // what the client still sends (so closing does not reset the connection under the reply),
  // then close.
  void drain();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  SharedState& state_;
  std::optional<SessionSlots::Slot> slot_;
  std::optional<SessionSlots::Slot> unsent_bytes_;  // the answer's share of the unsent bytes
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::shared_ptr<boost::beast::http::response<boost::beast::http::string_body>> response_;
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> chunked_header_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> chunked_serializer_;
  std::shared_ptr<BodyChunks> chunks_;
  std::string chunk_;
  std::array<char, 4096> drain_buffer_;
};

}  // namespace kiln::monitor
