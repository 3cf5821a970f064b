// Web pages of other sites, in a browser on this machine, cannot use the dashboard: a Host
// that is not the server's (DNS rebinding) is refused, and so is a change or a WebSocket
// from another origin, or a change whose body is not JSON. The server here has no token, as
// on loopback by default, where nothing else stands in their way. Tools that send no Origin
// or Referer (curl, the CLI) are let through.
#include <gtest/gtest.h>

#include <string>

#include "monitor/server/server_fixture.h"
#include "monitor/server/test_client.h"

namespace kiln::monitor::test {
namespace {

using Headers = std::vector<std::pair<std::string, std::string>>;

class CrossSiteTest : public ServerTest {
 protected:
  void configure(ServerOptions& options) override {
    options.token.clear();
    options.allowed_hosts = {"Dashboard.Example.org"};
  }

  std::string own_origin() const { return "http://127.0.0.1:" + std::to_string(port_); }

  HttpResult pause(const Headers& headers) {
    return request(port_, http::verb::post, "/api/runs/beta/commands", R"({"action":"pause"})", headers);
  }

  size_t commands_of_beta() { return get(port_, "/api/runs/beta/commands").json().size(); }
};

TEST_F(CrossSiteTest, AnswersOnlyItsOwnHostNames) {
  const HttpResult rebound = get(port_, "/api/runs", {{"Host", "attacker.example:" + std::to_string(port_)}});
  EXPECT_EQ(rebound.status, 403u);
  EXPECT_EQ(rebound.json()["error"], "this server does not answer to the host 'attacker.example:" +
                                         std::to_string(port_) + "'; if that is its name, start it with --allow-host NAME");
  EXPECT_EQ(get(port_, "/", {{"Host", "attacker.example"}}).status, 403u);  // the pages too
  for (const std::string& host : {"127.0.0.1:" + std::to_string(port_), std::string("127.0.0.1"),
                                  std::string("localhost:1"), std::string("LOCALHOST"), std::string("[::1]:8080"),
                                  std::string("dashboard.example.org"), std::string("dashboard.example.org.:443")})
    EXPECT_EQ(get(port_, "/api/runs", {{"Host", host}}).status, 200u) << host;
  EXPECT_EQ(get(port_, "/api/runs", {{"Host", "other.example.org"}}).status, 403u);
  EXPECT_EQ(raw_exchange(port_, "GET /api/runs HTTP/1.0\r\n\r\n"), "HTTP/1.1 400 Bad Request");
}

TEST_F(CrossSiteTest, ChangesOnlyFromItsOwnPagesOrFromToolsThatAreNotBrowsers) {
  const HttpResult forged = pause({{"Origin", "http://attacker.example"}});
  EXPECT_EQ(forged.status, 403u);
  EXPECT_EQ(forged.json()["error"],
            "Origin 'http://attacker.example' is not this server's: only the dashboard's own pages can change runs");
  const HttpResult referred = pause({{"Referer", "http://attacker.example/page?x=1"}});
  EXPECT_EQ(referred.status, 403u);
  EXPECT_EQ(referred.json()["error"],
            "Referer 'http://attacker.example' is not this server's: only the dashboard's own pages can change runs");
  EXPECT_EQ(pause({{"Origin", "null"}}).status, 403u);                        // a sandboxed page or a file
  EXPECT_EQ(pause({{"Origin", "http://127.0.0.1:1"}}).status, 403u);          // another port is another site
  EXPECT_EQ(pause({{"Origin", "http://127.0.0.1.attacker.example"}}).status, 403u);
  EXPECT_EQ(request(port_, http::verb::delete_, "/api/runs/alpha?force=1", "", {{"Origin", "http://attacker.example"}})
                .status,
            403u);
  EXPECT_EQ(request(port_, http::verb::put, "/api/runs/alpha/notes", R"({"notes":"x"})",
                    {{"Referer", "http://attacker.example/"}})
                .status,
            403u);
  EXPECT_EQ(commands_of_beta(), 0u);
  EXPECT_EQ(get(port_, "/api/runs/alpha").status, 200u);

  EXPECT_EQ(pause({{"Origin", own_origin()}}).status, 202u);
  EXPECT_EQ(pause({{"Origin", "https://127.0.0.1:" + std::to_string(port_)}}).status, 202u);  // behind TLS
  EXPECT_EQ(pause({{"Referer", own_origin() + "/#/run/beta"}}).status, 202u);
  EXPECT_EQ(pause({}).status, 202u);  // curl
  EXPECT_EQ(pause({{"Host", "dashboard.example.org"}, {"Origin", "https://dashboard.example.org"}}).status, 202u);
  EXPECT_EQ(commands_of_beta(), 5u);
}

TEST_F(CrossSiteTest, ChangesMustBeJson) {
  // What a form or a no-preflight fetch of another page can send.
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"}) {
    const HttpResult r = pause({{"Content-Type", type}});
    EXPECT_EQ(r.status, 415u) << type;
    EXPECT_EQ(r.json()["error"], "send the body as JSON, with \"Content-Type: application/json\"");
  }
  EXPECT_EQ(commands_of_beta(), 0u);
  EXPECT_EQ(pause({{"Content-Type", "application/json; charset=utf-8"}}).status, 202u);
}

TEST_F(CrossSiteTest, LiveFeedsOnlyForItsOwnPages) {
  const std::string target = "/api/runs/beta/live";
  EXPECT_EQ(raw_exchange(port_, upgrade_request(port_, target, "Origin: http://attacker.example\r\n")),
            "HTTP/1.1 403 Forbidden");
  EXPECT_EQ(raw_exchange(port_, upgrade_request(port_, target, "Origin: " + own_origin() + "\r\n")),
            "HTTP/1.1 101 Switching Protocols");
  EXPECT_EQ(raw_exchange(port_, upgrade_request(port_, target)), "HTTP/1.1 101 Switching Protocols");
}

}  // namespace
}  // namespace kiln::monitor::test
