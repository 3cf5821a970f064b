// What an API route answers: a status, a content type and a body. API failures are ApiErrors,
// which the router turns into {"error": "..."} with their status.
#pragma once

#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace kiln::monitor {

namespace http = boost::beast::http;

struct Reply {
  http::status status = http::status::ok;
  std::string content_type = "application/json";
  std::string body;
  std::string content_disposition;  // set for downloads
};

struct ApiError : std::runtime_error {
  ApiError(http::status status, const std::string& message)
      : std::runtime_error(message), status(status) {}
  http::status status;
};

// JSON text that is valid whatever bytes the store holds: run names and notes are the
// user's text, so invalid UTF-8 is replaced rather than failing the whole answer.
std::string dump_json(const nlohmann::json& value);

Reply json_reply(const nlohmann::json& value, http::status status = http::status::ok);
Reply error_reply(http::status status, const std::string& message);

}  // namespace kiln::monitor
