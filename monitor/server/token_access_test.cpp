// A server with a token wants it for every read as for every change: as the header, or for
// reads and the live feed as the session cookie a browser gets for it. The pages stay open,
// a server without a token stays open, and configs are served with their secrets hidden.
#include "monitor/server/token_access.h"

#include <gtest/gtest.h>

#include <string>

#include "monitor/server/server_fixture.h"
#include "monitor/server/test_client.h"
#include "store/run_writer.h"
#include "store/test_util.h"

namespace kiln::monitor::test {
namespace {

using Request = http::request<http::string_body>;

const std::vector<std::string> kReads = {"/api/runs",         "/api/runs/alpha",        "/api/runs/alpha/metrics",
                                         "/api/runs/alpha/valid", "/api/runs/alpha/events", "/api/runs/alpha/export.csv",
                                         "/api/compare?runs=alpha,beta", "/api/sweeps", "/metrics"};

// The session cookie the server sets, as a browser sends it back ("NAME=VALUE").
std::string session_of(const HttpResult& started) {
  const std::string set_cookie(started.headers[http::field::set_cookie]);
  return set_cookie.substr(0, set_cookie.find(';'));
}

HttpResult start_session(uint16_t port, const Headers& headers) {
  return request(port, http::verb::post, "/api/session", "{}", headers);
}

TEST_F(ServerTest, WithATokenEveryReadNeedsIt) {
  for (const std::string& target : kReads) {
    const HttpResult refused = get(port_, target);
    EXPECT_EQ(refused.status, 401u) << target;
    EXPECT_EQ(refused.json()["error"],
              "this server has a token: send it as \"Authorization: Bearer TOKEN\" (the dashboard asks for it once)")
        << target;
    EXPECT_EQ(get(port_, target, {{"Authorization", "Bearer nope"}}).status, 401u) << target;
    EXPECT_EQ(get(port_, target, {kAuth}).status, 200u) << target;
  }
  // An unknown run answers as no run at all would: nothing is told before the token.
  EXPECT_EQ(get(port_, "/api/runs/nosuch").status, 401u);
  // The pages hold no data: they load, and ask for the token.
  EXPECT_EQ(get(port_, "/").status, 200u);
  EXPECT_EQ(get(port_, "/api.js").status, 200u);
}

TEST_F(ServerTest, WithATokenTheLiveFeedNeedsIt) {
  const std::string target = "/api/runs/beta/live";
  EXPECT_EQ(raw_exchange(port_, upgrade_request(port_, target)), "HTTP/1.1 401 Unauthorized");
  EXPECT_EQ(raw_exchange(port_, upgrade_request(port_, target, "Authorization: Bearer nope\r\n")),
            "HTTP/1.1 401 Unauthorized");
  EXPECT_EQ(raw_exchange(port_, upgrade_request(port_, target, kAuthLine)), "HTTP/1.1 101 Switching Protocols");
  LiveClient client(port_, target, {kAuth});
  EXPECT_EQ(client.next()["type"], "hello");
}

TEST_F(ServerTest, TheTokenBuysABrowserASessionCookieForReadsButNotForChanges) {
  EXPECT_EQ(start_session(port_, {}).status, 401u);
  EXPECT_EQ(start_session(port_, {{"Authorization", "Bearer nope"}}).status, 401u);
  const HttpResult started = start_session(port_, {kAuth});
  ASSERT_EQ(started.status, 200u) << started.body;
  EXPECT_EQ(started.json()["token_required"], true);
  const std::string set_cookie(started.headers[http::field::set_cookie]);
  const std::string name = "kiln-session-" + std::to_string(port_) + "=";
  ASSERT_EQ(set_cookie.rfind(name, 0), 0u) << set_cookie;
  EXPECT_EQ(set_cookie.substr(name.size() + 64), "; Path=/; HttpOnly; SameSite=Strict");
  const std::string session = session_of(started);

  for (const std::string& target : kReads)
    EXPECT_EQ(get(port_, target, {{"Cookie", "theme=dark; " + session + "; other=1"}}).status, 200u) << target;
  EXPECT_EQ(raw_exchange(port_, upgrade_request(port_, "/api/runs/beta/live", "Cookie: " + session + "\r\n")),
            "HTTP/1.1 101 Switching Protocols");
  // The cookie reads; a change needs the header, which only the dashboard's script adds.
  const HttpResult change = request(port_, http::verb::post, "/api/runs/beta/commands", R"({"action":"pause"})",
                                    {{"Cookie", session}});
  EXPECT_EQ(change.status, 401u);
  // Another secret, the same secret under another port's name, or none: no read.
  std::string forged = session;
  forged.back() = forged.back() == '0' ? '1' : '0';
  std::string other_port = session;
  other_port.replace(0, other_port.find('='), "kiln-session-1");
  for (const std::string& cookie : {forged, other_port, name, std::string("kiln-session=") + kToken})
    EXPECT_EQ(get(port_, "/api/runs", {{"Cookie", cookie}}).status, 401u) << cookie;
}

TEST_F(ServerTest, ServedConfigsHideTheirSecrets) {
  {
    store::RunWriter writer(path());
    store::RunInfo info = store::testing_util::run_info("hooked");
    info.config_json =
        R"({"alerts":{"command":"curl https://user:pw@hooks.example/x?token=abc"},"hub":{"api_key":"k3y"},"train":{"lr":0.001}})";
    writer.create_run(info);
    writer.flush();
  }
  for (const char* target : {"/api/runs/hooked", "/api/runs?config=1", "/api/compare?runs=hooked,beta"}) {
    const HttpResult r = get(port_, target, {kAuth});
    ASSERT_EQ(r.status, 200u) << target;
    EXPECT_EQ(r.body.find(":pw@"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("abc"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("k3y"), std::string::npos) << r.body;
  }
  const auto run = get(port_, "/api/runs/hooked", {kAuth}).json();
  EXPECT_EQ(run["config"]["alerts"]["command"], "curl https://user:***@hooks.example/x?token=***");
  EXPECT_EQ(run["config"]["hub"]["api_key"], "***");
  EXPECT_EQ(run["config"]["train"]["lr"], 0.001);
}

class NoTokenTest : public ServerTest {
  void configure(ServerOptions& options) override { options.token.clear(); }
};

TEST_F(NoTokenTest, WithoutATokenReadsStayOpenAndThereIsNoSession) {
  for (const std::string& target : kReads) EXPECT_EQ(get(port_, target).status, 200u) << target;
  EXPECT_EQ(raw_exchange(port_, upgrade_request(port_, "/api/runs/beta/live")), "HTTP/1.1 101 Switching Protocols");
  const HttpResult started = start_session(port_, {});
  EXPECT_EQ(started.status, 200u);
  EXPECT_EQ(started.json()["token_required"], false);
  EXPECT_EQ(started.headers[http::field::set_cookie], "");
}

TEST(TokenAccess, TheCookieIsNamedForThePortTheBrowserAddressed) {
  const TokenAccess access("t0k");
  EXPECT_TRUE(access.required());
  const auto cookie = [&](const std::string& host) {
    const std::string set = access.session_cookie(host);
    return set.substr(0, set.find('='));
  };
  EXPECT_EQ(cookie("127.0.0.1:8080"), "kiln-session-8080");
  EXPECT_EQ(cookie("[::1]:9000"), "kiln-session-9000");
  EXPECT_EQ(cookie("[::1]"), "kiln-session");
  EXPECT_EQ(cookie("dashboard.example.org"), "kiln-session");
  Request read(http::verb::get, "/api/runs", 11);
  read.set(http::field::host, "localhost:8080");
  const std::string set = access.session_cookie("localhost:8080");
  read.set(http::field::cookie, set.substr(0, set.find(';')));
  EXPECT_TRUE(access.may_read(read));
  EXPECT_FALSE(access.may_change(read));
  read.set(http::field::host, "localhost:8081");
  EXPECT_FALSE(access.may_read(read)) << "a cookie is for the port it was set for";
  // Two servers draw two secrets.
  EXPECT_NE(TokenAccess("t0k").session_cookie("h:1"), access.session_cookie("h:1"));
  EXPECT_FALSE(TokenAccess("").required());
}

}  // namespace
}  // namespace kiln::monitor::test
