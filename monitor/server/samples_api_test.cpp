// What the run page needs beyond the curves, over real HTTP against a real server and store:
// the text generated at validation steps (GET /api/runs/{run}/samples and the live
// stream's `samples` messages), the runs with their configs for the runs table's config
// columns, and the machine's memory in the system readings.
#include <gtest/gtest.h>

#include <string>

#include "monitor/server/server_fixture.h"
#include "monitor/server/test_client.h"

namespace kiln::monitor::test {
namespace {

store::Sample sample_at(int64_t step) {
  store::Sample s;
  s.step = step;
  s.prompt = "In the beginning";
  s.text = " was the word at step " + std::to_string(step);
  s.temperature = 0.8;
  return s;
}

// The next message of a type, skipping others.
TEST_F(ServerTest, ServesTheNewestSamplesOldestFirst) {
  for (int64_t step = 1; step <= 30; ++step) live_writer_->log_samples({sample_at(step)});
  live_writer_->flush();

  const HttpResult r = get(port_, "/api/runs/beta/samples", {kAuth});
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto samples = r.json();
  ASSERT_EQ(samples.size(), 20u) << "20 by default";
  EXPECT_EQ(samples[0]["step"], 11);
  EXPECT_EQ(samples[19]["step"], 30);
  EXPECT_EQ(samples[19]["prompt"], "In the beginning");
  EXPECT_EQ(samples[19]["text"], " was the word at step 30");
  EXPECT_DOUBLE_EQ(samples[19]["temperature"].get<double>(), 0.8);

  const auto two = get(port_, "/api/runs/beta/samples?limit=2", {kAuth}).json();
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0]["step"], 29);
  const auto latest = get(port_, "/api/runs/beta", {kAuth}).json()["latest_samples"];
  ASSERT_EQ(latest.size(), 1u);
  EXPECT_EQ(latest[0]["step"], 30);
  EXPECT_EQ(latest[0]["slot"], 0);
  EXPECT_TRUE(get(port_, "/api/runs/alpha/samples", {kAuth}).json().empty());
  EXPECT_TRUE(get(port_, "/api/runs/alpha", {kAuth}).json()["latest_samples"].empty());

  for (const char* bad : {"limit=0", "limit=101", "limit=x"}) {
    const HttpResult refused = get(port_, std::string("/api/runs/beta/samples?") + bad, {kAuth});
    EXPECT_EQ(refused.status, 400u) << bad;
    EXPECT_NE(refused.json()["error"].get<std::string>().find("limit"), std::string::npos) << refused.body;
  }
  const HttpResult unknown = get(port_, "/api/runs/nosuch/samples", {kAuth});
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_NE(unknown.json()["error"].get<std::string>().find("nosuch"), std::string::npos);
}

TEST_F(ServerTest, LiveStreamPushesNewSamples) {
  live_writer_->log_samples({sample_at(5)});
  live_writer_->flush();
  LiveClient client(port_, "/api/runs/beta/live", {kAuth});
  const auto hello = client.next();
  EXPECT_EQ(hello["type"], "hello");
  EXPECT_EQ(hello["last_sample_step"], 5);

  // A step sampled after two prompts: both arrive, in one message, in their order.
  store::Sample second = sample_at(10);
  second.slot = 1;
  second.prompt = "And God said";
  live_writer_->log_samples({sample_at(10), second});
  live_writer_->flush();
  const auto message = next_of(client, "samples");
  ASSERT_EQ(message["rows"].size(), 2u);
  EXPECT_EQ(message["rows"][0]["step"], 10);
  EXPECT_EQ(message["rows"][0]["text"], " was the word at step 10");
  EXPECT_EQ(message["rows"][1]["slot"], 1);
  EXPECT_EQ(message["rows"][1]["prompt"], "And God said");
}

TEST_F(ServerTest, ListsRunsWithTheirConfigsWhenAsked) {
  const auto plain = get(port_, "/api/runs", {kAuth}).json()["runs"];
  EXPECT_FALSE(plain[0].contains("config")) << "configs are large: only when asked";
  const auto runs = get(port_, "/api/runs?config=1", {kAuth}).json()["runs"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["name"], "beta");
  EXPECT_DOUBLE_EQ(runs[0]["config"]["train"]["lr"].get<double>(), 0.001);
  EXPECT_EQ(runs[1]["config"]["model"]["n_layer"], 2);
}

TEST_F(ServerTest, SystemReadingsCarryTheMachinesMemory) {
  store::SystemRow row;
  row.rank = 0;
  row.cpu_percent = 150;
  row.rss_bytes = int64_t{1} << 30;
  row.host_mem_used = int64_t{6} << 30;
  row.host_mem_total = int64_t{16} << 30;
  live_writer_->log_system({row});
  live_writer_->flush();
  const auto system = get(port_, "/api/runs/beta/system", {kAuth}).json();
  ASSERT_EQ(system.size(), 1u);
  EXPECT_EQ(system[0]["host_mem_used"], int64_t{6} << 30);
  EXPECT_EQ(system[0]["host_mem_total"], int64_t{16} << 30);
  EXPECT_EQ(system[0]["rss_bytes"], int64_t{1} << 30);
}

}  // namespace
}  // namespace kiln::monitor::test
