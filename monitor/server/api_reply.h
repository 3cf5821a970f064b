// What an API route answers: a status, a content type and a body, whole or in chunks. API
// failures are ApiErrors, which the router turns into {"error": "..."} with their status.
#pragma once

#include <boost/beast/http/status.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace kiln::monitor {

namespace http = boost::beast::http;

// A body too large to build whole (the CSV export): the session sends it chunked, asking for
// each piece once the one before is written, so it never holds more than one.
class BodyChunks {
 public:
  virtual ~BodyChunks() = default;
  // The next piece, "" at the end. A failure midway is thrown: the status has gone out, so
  // the session cuts the answer off and the client sees it incomplete.
  virtual std::string next() = 0;
};

struct Reply {
  http::status status = http::status::ok;
  std::string content_type = "application/json";
  std::string body;
  std::shared_ptr<BodyChunks> chunks;  // set: the body comes from here instead
  std::string content_disposition;     // set for downloads
  std::string retry_after;             // seconds, set when the server is too busy
  std::string set_cookie;              // set when a browser's session starts (token_access.h)
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
