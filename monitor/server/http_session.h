// One HTTP connection: reads a request (with a deadline and limits on header and body size),
// answers it, then reads the next; one write in flight at a time. A WebSocket upgrade for
// /api/runs/{run}/live hands the socket to a WebsocketSession.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <array>
#include <memory>
#include <optional>

#include "monitor/server/api_reply.h"
#include "monitor/server/shared_state.h"

namespace kiln::monitor {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket&& socket, SharedState& state);
  void run();

 private:
  void read();
  void on_read(boost::beast::error_code error);
  void write(const Reply& reply, bool keep_alive);
  void on_write(bool keep_alive, boost::beast::error_code error);
  // After an error reply to a request whose body was not read: stop sending, read and drop
  // what the client still sends (so closing does not reset the connection under the reply),
  // then close.
  void drain();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  SharedState& state_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::shared_ptr<boost::beast::http::response<boost::beast::http::string_body>> response_;
  std::array<char, 4096> drain_buffer_;
};

}  // namespace kiln::monitor
