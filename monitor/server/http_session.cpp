#include "monitor/server/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <chrono>
#include <utility>
#include <variant>

#include "monitor/server/api_routes.h"
#include "monitor/server/websocket_session.h"

namespace kiln::monitor {

namespace beast = boost::beast;

constexpr auto kReadTimeout = std::chrono::seconds(30);
constexpr auto kDrainTimeout = std::chrono::seconds(5);
constexpr uint32_t kHeaderLimit = 8 * 1024;
constexpr uint64_t kBodyLimit = 64 * 1024;  // the API's bodies are small JSON objects

HttpSession::HttpSession(boost::asio::ip::tcp::socket&& socket, SharedState& state)
    : stream_(std::move(socket)), state_(state) {}

void HttpSession::run() {
  boost::asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
}

void HttpSession::read() {
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  parser_->body_limit(kBodyLimit);
  stream_.expires_after(kReadTimeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code error, size_t) { self->on_read(error); });
}

void HttpSession::on_read(beast::error_code error) {
  if (error == http::error::end_of_stream) {
    stream_.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, error);
    return;
  }
  if (error == http::error::body_limit)
    return write(error_reply(http::status::payload_too_large,
                             "the body is larger than " + std::to_string(kBodyLimit) + " bytes"),
                 false);
  if (error == http::error::header_limit)
    return write(error_reply(http::status::request_header_fields_too_large,
                             "the header is larger than " + std::to_string(kHeaderLimit) + " bytes"),
                 false);
  if (error && error.category() == http::make_error_code(http::error::bad_target).category())
    return write(error_reply(http::status::bad_request, "malformed HTTP request: " + error.message()), false);
  if (error) return;  // timed out or broken: nothing to answer

  http::request<http::string_body> request = parser_->release();
  if (beast::websocket::is_upgrade(request)) {
    auto run_id = live_run(state_, request);
    if (const Reply* reply = std::get_if<Reply>(&run_id)) return write(*reply, false);
    std::make_shared<WebsocketSession>(stream_.release_socket(), state_, std::get<int64_t>(run_id))
        ->run(std::move(request));
    return;
  }
  write(answer(state_, request), request.keep_alive());
}

void HttpSession::write(const Reply& reply, bool keep_alive) {
  response_ = std::make_shared<http::response<http::string_body>>(reply.status, 11);
  response_->set(http::field::server, "kiln");
  response_->set(http::field::content_type, reply.content_type);
  response_->set(http::field::cache_control, "no-store");
  response_->set("X-Content-Type-Options", "nosniff");
  if (!reply.content_disposition.empty())
    response_->set(http::field::content_disposition, reply.content_disposition);
  response_->keep_alive(keep_alive);
  response_->body() = reply.body;
  response_->prepare_payload();
  http::async_write(stream_, *response_, [self = shared_from_this(), keep_alive](beast::error_code error, size_t) {
    self->on_write(keep_alive, error);
  });
}

void HttpSession::on_write(bool keep_alive, beast::error_code error) {
  response_.reset();
  if (error) return;
  if (keep_alive) return read();
  stream_.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, error);
  stream_.expires_after(kDrainTimeout);
  drain();
}

void HttpSession::drain() {
  stream_.async_read_some(boost::asio::buffer(drain_buffer_),
                          [self = shared_from_this()](beast::error_code error, size_t) {
                            if (!error) self->drain();
                          });
}

}  // namespace kiln::monitor
