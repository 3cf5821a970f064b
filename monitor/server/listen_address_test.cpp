#include "monitor/server/listen_address.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "tests/error_of.h"

namespace kiln::monitor {
namespace {

using kiln::test::error_of;

TEST(ListenAddress, ParsesHostAndPort) {
  EXPECT_EQ(parse_listen_address("127.0.0.1:8080").port, 8080);
  EXPECT_TRUE(parse_listen_address("localhost:1").host.is_loopback());
  EXPECT_TRUE(parse_listen_address("[::1]:80").host.is_v6());
  EXPECT_EQ(parse_listen_address("0.0.0.0:0").port, 0);
}

TEST(ListenAddress, RefusesWhatIsNotHostColonPort) {
  const std::string form = " (expected HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080)";
  EXPECT_EQ(error_of([] { parse_listen_address("8080"); }), "--listen '8080': no port" + form);
  EXPECT_EQ(error_of([] { parse_listen_address("127.0.0.1:http"); }),
            "--listen '127.0.0.1:http': the port is not a number from 0 to 65535" + form);
  EXPECT_EQ(error_of([] { parse_listen_address("127.0.0.1:70000"); }),
            "--listen '127.0.0.1:70000': the port is not a number from 0 to 65535" + form);
  EXPECT_EQ(error_of([] { parse_listen_address("example.com:80"); }),
            "--listen 'example.com:80': 'example.com' is not an IP address" + form);
}

TEST(ListenAddress, ExposedAddressNeedsAToken) {
  EXPECT_EQ(error_of([] { check_exposure(parse_listen_address("0.0.0.0:8080"), ""); }),
            "--listen 0.0.0.0 reaches beyond this machine; give --token TOKEN so that only holders of it "
            "can read and change runs, or listen on 127.0.0.1");
  EXPECT_EQ(error_of([] { check_exposure(parse_listen_address("0.0.0.0:8080"), "t"); }), "(no error)");
  EXPECT_EQ(error_of([] { check_exposure(parse_listen_address("127.0.0.1:8080"), ""); }), "(no error)");
}

TEST(ListenAddress, AFreeAddressIsTheOneWantedUnlessItIsTaken) {
  EXPECT_EQ(to_string(parse_listen_address("[::1]:8080")), "[::1]:8080");
  EXPECT_EQ(to_string(parse_listen_address("localhost:1")), "127.0.0.1:1");

  // A port this test holds is taken; the same host on another port is offered instead.
  namespace net = boost::asio;
  net::io_context io;
  net::ip::tcp::acceptor held(io, net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  const ListenAddress taken{held.local_endpoint().address(), held.local_endpoint().port()};
  const ListenAddress offered = free_listen_address(taken);
  EXPECT_EQ(offered.host, taken.host);
  EXPECT_NE(offered.port, taken.port);
  EXPECT_NE(offered.port, 0);
  EXPECT_EQ(free_listen_address(offered).port, offered.port) << "nothing holds the offered port";
}

}  // namespace
}  // namespace kiln::monitor
