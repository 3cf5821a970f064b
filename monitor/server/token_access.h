// Who may use a server that has a token (docs/security.md#what-the-token-protects). Every
// API read, /metrics and the live feed need the token as a change does, as Jupyter's does:
// a run's config can hold a webhook's URL, its record the folder it ran in. Only the
// dashboard's own pages, which hold no data, are served without it.
//
// A program sends "Authorization: Bearer TOKEN". A browser cannot put a header on a
// WebSocket, nor on a link it follows (the CSV export), so the dashboard trades the token
// once (POST /api/session with the header) for a session cookie: a random secret of this
// server process, HttpOnly (no page script reads it) and SameSite=Strict (no other site's page
// makes the browser send it). The cookie lets a browser read and follow runs; a change still
// needs the header, which only the dashboard's own script adds. Both are compared in constant
// time. Without a token everything is open, as the server then listens on loopback only.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>
#include <string_view>

namespace kiln::monitor {

class TokenAccess {
 public:
  // An empty token: none set.
  explicit TokenAccess(const std::string& token);

  bool required() const { return !expected_header_.empty(); }
  // The request carries "Authorization: Bearer TOKEN" (or no token is set).
  bool may_change(const boost::beast::http::request<boost::beast::http::string_body>& request) const;
  // The header, or this server's session cookie (or no token is set).
  bool may_read(const boost::beast::http::request<boost::beast::http::string_body>& request) const;
  // The Set-Cookie value that starts a browser's session, for the Host it sent. The cookie's
  // name carries the port, since a browser shares cookies among the ports of one host.
  std::string session_cookie(std::string_view host) const;

 private:
  std::string expected_header_;  // "Bearer TOKEN"; empty without a token
  std::string session_;          // 64 hex digits
};

}  // namespace kiln::monitor
