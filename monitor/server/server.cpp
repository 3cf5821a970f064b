#include "monitor/server/server.h"

#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <csignal>
#include <utility>

#include "monitor/server/listener.h"

namespace kiln::monitor {

Server::Server(const ListenAddress& address, ServerOptions options)
    : address_(address), state_((check_exposure(address, options.token), std::move(options))) {
  listener_ = std::make_shared<Listener>(io_, address_, state_);
}

Server::~Server() { stop(); }

void Server::spawn(int count) {
  listener_->run();
  state_.feeds().start(boost::asio::make_strand(io_));
  for (int i = 0; i < count; ++i) threads_.emplace_back([this] { io_.run(); });
}

void Server::start() { spawn(std::max(1, state_.options().threads)); }

void Server::run_until_signal() {
  boost::asio::signal_set signals(io_, SIGINT, SIGTERM);
  signals.async_wait([this](const boost::system::error_code&, int) { io_.stop(); });
  spawn(std::max(0, state_.options().threads - 1));
  io_.run();
  stop();
}

void Server::stop() {
  // Stopping the context ends every session with it; the sockets close as they go.
  io_.stop();
  for (auto& thread : threads_)
    if (thread.joinable()) thread.join();
  threads_.clear();
  state_.feeds().stop();
}

uint16_t Server::port() const { return listener_->port(); }

std::string Server::url() const {
  const std::string host = address_.host.is_v6() ? "[" + address_.host.to_string() + "]" : address_.host.to_string();
  const std::string shown = address_.host.is_unspecified() ? "127.0.0.1" : host;
  return "http://" + shown + ":" + std::to_string(port()) + "/";
}

}  // namespace kiln::monitor
