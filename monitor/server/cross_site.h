// What keeps web pages of other sites, open in a browser on this machine, from using the
// dashboard (docs/security.md, "What the server checks"). A browser sends any page's requests
// to 127.0.0.1 when the page asks, with the user's network position; these checks refuse
// what a browser would only send on behalf of another site. Tools that are not browsers
// (curl, the CLI, Prometheus) send no Origin or Referer and pass.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <optional>
#include <string_view>

#include "monitor/server/allowed_hosts.h"
#include "monitor/server/api_reply.h"

namespace kiln::monitor {

// The refusal for a request, before any route: a Host that is none of this server's (400
// when absent, 403 otherwise); a change (POST, PUT, PATCH, DELETE) whose Origin, or without
// one whose Referer, is not the server's own origin (http or https, the Host's host and
// port); a WebSocket upgrade whose Origin is not the server's own (403).
std::optional<Reply> refuse_cross_site(const AllowedHosts& hosts,
                                       const http::request<http::string_body>& request);

// True for "application/json", with or without parameters ("; charset=utf-8"). A page of
// another site can send a change without asking the server first (a CORS preflight, which
// this server never grants) only as a form or text/plain, so requiring JSON refuses them.
bool is_json_content_type(std::string_view content_type);

}  // namespace kiln::monitor
