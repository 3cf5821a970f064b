// The caps on connections and live subscribers at once: past either the server answers 503
// with Retry-After and closes, and takes the next client once one has left. Past the budget
// for bytes waiting for clients, an answer is dropped for a 503 with Retry-After, and a live
// client is disconnected.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "monitor/server/server_fixture.h"
#include "monitor/server/test_client.h"

namespace kiln::monitor::test {
namespace {

class SessionCapsTest : public ServerTest {
 protected:
  void configure(ServerOptions& options) override {
    options.max_connections = 2;
    options.max_subscribers = 1;
  }

  // A connection that says nothing, holding one of the server's slots.
  std::unique_ptr<tcp::socket> idle_connection() {
    auto socket = std::make_unique<tcp::socket>(io_);
    socket->connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_));
    return socket;
  }

  // The status of GET /api/runs once it is no longer 503, waiting up to 5 s for the server
  // to see a client leave.
  unsigned status_once_free() {
    unsigned status = 0;
    for (int i = 0; i < 100 && (status = get(port_, "/api/runs", {kAuth}).status) == 503; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return status;
  }

  net::io_context io_;
};

TEST_F(SessionCapsTest, ConnectionsPastTheCapAreToldToComeBack) {
  auto first = idle_connection();
  auto second = idle_connection();
  const HttpResult refused = get(port_, "/api/runs", {kAuth});
  EXPECT_EQ(refused.status, 503u);
  EXPECT_EQ(refused.json()["error"],
            "the server is at its limit of 2 connections (--max-connections); try again shortly");
  EXPECT_EQ(refused.headers[http::field::retry_after], "1");
  first.reset();
  EXPECT_EQ(status_once_free(), 200u);
}

TEST_F(SessionCapsTest, SubscribersPastTheCapAreToldToComeBack) {
  const std::string target = "/api/runs/beta/live";
  auto follower = std::make_unique<LiveClient>(port_, target, Headers{kAuth});
  EXPECT_EQ(follower->next()["type"], "hello");
  EXPECT_EQ(raw_exchange(port_, upgrade_request(port_, target, kAuthLine)), "HTTP/1.1 503 Service Unavailable");
  // Plain requests are not subscribers: they still get through.
  EXPECT_EQ(get(port_, "/api/runs", {kAuth}).status, 200u);
  follower.reset();
  std::string answer;
  for (int i = 0; i < 100 && (answer = raw_exchange(port_, upgrade_request(port_, target, kAuthLine))) != "HTTP/1.1 101 Switching Protocols"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(answer, "HTTP/1.1 101 Switching Protocols");
}

class AnswerBudgetTest : public ServerTest {
 protected:
  void configure(ServerOptions& options) override { options.max_unsent_bytes = 100; }
};

TEST_F(AnswerBudgetTest, AnAnswerPastTheBudgetIsToldToComeBack) {
  const HttpResult small = get(port_, "/api/runs/beta/commands", {kAuth});
  EXPECT_EQ(small.status, 200u);
  EXPECT_LE(small.body.size(), 100u);
  const HttpResult refused = get(port_, "/api/runs", {kAuth});
  EXPECT_EQ(refused.status, 503u);
  EXPECT_EQ(refused.json()["error"], "the server is at its limit of 100 bytes waiting for clients to read them; try again shortly");
  EXPECT_EQ(refused.headers[http::field::retry_after], "1");
  // Each answer gives its share back once sent.
  EXPECT_EQ(get(port_, "/api/runs/beta/commands", {kAuth}).status, 200u);
}

// A live client's messages draw on the same budget: one whose hello does not fit is let go.
TEST_F(AnswerBudgetTest, ALiveClientWhoseMessageDoesNotFitIsDisconnected) {
  LiveClient live(port_, "/api/runs/beta/live", {kAuth});
  EXPECT_THROW(live.next(std::chrono::seconds(5)), beast::system_error);
  EXPECT_EQ(get(port_, "/api/runs/beta/commands", {kAuth}).status, 200u);
}

}  // namespace
}  // namespace kiln::monitor::test
