// The live WebSocket: a subscriber gets a hello with where its stream starts, then every row,
// event and status change the run commits, and a reconnecting one starts where the run is.
#include <gtest/gtest.h>

#include "monitor/server/server_fixture.h"
#include "monitor/server/test_client.h"

namespace kiln::monitor::test {
namespace {

using store::testing_util::interval;
using store::testing_util::loss_of;

// The next message of a type, skipping others (a heartbeat's status, say).
nlohmann::json next_of(LiveClient& client, const std::string& type) {
  for (int i = 0; i < 20; ++i) {
    nlohmann::json message = client.next();
    if (message["type"] == type) return message;
  }
  ADD_FAILURE() << "no " << type << " message";
  return {};
}

TEST_F(ServerTest, LiveStreamPushesRowsEventsAndStatus) {
  LiveClient client(port_, "/api/runs/beta/live");
  const auto hello = client.next();
  EXPECT_EQ(hello["type"], "hello");
  EXPECT_EQ(hello["run"]["name"], "beta");
  EXPECT_EQ(hello["last_step"], 5);

  live_writer_->log_metrics(interval(6, 2));
  live_writer_->log_metrics(interval(7, 2));
  live_writer_->flush();
  std::vector<nlohmann::json> rows;
  while (rows.size() < 4) {
    const auto message = next_of(client, "metrics");
    if (message.is_null()) break;
    for (const auto& row : message["rows"]) rows.push_back(row);
  }
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0]["step"], 6);
  EXPECT_EQ(rows[3]["step"], 7);
  EXPECT_EQ(rows[3]["rank"], 1);
  EXPECT_DOUBLE_EQ(rows[3]["loss"].get<double>(), loss_of(7, 1));

  live_writer_->log_valid({7, 0, 3.25});
  live_writer_->set_status(store::RunStatus::Paused);
  live_writer_->flush();
  EXPECT_DOUBLE_EQ(next_of(client, "valid")["rows"][0]["loss"].get<double>(), 3.25);
  EXPECT_EQ(next_of(client, "events")["events"][0]["kind"], "status");
  EXPECT_EQ(next_of(client, "status")["run"]["status"], "paused");
}

// Whether the stream starts before or after step 9 depends on when the server last polled;
// either way the hello and the rows after it hold every step exactly once.
TEST_F(ServerTest, ReconnectingClientGetsEveryStepAfterItsHello) {
  {
    LiveClient first(port_, "/api/runs/beta/live");
    EXPECT_EQ(first.next()["last_step"], 5);
  }
  live_writer_->log_metrics(interval(9, 2));
  live_writer_->flush();
  LiveClient second(port_, "/api/runs/" + std::to_string(beta_) + "/live");
  const int64_t start = second.next()["last_step"].get<int64_t>();
  EXPECT_TRUE(start == 5 || start == 9) << start;
  live_writer_->log_metrics(interval(10, 2));
  live_writer_->flush();
  std::vector<int64_t> steps;
  while (steps.empty() || steps.back() < 10) {
    const auto message = next_of(second, "metrics");
    if (message.is_null()) break;
    for (const auto& row : message["rows"])
      if (row["rank"] == 0) steps.push_back(row["step"].get<int64_t>());
  }
  const std::vector<int64_t> expected = start == 5 ? std::vector<int64_t>{9, 10} : std::vector<int64_t>{10};
  EXPECT_EQ(steps, expected);
}

TEST_F(ServerTest, ManyClientsEachGetEveryRow) {
  std::vector<std::unique_ptr<LiveClient>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::make_unique<LiveClient>(port_, "/api/runs/beta/live"));
    EXPECT_EQ(clients.back()->next()["type"], "hello");
  }
  live_writer_->log_metrics(interval(6, 2));
  live_writer_->flush();
  for (auto& client : clients) EXPECT_EQ(next_of(*client, "metrics")["rows"].size(), 2u);
}

// `kiln train --serve` stops its server as soon as the run ends: the rows committed last
// still reach every client before the close.
TEST_F(ServerTest, StoppingTheServerDeliversTheLastRowsThenCloses) {
  LiveClient client(port_, "/api/runs/beta/live");
  EXPECT_EQ(client.next()["type"], "hello");
  live_writer_->log_metrics(interval(6, 2));
  live_writer_->flush();
  server_.reset();  // this thread reads only afterwards, as the process's end would leave it
  EXPECT_EQ(next_of(client, "metrics")["rows"][0]["step"], 6);
  EXPECT_THROW(client.next(), beast::system_error) << "the connection should be closed";
}

TEST_F(ServerTest, LiveUpgradeForAnUnknownRunIsRefused) {
  EXPECT_THROW(LiveClient(port_, "/api/runs/nobody/live"), beast::system_error);
  EXPECT_THROW(LiveClient(port_, "/api/runs/beta"), beast::system_error);
  EXPECT_EQ(get(port_, "/api/runs").status, 200u);
}

}  // namespace
}  // namespace kiln::monitor::test
