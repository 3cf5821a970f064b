#include "monitor/server/listener.h"

#include <boost/asio/strand.hpp>

#include "store/error.h"
#include "monitor/server/http_session.h"

namespace kiln::monitor {

namespace net = boost::asio;
using tcp = net::ip::tcp;

Listener::Listener(net::io_context& io, const ListenAddress& address, SharedState& state)
    : io_(io), acceptor_(net::make_strand(io)), state_(state) {
  const tcp::endpoint endpoint(address.host, address.port);
  boost::system::error_code error;
  acceptor_.open(endpoint.protocol(), error);
  if (!error) acceptor_.set_option(net::socket_base::reuse_address(true), error);
  if (!error) acceptor_.bind(endpoint, error);
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
  });
}

uint16_t Listener::port() const { return acceptor_.local_endpoint().port(); }

void Listener::accept() {
  acceptor_.async_accept(net::make_strand(io_), [self = shared_from_this()](boost::system::error_code error,
                                                                           tcp::socket socket) {
    if (error == net::error::operation_aborted) return;  // closed: the server is stopping
    if (!error) std::make_shared<HttpSession>(std::move(socket), self->state_)->run();
    self->accept();
  });
}

}  // namespace kiln::monitor
