#include "monitor/server/token_access.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/core.h>

#include "base/check.h"
#include "base/trim.h"

namespace kiln::monitor {

namespace http = boost::beast::http;

namespace {

// Compared in full whatever the first difference, so timing does not reveal a prefix.
bool same_in_constant_time(std::string_view given, std::string_view expected) {
  if (given.size() != expected.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    difference |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return difference == 0;
}

std::string random_hex(size_t bytes) {
  std::array<unsigned char, 64> random{};
  KILN_CHECK(bytes <= random.size(), "random_hex: too many bytes");
  for (size_t got = 0; got < bytes;) {
    const ssize_t n = ::getrandom(random.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(std::string("cannot draw a session secret: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  std::string hex;
  for (size_t i = 0; i < bytes; ++i) hex += fmt::format("{:02x}", random[i]);
  return hex;
}

// "kiln-session-8080" for "127.0.0.1:8080" or "[::1]:8080"; "kiln-session" for a Host
// without a port (a proxy on the scheme's default port).
std::string cookie_name(std::string_view host) {
  const size_t colon = host.rfind(':');
  const size_t bracket = host.rfind(']');
  if (colon == std::string_view::npos || (bracket != std::string_view::npos && bracket > colon))
    return "kiln-session";
  const std::string_view port = host.substr(colon + 1);
  if (port.empty() || port.find_first_not_of("0123456789") != std::string_view::npos) return "kiln-session";
  return "kiln-session-" + std::string(port);
}

}  // namespace

TokenAccess::TokenAccess(const std::string& token)
    : expected_header_(token.empty() ? "" : "Bearer " + token), session_(token.empty() ? "" : random_hex(32)) {}

bool TokenAccess::may_change(const http::request<http::string_body>& request) const {
  return !required() || same_in_constant_time(request[http::field::authorization], expected_header_);
}

bool TokenAccess::may_read(const http::request<http::string_body>& request) const {
  if (may_change(request)) return true;
  const std::string name = cookie_name(request[http::field::host]);
  // "a=1; kiln-session-8080=SECRET; b=2": every cookie of that name is tried (a browser may
  // hold one per path).
  std::string_view cookies = request[http::field::cookie];
  bool found = false;
  while (!cookies.empty()) {
    const size_t end = cookies.find(';');
    const std::string_view pair = trim_blanks(cookies.substr(0, end));
    cookies = end == std::string_view::npos ? std::string_view() : cookies.substr(end + 1);
    const size_t equals = pair.find('=');
    if (equals == std::string_view::npos || pair.substr(0, equals) != name) continue;
    found = same_in_constant_time(pair.substr(equals + 1), session_) || found;
  }
  return found;
}

std::string TokenAccess::session_cookie(std::string_view host) const {
  return cookie_name(host) + "=" + session_ + "; Path=/; HttpOnly; SameSite=Strict";
}

}  // namespace kiln::monitor
