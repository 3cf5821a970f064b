#include "monitor/server/listen_address.h"

#include <fcntl.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <charconv>
#include <optional>

#include "store/error.h"

namespace kiln::monitor {

ListenAddress parse_listen_address(std::string_view text) {
  const auto bad = [&](const std::string& why) -> ListenAddress {
    store::fail("--listen '" + std::string(text) + "': " + why +
         " (expected HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080)");
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  ListenAddress address;
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535)
    return bad("the port is not a number from 0 to 65535");
  address.port = static_cast<uint16_t>(port);
  boost::system::error_code error;
  address.host = boost::asio::ip::make_address(std::string(host), error);
  if (error) return bad("'" + std::string(host) + "' is not an IP address");
  return address;
}

void check_exposure(const ListenAddress& address, const std::string& token) {
  if (address.host.is_loopback() || !token.empty()) return;
  store::fail("--listen " + address.host.to_string() +
       " reaches beyond this machine; give --token TOKEN so that only holders of it can "
       "read and change runs, or listen on 127.0.0.1");
}

void close_on_exec(int fd) { ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC); }

boost::system::error_code bind_acceptor(boost::asio::ip::tcp::acceptor& acceptor, const ListenAddress& address) {
  const boost::asio::ip::tcp::endpoint endpoint(address.host, address.port);
  boost::system::error_code error;
  acceptor.open(endpoint.protocol(), error);
  if (error) return error;
  close_on_exec(acceptor.native_handle());
  acceptor.set_option(boost::asio::socket_base::reuse_address(true), error);
  if (!error) acceptor.bind(endpoint, error);
  return error;
}

ListenAddress free_listen_address(const ListenAddress& wanted) {
  // Bound as the dashboard's listener binds, then closed, so the training that starts next
  // can take it.
  const auto bound_port = [](const ListenAddress& address) -> std::optional<uint16_t> {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor acceptor(io);
    if (bind_acceptor(acceptor, address)) return std::nullopt;
    return acceptor.local_endpoint().port();
  };
  if (bound_port(wanted)) return wanted;
  ListenAddress elsewhere{wanted.host, 0};
  const std::optional<uint16_t> port = bound_port(elsewhere);
  if (!port) return wanted;  // the host itself cannot be listened on: the training says why
  elsewhere.port = *port;
  return elsewhere;
}

std::string to_string(const ListenAddress& address) {
  const std::string host = address.host.to_string();
  return (address.host.is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(address.port);
}

}  // namespace kiln::monitor
