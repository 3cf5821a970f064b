// Where the dashboard listens: "HOST:PORT" as typed on the command line.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::monitor {

struct ListenAddress {
  boost::asio::ip::address host;
  uint16_t port = 0;  // 0: the system picks a free port
};

inline constexpr const char* kDefaultListen = "127.0.0.1:8080";

// "127.0.0.1:8080", "0.0.0.0:80", "[::1]:8080", "localhost:8080". Anything else is a
// kiln::Error naming the expected form.
ListenAddress parse_listen_address(std::string_view text);

// The server refuses to listen beyond this machine without a token: anyone who can reach
// the port could otherwise steer every run.
void check_exposure(const ListenAddress& address, const std::string& token);

// Boost.Asio opens and accepts sockets without close-on-exec. A program kiln starts gets no
// descriptor but its standard streams anyway (base/child_process.h); this keeps any other
// exec, by a library in this process, from taking a port or a client's connection along.
void close_on_exec(int fd);

// Opens `acceptor` and binds it to `address`, as every dashboard listener binds: close-on-exec,
// with reuse_address (a port that a closed connection left in TIME_WAIT is free). The first
// error, or none.
boost::system::error_code bind_acceptor(boost::asio::ip::tcp::acceptor& acceptor, const ListenAddress& address);

// `wanted` when it can be listened on now, else the same host on a port the system picks,
// for a dashboard that must not cost its training the start (kiln runs resume and fork
// serving where the run served while kiln serve holds that port).
ListenAddress free_listen_address(const ListenAddress& wanted);

// "127.0.0.1:8080", "[::1]:8080": as parse_listen_address reads it back.
std::string to_string(const ListenAddress& address);

}  // namespace kiln::monitor
