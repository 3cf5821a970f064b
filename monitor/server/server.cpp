#include "monitor/server/server.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <csignal>
#include <future>
#include <utility>

#include "monitor/server/listener.h"
#include "monitor/server/server_limits.h"

namespace kiln::monitor {

Server::Server(const ListenAddress& address, ServerOptions options)
    : address_(address), state_((check_exposure(address, options.token), std::move(options)), address) {
  listener_ = std::make_shared<Listener>(io_, address_, state_);
}

Server::~Server() { stop(); }

namespace {

// Names the calling thread for top and ps; beside a training run, also lowers it to nice 19
// (Linux gives each thread its own nice value).
void become_server_thread(bool beside_training) {
  pthread_setname_np(pthread_self(), "kiln-server");
  if (beside_training) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
}

}  // namespace

void Server::start() {
  listener_->run();
  state_.feeds().start(boost::asio::make_strand(io_));
  const bool beside_training = state_.options().beside_training;
  for (int i = 0; i < std::max(1, state_.options().threads); ++i)
    threads_.emplace_back([this, beside_training] {
      become_server_thread(beside_training);
      io_.run();
    });
}

void Server::run_until_signal(const std::function<void()>& on_serving) {
  std::promise<void> signalled;
  boost::asio::signal_set signals(io_, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) { signalled.set_value(); });
  start();
  on_serving();
  signalled.get_future().wait();
  stop();
}

void Server::stop() {
  if (threads_.empty()) return;
  listener_->stop();
  const auto sessions = state_.feeds().finish();
  const auto deadline = std::chrono::steady_clock::now() + limits::kCloseGrace;
  for (const auto& session : sessions)
    while (!session.expired() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // Stopping the context ends every other session with it; the sockets close as they go.
  io_.stop();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  state_.feeds().stop();
}

uint16_t Server::port() const { return listener_->port(); }

std::string Server::url() const {
  std::string where = to_string(ListenAddress{address_.host, port()});
  // Every interface: the machine's name is what others can open; a loopback address would
  // hide that the dashboard is exposed.
  if (address_.host.is_unspecified()) {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0 && name[0] != '\0') where = std::string(name) + ":" + std::to_string(port());
  }
  return "http://" + where + "/";
}

}  // namespace kiln::monitor
