#include "monitor/server/cross_site.h"

#include <boost/beast/core/string.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <string>

namespace kiln::monitor {

namespace {

bool changes_something(http::verb method) {
  return method == http::verb::post || method == http::verb::put || method == http::verb::patch ||
         method == http::verb::delete_;
}

// An Origin ("http://127.0.0.1:8080") or a Referer ("http://127.0.0.1:8080/#/run/x") of a
// page this server served: http or https, and the host and port the request was sent to.
bool is_own_origin(std::string_view source, std::string_view host) {
  for (const std::string_view scheme : {"http://", "https://"}) {
    if (!source.starts_with(scheme)) continue;
    const std::string_view rest = source.substr(scheme.size());
    return boost::beast::iequals(rest.substr(0, rest.find_first_of("/?#")), host);
  }
  return false;  // "null" (a sandboxed page, a file), or another scheme
}

// The scheme and authority of a URL, without the path a Referer carries.
std::string_view origin_of(std::string_view url) {
  const size_t authority = url.find("://");
  if (authority == std::string_view::npos) return url;
  return url.substr(0, url.find_first_of("/?#", authority + 3));
}

}  // namespace

std::optional<Reply> refuse_cross_site(const AllowedHosts& hosts, const http::request<http::string_body>& request) {
  const std::string_view host = request[http::field::host];
  if (host.empty()) return error_reply(http::status::bad_request, "the request has no Host header");
  if (!hosts.allows(host))
    return error_reply(http::status::forbidden,
                       "this server does not answer to the host '" + std::string(host) +
                           "'; if that is its name, start it with --allow-host NAME");
  const bool upgrade = boost::beast::websocket::is_upgrade(request);
  if (!upgrade && !changes_something(request.method())) return std::nullopt;
  std::string_view header = "Origin";
  std::string_view source = request[http::field::origin];
  // Browsers send Origin on every WebSocket and on most changes; the Referer stands in for
  // it where an older one does not.
  if (source.empty() && !upgrade) {
    header = "Referer";
    source = request[http::field::referer];
  }
  if (source.empty() || is_own_origin(source, host)) return std::nullopt;
  return error_reply(http::status::forbidden, std::string(header) + " '" + std::string(origin_of(source)) +
                                                  "' is not this server's: only the dashboard's own pages can " +
                                                  (upgrade ? "follow runs" : "change runs"));
}

bool is_json_content_type(std::string_view content_type) {
  const std::string_view type = content_type.substr(0, content_type.find(';'));
  const size_t end = type.find_last_not_of(" \t");
  return boost::beast::iequals(type.substr(0, end == std::string_view::npos ? 0 : end + 1), "application/json");
}

}  // namespace kiln::monitor
