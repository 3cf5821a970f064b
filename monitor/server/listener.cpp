#include "monitor/server/listener.h"

#include <boost/asio/strand.hpp>

#include <algorithm>

#include "monitor/server/http_session.h"
#include "monitor/server/server_limits.h"
#include "store/error.h"

namespace kiln::monitor {

namespace net = boost::asio;
using tcp = net::ip::tcp;

Listener::Listener(net::io_context& io, const ListenAddress& address, SharedState& state)
    : io_(io),
      acceptor_(net::make_strand(io)),
      retry_timer_(acceptor_.get_executor()),
      retry_delay_(limits::kAcceptRetryFirst),
      state_(state) {
  boost::system::error_code error = bind_acceptor(acceptor_, address);
  if (!error) acceptor_.listen(net::socket_base::max_listen_connections, error);
  if (error)
    store::fail("cannot listen on " + address.host.to_string() + ":" + std::to_string(address.port) + ": " +
         error.message());
}

void Listener::run() { net::dispatch(acceptor_.get_executor(), [self = shared_from_this()] { self->accept(); }); }

void Listener::stop() {
  net::dispatch(acceptor_.get_executor(), [self = shared_from_this()] {
    boost::system::error_code ignored;
    self->acceptor_.close(ignored);
    self->retry_timer_.cancel();
  });
}

uint16_t Listener::port() const { return acceptor_.local_endpoint().port(); }

void Listener::accept() {
  acceptor_.async_accept(net::make_strand(io_), [self = shared_from_this()](boost::system::error_code error,
                                                                           tcp::socket socket) {
    if (error == net::error::operation_aborted) return;  // closed: the server is stopping
    if (error) return self->retry_later();
    self->retry_delay_ = limits::kAcceptRetryFirst;
    close_on_exec(socket.native_handle());
    std::make_shared<HttpSession>(std::move(socket), self->state_)->run();
    self->accept();
  });
}

void Listener::retry_later() {
  retry_timer_.expires_after(retry_delay_);
  retry_delay_ = std::min(retry_delay_ * 2, std::chrono::milliseconds(limits::kAcceptRetryMost));
  retry_timer_.async_wait([self = shared_from_this()](boost::system::error_code error) {
    if (!error && self->acceptor_.is_open()) self->accept();
  });
}

}  // namespace kiln::monitor
