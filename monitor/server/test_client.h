// What the server's tests talk to it with: blocking HTTP and WebSocket clients over Beast,
// plus a raw socket for requests no proper client would send.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kiln::monitor::test {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// Extra request headers, name and value.
using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpResult {
  unsigned status = 0;
  std::string body;
  std::string content_type;
  http::fields headers;
  nlohmann::json json() const { return nlohmann::json::parse(body); }
};

inline HttpResult request(uint16_t port, http::verb method, const std::string& target,
                          const std::string& body = {}, const Headers& headers = {}) {
  net::io_context io;
  beast::tcp_stream stream(io);
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req(method, target, 11);
  // As a browser or curl sends it: the host and port it connected to.
  req.set(http::field::host, "127.0.0.1:" + std::to_string(port));
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  for (const auto& [name, value] : headers) req.set(name, value);
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  HttpResult result{res.result_int(), res.body(), std::string(res[http::field::content_type]), res.base()};
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return result;
}

inline HttpResult get(uint16_t port, const std::string& target, const Headers& headers = {}) {
  return request(port, http::verb::get, target, {}, headers);
}

// Sends bytes as they are and returns the status line of the answer (or "" if none came).
inline std::string raw_exchange(uint16_t port, const std::string& bytes) {
  net::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  net::write(socket, net::buffer(bytes));
  std::string answer;
  beast::error_code error;
  std::array<char, 4096> chunk;
  while (answer.find("\r\n") == std::string::npos) {
    const size_t n = socket.read_some(net::buffer(chunk), error);
    if (error) break;
    answer.append(chunk.data(), n);
  }
  return answer.substr(0, answer.find("\r\n"));
}

// A WebSocket upgrade request for `target` with extra header lines ("Origin: ...\r\n").
inline std::string upgrade_request(uint16_t port, const std::string& target, const std::string& extra_headers = {}) {
  return "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
         "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
         "Sec-WebSocket-Version: 13\r\n" +
         extra_headers + "\r\n";
}

class LiveClient {
 public:
  // headers: sent with the upgrade request (the token). receive_buffer: the socket's receive
  // buffer in bytes (0: the system's), small for a client that should fall behind quickly.
  LiveClient(uint16_t port, const std::string& target, const Headers& headers = {}, int receive_buffer = 0)
      : ws_(io_) {
    auto& socket = beast::get_lowest_layer(ws_).socket();
    socket.open(tcp::v4());
    if (receive_buffer > 0) socket.set_option(net::socket_base::receive_buffer_size(receive_buffer));
    socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    ws_.set_option(beast::websocket::stream_base::decorator([headers](beast::websocket::request_type& request) {
      for (const auto& [name, value] : headers) request.set(name, value);
    }));
    ws_.handshake("127.0.0.1", target);
  }
  // The next message; fails the test's wait after a deadline rather than hanging.
  nlohmann::json next(std::chrono::seconds timeout = std::chrono::seconds(10)) {
    beast::flat_buffer buffer;
    beast::error_code error;
    bool done = false;
    ws_.async_read(buffer, [&](beast::error_code e, size_t) {
      error = e;
      done = true;
    });
    io_.restart();
    io_.run_for(timeout);
    if (!done) {
      beast::get_lowest_layer(ws_).close();
      io_.restart();
      io_.run();
      throw std::runtime_error("no WebSocket message in time");
    }
    if (error) throw beast::system_error(error);
    return nlohmann::json::parse(beast::buffers_to_string(buffer.data()));
  }

 private:
  net::io_context io_;
  beast::websocket::stream<beast::tcp_stream> ws_;
};

// The next message of `type`, skipping up to 20 of other types (a test fails without it).
inline nlohmann::json next_of(LiveClient& client, const std::string& type) {
  for (int i = 0; i < 20; ++i) {
    nlohmann::json message = client.next();
    if (message["type"] == type) return message;
  }
  ADD_FAILURE() << "no " << type << " message";
  return {};
}

}  // namespace kiln::monitor::test
