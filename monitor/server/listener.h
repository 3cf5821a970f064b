// Accepts connections on the listen address and starts an HttpSession for each, every
// session on its own strand.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>

#include "monitor/server/listen_address.h"
#include "monitor/server/shared_state.h"

namespace kiln::monitor {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  // Binds and listens now, so a port in use is a kiln::Error before anything starts.
  Listener(boost::asio::io_context& io, const ListenAddress& address, SharedState& state);

  void run();
  void stop();
  uint16_t port() const;

 private:
  void accept();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  SharedState& state_;
};

}  // namespace kiln::monitor
