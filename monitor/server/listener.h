// Accepts connections on the listen address and starts an HttpSession for each, every
// session on its own strand. When accepting fails (the process is out of file descriptors,
// say) it waits and tries again, waiting longer each time up to a second, rather than
// spinning a core on an error that lasts until some connection closes.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
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
  void retry_later();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_timer_;  // on the acceptor's strand
  std::chrono::milliseconds retry_delay_;
  SharedState& state_;
};

}  // namespace kiln::monitor
