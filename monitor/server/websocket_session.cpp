#include "monitor/server/websocket_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <utility>

#include "monitor/server/server_limits.h"

namespace kiln::monitor {

namespace beast = boost::beast;
namespace websocket = beast::websocket;

WebsocketSession::WebsocketSession(boost::asio::ip::tcp::socket&& socket, SharedState& state, StoredRow run,
                                   SessionSlots::Slot slot)
    : ws_(std::move(socket)), state_(state), slot_(std::move(slot)), run_(run) {}

void WebsocketSession::run(beast::http::request<beast::http::string_body> request) {
  // The HTTP session's read deadline ends here; the WebSocket's own timeouts take over
  // (handshake limit, pings to an idle peer, close when it stops answering).
  beast::get_lowest_layer(ws_).expires_never();
  websocket::stream_base::timeout timeouts;
  timeouts.handshake_timeout = limits::kWebsocketHandshakeTimeout;
  timeouts.idle_timeout = limits::kWebsocketIdleTimeout;
  timeouts.keep_alive_pings = true;
  ws_.set_option(timeouts);
  ws_.set_option(websocket::stream_base::decorator([](websocket::response_type& response) {
    response.set(beast::http::field::server, "kiln");
  }));
  // Clients only listen: what they send is read (to see pings and the close) and dropped.
  ws_.read_message_max(limits::kMaxIncomingMessage);
  ws_.async_accept(request, [self = shared_from_this()](beast::error_code error) {
    self->on_accept(error);
  });
}

void WebsocketSession::on_accept(beast::error_code error) {
  if (error) return;
  try {
    state_.feeds().subscribe(run_, shared_from_this());
  } catch (const std::exception& e) {
    ws_.async_close(websocket::close_reason(websocket::close_code::try_again_later, e.what()),
                    [self = shared_from_this()](beast::error_code) {});
    return;
  }
  read();
}

void WebsocketSession::read() {
  ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code error, size_t) {
    self->on_read(error);
  });
}

void WebsocketSession::on_read(beast::error_code error) {
  if (error) return;  // closed, timed out or broken: the session ends with its last handler
  buffer_.consume(buffer_.size());
  read();
}

void WebsocketSession::send(std::shared_ptr<const std::string> message) {
  boost::asio::post(ws_.get_executor(), [self = shared_from_this(), message = std::move(message)] {
    self->enqueue(message);
  });
}

void WebsocketSession::enqueue(std::shared_ptr<const std::string> message) {
  if (dropped_ || closing_) return;
  const ServerOptions& options = state_.options();
  std::optional<SessionSlots::Slot> share = state_.unsent_bytes().take(message->size());
  if (!share || queue_.size() >= options.max_queued_messages ||
      (!queue_.empty() && queued_bytes_ + message->size() > options.max_queued_bytes)) {
    // Too far behind: closing the socket fails the write in flight and the read, and the
    // session ends; nothing more is queued for it.
    dropped_ = true;
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    return;
  }
  queued_bytes_ += message->size();
  queue_.push_back({std::move(message), std::move(*share)});
  if (queue_.size() == 1) write_front();
}

void WebsocketSession::write_front() {
  ws_.text(true);
  ws_.async_write(boost::asio::buffer(*queue_.front().message),
                  [self = shared_from_this()](beast::error_code error, size_t) {
                    self->on_write(error);
                  });
}

void WebsocketSession::on_write(beast::error_code error) {
  if (error || dropped_) return;
  queued_bytes_ -= queue_.front().message->size();
  queue_.pop_front();
  if (!queue_.empty()) return write_front();
  if (closing_) close_when_sent();
}

void WebsocketSession::close() {
  boost::asio::post(ws_.get_executor(), [self = shared_from_this()] {
    self->closing_ = true;
    if (self->queue_.empty()) self->close_when_sent();
  });
}

void WebsocketSession::close_when_sent() {
  if (dropped_) return;
  dropped_ = true;  // nothing more is queued once the close is on its way
  ws_.async_close(websocket::close_code::going_away, [self = shared_from_this()](beast::error_code) {});
}

}  // namespace kiln::monitor
