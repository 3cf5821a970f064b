// The dashboard's server (docs/dashboard.md): HTTP and WebSocket on one port over a run
// store, on a few threads of its own. `kiln serve` runs one until Ctrl-C; `kiln train
// --serve` runs one beside the training loop.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "monitor/server/listen_address.h"
#include "monitor/server/shared_state.h"

namespace kiln::monitor {

class Listener;

class Server {
 public:
  // Refuses an exposed address without a token, and binds: both fail here, as a kiln::Error.
  Server(const ListenAddress& address, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Serves on options.threads background threads until stop().
  void start();
  // Serves until SIGINT or SIGTERM, then stops. on_serving runs once both are caught, so
  // what it prints ("serving at ...") is never followed by a default-killed process.
  void run_until_signal(const std::function<void()>& on_serving);
  // Stops accepting, sends the live clients every row committed so far and closes them
  // (waiting up to 2 s for slow ones), then stops the threads.
  void stop();

  uint16_t port() const;
  // The stores it shows, with the labels their runs go by.
  const ServedStores& stores() const { return state_.stores(); }
  // http://HOST:PORT/ as a browser would open it: for an address of every interface
  // (0.0.0.0, ::), the machine's host name.
  std::string url() const;

 private:

  ListenAddress address_;
  SharedState state_;
  boost::asio::io_context io_;
  std::shared_ptr<Listener> listener_;
  std::vector<std::thread> threads_;
};

}  // namespace kiln::monitor
