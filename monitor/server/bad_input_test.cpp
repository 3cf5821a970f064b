// Malformed and unwelcome requests: each gets its 4xx status and a JSON error, and the
// server goes on answering.
#include <gtest/gtest.h>

#include <string>

#include "monitor/server/server_fixture.h"
#include "monitor/server/test_client.h"

namespace kiln::monitor::test {
namespace {

class BadInputTest : public ServerTest {
 protected:
  void TearDown() override {
    EXPECT_EQ(get(port_, "/api/runs", {kAuth}).status, 200u) << "the server stopped answering";
    ServerTest::TearDown();
  }

  void expect_error(const HttpResult& r, unsigned status, const std::string& message) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_EQ(r.json()["error"], message);
  }
};

TEST_F(BadInputTest, UnknownRunsAndPaths) {
  expect_error(get(port_, "/api/runs/gamma", {kAuth}), 404,
               "store: no run named 'gamma' in " + path() + " (it holds 2 runs; `kiln runs list` shows them)");
  expect_error(get(port_, "/api/runs/99/metrics", {kAuth}), 404, "store: no run with id 99 in " + path());
  expect_error(get(port_, "/api/compare?runs=alpha,gamma", {kAuth}), 404,
               "store: no run named 'gamma' in " + path() + " (it holds 2 runs; `kiln runs list` shows them)");
  expect_error(get(port_, "/api/compare?runs=alpha,alpha", {kAuth}), 400,
               "compare: 'alpha' and 'alpha' are the same run (id " + std::to_string(alpha_) + "); give distinct runs");
  expect_error(get(port_, "/api/nothing", {kAuth}), 404, "no such endpoint: /api/nothing");
  expect_error(get(port_, "/api/runs/alpha/metrics/extra", {kAuth}), 404, "no such endpoint: /api/runs/alpha/metrics/extra");
}

TEST_F(BadInputTest, WrongMethods) {
  expect_error(request(port_, http::verb::post, "/api/runs"), 405, "POST is not allowed here; allowed: GET");
  expect_error(request(port_, http::verb::put, "/api/runs/alpha", "", {kAuth}), 405,
               "PUT is not allowed here; allowed: GET, DELETE");
  expect_error(request(port_, http::verb::get, "/api/runs/alpha/tags"), 405, "GET is not allowed here; allowed: POST");
}

TEST_F(BadInputTest, BadQueryParameters) {
  expect_error(get(port_, "/api/runs/alpha/metrics?points=many", {kAuth}), 400, "query parameter points='many' is not an integer");
  expect_error(get(port_, "/api/runs/alpha/metrics?points=-1", {kAuth}), 400, "points must be from 0 (every row) to 100000");
  expect_error(get(port_, "/api/runs/alpha/metrics?ranks=a", {kAuth}), 400, "ranks: 'a' is not a rank number");
  expect_error(get(port_, "/api/runs?since=soon", {kAuth}), 400, "query parameter since='soon' is not a finite number");
  expect_error(get(port_, "/api/runs/alpha%zz", {kAuth}), 400, "bad percent-escape in the request target");
  EXPECT_EQ(get(port_, "/api/runs/alpha/metrics?keys=nonsense", {kAuth}).status, 400u);
  EXPECT_EQ(get(port_, "/api/runs?status=sleeping", {kAuth}).status, 400u);
}

// Each key and rank costs a query and a series: a request cannot ask for more than there
// are, for one twice, or for more series than an answer holds.
TEST_F(BadInputTest, MetricsQueriesWithinBounds) {
  expect_error(get(port_, "/api/runs/alpha/metrics?keys=loss,lr,loss", {kAuth}), 400, "keys: loss is asked for twice");
  std::string keys = "loss";
  for (int i = 0; i < 17; ++i) keys += ",loss";
  expect_error(get(port_, "/api/runs/alpha/metrics?keys=" + keys, {kAuth}), 400,
               "keys: at most 17 may be asked for at once, not 18");
  expect_error(get(port_, "/api/runs/alpha/metrics?ranks=0,1,01", {kAuth}), 400, "ranks: 1 is asked for twice");
  std::string ranks = "0";
  for (int i = 1; i <= 1024; ++i) ranks.append(",").append(std::to_string(i));
  expect_error(get(port_, "/api/runs/alpha/metrics?ranks=" + ranks, {kAuth}), 400,
               "ranks: at most 1024 may be asked for at once, not 1025");
  // Two keys of 1024 ranks: each within its bound, the series past theirs.
  expect_error(get(port_, "/api/runs/alpha/metrics?keys=loss,lr&ranks=" + ranks.substr(0, ranks.rfind(',')), {kAuth}), 400,
               "keys x ranks: at most 1024 series may be asked for at once, not 2 x 1024; ask for fewer keys or ranks "
               "at a time");
  expect_error(get(port_, "/api/runs/alpha/metrics?points=100001", {kAuth}), 400, "points must be from 0 (every row) to 100000");
}

TEST_F(BadInputTest, BadBodies) {
  const std::string target = "/api/runs/beta/commands";
  expect_error(request(port_, http::verb::post, target, "{not json", {kAuth}), 400, "the body is not valid JSON");
  expect_error(request(port_, http::verb::post, target, "[1]", {kAuth}), 400, "the body must be a JSON object");
  expect_error(request(port_, http::verb::post, target, "{}", {kAuth}), 400, "the body needs \"action\"");
  expect_error(request(port_, http::verb::post, target, R"({"action":7})", {kAuth}), 400, "\"action\" must be a string");
  EXPECT_EQ(request(port_, http::verb::post, target, R"({"action":"explode"})", {kAuth}).status, 400u);
  expect_error(request(port_, http::verb::post, target, R"({"action":"set"})", {kAuth}), 400, "the body needs \"setting\"");
  expect_error(request(port_, http::verb::post, "/api/runs/alpha/tags", R"({"add":"x"})", {kAuth}), 400,
               "\"add\" must be an array of strings");
}

TEST_F(BadInputTest, OversizedBodyAndHeader) {
  expect_error(request(port_, http::verb::post, "/api/runs/beta/commands", std::string(70000, ' '), {kAuth}), 413,
               "the body is larger than 65536 bytes");
  expect_error(request(port_, http::verb::get, "/api/runs", "", {{"X-Padding", std::string(9000, 'x')}}), 431,
               "the header is larger than 8192 bytes");
}

TEST_F(BadInputTest, MalformedHttp) {
  EXPECT_EQ(raw_exchange(port_, "GARBAGE\r\n\r\n"), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(raw_exchange(port_, "GET /api/runs HTTP/9.9\r\n\r\n"), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(raw_exchange(port_, "GET noslash HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"), "HTTP/1.1 400 Bad Request");
  // A client that connects and says nothing does not hold up anyone else.
  net::io_context io;
  tcp::socket idle(io);
  idle.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_));
  EXPECT_EQ(get(port_, "/api/runs", {kAuth}).status, 200u);
}

TEST_F(BadInputTest, LiveEndpointNeedsAWebSocket) {
  expect_error(get(port_, "/api/runs/beta/live", {kAuth}), 426, "this endpoint is a WebSocket; connect with ws://");
}

}  // namespace
}  // namespace kiln::monitor::test
