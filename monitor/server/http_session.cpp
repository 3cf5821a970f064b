#include "monitor/server/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <utility>
#include <variant>

#include "monitor/server/api_routes.h"
#include "monitor/server/cross_site.h"
#include "monitor/server/server_limits.h"
#include "monitor/server/websocket_session.h"

namespace kiln::monitor {

namespace beast = boost::beast;
namespace net = boost::asio;

namespace {

Reply too_busy(const std::string& limit) {
  Reply reply =
      error_reply(http::status::service_unavailable, "the server is at its limit of " + limit + "; try again shortly");
  reply.retry_after = std::to_string(limits::kRetryAfter.count());
  return reply;
}

template <typename Body>
void set_headers(http::response<Body>& response, const Reply& reply, bool keep_alive) {
  response.set(http::field::server, "kiln");
  response.set(http::field::content_type, reply.content_type);
  response.set(http::field::cache_control, "no-store");
  response.set("X-Content-Type-Options", "nosniff");
  if (!reply.content_disposition.empty()) response.set(http::field::content_disposition, reply.content_disposition);
  if (!reply.retry_after.empty()) response.set(http::field::retry_after, reply.retry_after);
  if (!reply.set_cookie.empty()) response.set(http::field::set_cookie, reply.set_cookie);
  response.keep_alive(keep_alive);
}

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket&& socket, SharedState& state)
    : stream_(std::move(socket)), state_(state), slot_(state.connections().take()) {}

void HttpSession::run() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    // Over the cap: say so at once, without reading the request, and close.
    if (!self->slot_)
      return self->write(too_busy(std::to_string(self->state_.connections().most()) + " connections (--max-connections)"), false);
    self->read();
  });
}

void HttpSession::read() {
  parser_.emplace();
  parser_->header_limit(limits::kHeaderBytes);
  parser_->body_limit(limits::kBodyBytes);
  stream_.expires_after(limits::kReadTimeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code error, size_t) { self->on_read(error); });
}

void HttpSession::on_read(beast::error_code error) {
  if (error == http::error::end_of_stream) {
    stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, error);
    return;
  }
  if (error == http::error::body_limit)
    return write(error_reply(http::status::payload_too_large,
                             "the body is larger than " + std::to_string(limits::kBodyBytes) + " bytes"),
                 false);
  if (error == http::error::header_limit)
    return write(error_reply(http::status::request_header_fields_too_large,
                             "the header is larger than " + std::to_string(limits::kHeaderBytes) + " bytes"),
                 false);
  if (error && error.category() == http::make_error_code(http::error::bad_target).category())
    return write(error_reply(http::status::bad_request, "malformed HTTP request: " + error.message()), false);
  if (error) return;  // timed out or broken: nothing to answer

  http::request<http::string_body> request = parser_->release();
  if (auto refusal = refuse_cross_site(state_.allowed_hosts(), request)) return write(*refusal, false);
  if (beast::websocket::is_upgrade(request)) return upgrade(std::move(request));
  write(answer(state_, request), request.keep_alive());
}

void HttpSession::upgrade(http::request<http::string_body>&& request) {
  auto run = live_run(state_, request);
  if (const Reply* reply = std::get_if<Reply>(&run)) return write(*reply, false);
  auto subscriber = state_.subscribers().take();
  if (!subscriber)
    return write(too_busy(std::to_string(state_.subscribers().most()) + " live subscribers (--max-subscribers)"), false);
  // The connection's slot goes with this session; the subscriber's goes with the new one.
  std::make_shared<WebsocketSession>(stream_.release_socket(), state_, std::get<StoredRow>(run),
                                     std::move(*subscriber))
      ->run(std::move(request));
}

void HttpSession::write(Reply reply, bool keep_alive) {
  if (reply.chunks) return write_chunked(reply, keep_alive);
  // The answer's bytes are held until the client has read them: past the server's budget
  // for bytes waiting for clients (answers and live messages) it is dropped, and the client
  // told to ask again.
  if (auto share = state_.unsent_bytes().take(reply.body.size())) unsent_bytes_.emplace(std::move(*share));
  else reply = too_busy(std::to_string(state_.unsent_bytes().most()) + " bytes waiting for clients to read them");
  response_ = std::make_shared<http::response<http::string_body>>(reply.status, 11);
  set_headers(*response_, reply, keep_alive);
  response_->body() = std::move(reply.body);
  response_->prepare_payload();
  stream_.expires_after(limits::kWriteTimeout);
  http::async_write(stream_, *response_, [self = shared_from_this(), keep_alive](beast::error_code error, size_t) {
    self->on_write(keep_alive, error);
  });
}

void HttpSession::write_chunked(const Reply& reply, bool keep_alive) {
  chunks_ = reply.chunks;
  chunked_header_.emplace(reply.status, 11);
  set_headers(*chunked_header_, reply, keep_alive);
  chunked_header_->chunked(true);
  chunked_serializer_.emplace(*chunked_header_);
  stream_.expires_after(limits::kWriteTimeout);
  http::async_write_header(stream_, *chunked_serializer_,
                           [self = shared_from_this(), keep_alive](beast::error_code error, size_t) {
                             self->write_next_chunk(keep_alive, error);
                           });
}

void HttpSession::write_next_chunk(bool keep_alive, beast::error_code error) {
  if (error) return;
  try {
    chunk_ = chunks_->next();
  } catch (const std::exception&) {
    // The status is out: ending without the last chunk tells the client the body is cut.
    stream_.socket().close(error);
    return;
  }
  stream_.expires_after(limits::kWriteTimeout);
  if (chunk_.empty()) {
    chunks_.reset();
    net::async_write(stream_, http::make_chunk_last(),
                     [self = shared_from_this(), keep_alive](beast::error_code error, size_t) {
                       self->on_write(keep_alive, error);
                     });
    return;
  }
  net::async_write(stream_, http::make_chunk(net::buffer(chunk_)),
                   [self = shared_from_this(), keep_alive](beast::error_code error, size_t) {
                     self->write_next_chunk(keep_alive, error);
                   });
}

void HttpSession::on_write(bool keep_alive, beast::error_code error) {
  response_.reset();
  unsent_bytes_.reset();
  chunked_serializer_.reset();
  chunked_header_.reset();
  chunk_.clear();
  chunk_.shrink_to_fit();  // a kept-alive connection holds no chunk's memory
  if (error) return;
  if (keep_alive) return read();
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, error);
  stream_.expires_after(limits::kDrainTimeout);
  drain();
}

void HttpSession::drain() {
  stream_.async_read_some(net::buffer(drain_buffer_), [self = shared_from_this()](beast::error_code error, size_t) {
    if (!error) self->drain();
  });
}

}  // namespace kiln::monitor
