// The live WebSocket: a subscriber gets a hello with where its stream starts, then every row,
// event and status change the run commits, and a reconnecting one starts where the run is.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "monitor/server/server_fixture.h"
#include "monitor/server/test_client.h"

namespace kiln::monitor::test {
namespace {

using store::testing_util::interval;
using store::testing_util::loss_of;

// The next message of a type, skipping others (a heartbeat's status, say).
TEST_F(ServerTest, LiveStreamPushesRowsEventsAndStatus) {
  LiveClient client(port_, "/api/runs/beta/live", {kAuth});
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
    EXPECT_FALSE(message.contains("spread")) << "a step of 2 ranks is narrow: every rank's row, no spread";
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
    LiveClient first(port_, "/api/runs/beta/live", {kAuth});
    EXPECT_EQ(first.next()["last_step"], 5);
  }
  live_writer_->log_metrics(interval(9, 2));
  live_writer_->flush();
  LiveClient second(port_, "/api/runs/" + std::to_string(beta_) + "/live", {kAuth});
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

// A rewind past a loss spike forgets the steps after its checkpoint: the stream says so first,
// then carries those steps again as the run trains them anew.
TEST_F(ServerTest, ARewindComesFirstAndTheStepsTrainedAgainFollowIt) {
  LiveClient client(port_, "/api/runs/beta/live", {kAuth});
  EXPECT_EQ(client.next()["last_step"], 5);
  for (int64_t step = 6; step <= 9; ++step) live_writer_->log_metrics(interval(step, 2));
  live_writer_->flush();
  for (int64_t last = 0; last < 9;) {
    const auto message = next_of(client, "metrics");
    ASSERT_FALSE(message.is_null());
    last = message["rows"].back()["step"].get<int64_t>();
  }
  store::Rewind back;
  back.number = 1;
  back.spike_step = 8;
  back.from_step = 9;
  back.to_step = 6;
  back.first_skipped_batch = 7;
  back.skipped_batches = 20;
  back.message = "from step 9 back to step 6 past the loss spike at step 8, skipping batches 7-26 of the data; rewind 1 of 3";
  live_writer_->log_rewind(back);
  for (int64_t step : {7, 8}) {
    std::vector<store::MetricRow> rows = interval(step, 2);
    for (store::MetricRow& row : rows) row.loss = 0.5;
    live_writer_->log_metrics(rows);
  }
  live_writer_->flush();
  const auto rewind = next_of(client, "rewind");
  ASSERT_FALSE(rewind.is_null());
  EXPECT_EQ(rewind["rewind"]["to_step"], 6);
  EXPECT_EQ(rewind["rewind"]["message"], back.message);
  EXPECT_EQ(rewind["rewind"]["losses"]["step"], nlohmann::json::parse("[7, 8, 9]"));
  EXPECT_DOUBLE_EQ(rewind["rewind"]["losses"]["loss"][2].get<double>(), loss_of(9, 0));
  std::vector<int64_t> steps;
  while (steps.size() < 4) {
    const auto message = next_of(client, "metrics");
    if (message.is_null()) break;
    for (const auto& row : message["rows"]) {
      steps.push_back(row["step"].get<int64_t>());
      EXPECT_DOUBLE_EQ(row["loss"].get<double>(), 0.5);
    }
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{7, 7, 8, 8}));
  // The run's page reads the rewind, with its abandoned losses, from the run's details.
  const nlohmann::json details = get(port_, "/api/runs/beta", {kAuth}).json();
  ASSERT_EQ(details["rewinds"].size(), 1u);
  EXPECT_EQ(details["rewinds"][0]["spike_step"], 8);
  EXPECT_EQ(details["rewinds"][0]["losses"]["step"].size(), 3u);
  EXPECT_EQ(details["last_step"], 8);
}

// A step of 12 ranks, wide (store/metric_spread.h): rank 7 the slowest in forward time,
// rank 4 in throughput.
std::vector<store::MetricRow> twelve_ranks(int64_t step) {
  std::vector<store::MetricRow> rows = interval(step, 12);
  for (store::MetricRow& row : rows) {
    row.fwd_ms = row.rank == 7 ? 14 : 2;
    if (row.rank == 4) row.tokens_per_s = 300;
  }
  return rows;
}

// Beta, 2 ranks a step so far, turns wide: its wide step comes as rank 0's row and the
// step's spread across ranks, as the REST API answers it; a narrow step after it comes whole.
TEST_F(ServerTest, AWideStepIsRankZerosRowAndTheSpreadAcrossRanks) {
  LiveClient client(port_, "/api/runs/beta/live", {kAuth});
  EXPECT_EQ(client.next()["last_step"], 5);
  live_writer_->log_metrics(twelve_ranks(6));
  live_writer_->flush();
  const auto wide = next_of(client, "metrics");
  ASSERT_EQ(wide["rows"].size(), 1u) << wide.dump();
  EXPECT_EQ(wide["rows"][0]["rank"], 0);
  EXPECT_EQ(wide["rows"][0]["step"], 6);
  EXPECT_DOUBLE_EQ(wide["rows"][0]["loss"].get<double>(), loss_of(6, 0));
  EXPECT_FALSE(wide["spread"].contains("loss"));  // the same on every rank: rank 0's row says it
  const auto& fwd = wide["spread"]["fwd_ms"];
  EXPECT_EQ(fwd["step"], nlohmann::json({6}));
  EXPECT_EQ(fwd["ranks"], nlohmann::json({12}));
  EXPECT_DOUBLE_EQ(fwd["min"][0].get<double>(), 2);
  EXPECT_DOUBLE_EQ(fwd["max"][0].get<double>(), 14);
  EXPECT_DOUBLE_EQ(fwd["mean"][0].get<double>(), (11 * 2 + 14) / 12.0);
  EXPECT_EQ(fwd["slowest_rank"][0], 7);
  EXPECT_DOUBLE_EQ(fwd["slowest"][0].get<double>(), 14);
  // A throughput's slow end is its min: 1000 x (rank + 1) but rank 4's 300.
  const auto& rate = wide["spread"]["tokens_per_s"];
  EXPECT_DOUBLE_EQ(rate["min"][0].get<double>(), 300);
  EXPECT_DOUBLE_EQ(rate["max"][0].get<double>(), 12000);
  EXPECT_DOUBLE_EQ(rate["mean"][0].get<double>(), (78000 - 5000 + 300) / 12.0);
  EXPECT_EQ(rate["slowest_rank"][0], 4);
  // The shape is the REST API's, a point a step.
  const auto history = get(port_, "/api/runs/beta/metrics?keys=fwd_ms,tokens_per_s&from=6&to=6", {kAuth}).json();
  EXPECT_EQ(history["spread"]["fwd_ms"], fwd);
  EXPECT_EQ(history["spread"]["tokens_per_s"], rate);

  live_writer_->log_metrics(interval(7, 2));
  live_writer_->flush();
  const auto narrow = next_of(client, "metrics");
  EXPECT_EQ(narrow["rows"].size(), 2u);
  EXPECT_FALSE(narrow.contains("spread"));
}

TEST_F(ServerTest, ManyClientsEachGetEveryRow) {
  std::vector<std::unique_ptr<LiveClient>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::make_unique<LiveClient>(port_, "/api/runs/beta/live", Headers{kAuth}));
    EXPECT_EQ(clients.back()->next()["type"], "hello");
  }
  live_writer_->log_metrics(interval(6, 2));
  live_writer_->flush();
  for (auto& client : clients) EXPECT_EQ(next_of(*client, "metrics")["rows"].size(), 2u);
}

// `kiln train --serve` stops its server as soon as the run ends: the rows committed last
// still reach every client before the close.
TEST_F(ServerTest, StoppingTheServerDeliversTheLastRowsThenCloses) {
  LiveClient client(port_, "/api/runs/beta/live", {kAuth});
  EXPECT_EQ(client.next()["type"], "hello");
  live_writer_->log_metrics(interval(6, 2));
  live_writer_->flush();
  server_.reset();  // this thread reads only afterwards, as the process's end would leave it
  EXPECT_EQ(next_of(client, "metrics")["rows"][0]["step"], 6);
  EXPECT_THROW(client.next(), beast::system_error) << "the connection should be closed";
}

// The send queue's bound (docs/dashboard.md, "Limits"): a client that stops reading is
// disconnected once its socket's buffers are full and its queue holds max_queued_messages,
// so the server never holds more for it; a client that keeps up meanwhile gets every row.
class SlowClientTest : public ServerTest {
 protected:
  void configure(ServerOptions& options) override { options.max_queued_messages = 4; }
};

TEST_F(SlowClientTest, ClientThatStopsReadingIsDroppedWhileOthersGetEveryRow) {
  // Each chunk becomes one metrics message of about 0.8 MB: 13 MB in all, more than the two
  // sockets' buffers (a few MB at most on Linux) and the 4 queued messages hold together.
  constexpr int kChunks = 16, kStepsPerChunk = 1000, kRanks = 2;
  constexpr int64_t kLast = 5 + kChunks * kStepsPerChunk;
  LiveClient stalled(port_, "/api/runs/beta/live", {kAuth}, 4096);
  LiveClient keeping_up(port_, "/api/runs/beta/live", {kAuth});
  ASSERT_EQ(keeping_up.next()["type"], "hello");

  std::vector<int64_t> steps;  // rank 0's steps as the reading client got them
  std::thread reader([&] {
    while (steps.empty() || steps.back() < kLast) {
      const auto message = next_of(keeping_up, "metrics");
      if (message.is_null()) return;
      for (const auto& row : message["rows"])
        if (row["rank"] == 0) steps.push_back(row["step"].get<int64_t>());
    }
  });
  int64_t step = 5;
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    for (int i = 0; i < kStepsPerChunk; ++i) live_writer_->log_metrics(interval(++step, kRanks));
    live_writer_->flush();
    // A poll in between, so that each chunk is a message of its own.
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
  }
  reader.join();
  ASSERT_EQ(steps.size(), static_cast<size_t>(kLast - 5));
  for (size_t i = 0; i < steps.size(); ++i) ASSERT_EQ(steps[i], static_cast<int64_t>(6 + i));

  // The stalled client finds what its buffers held, in order, then the connection's end,
  // before the last step.
  int64_t next_step = 6;
  bool ended = false;
  try {
    for (;;) {
      const auto message = stalled.next(std::chrono::seconds(5));
      if (message["type"] != "metrics") continue;
      for (const auto& row : message["rows"]) {
        if (row["rank"] == 0) {
          ASSERT_EQ(row["step"].get<int64_t>(), next_step++);
        }
      }
    }
  } catch (const beast::system_error&) {
    ended = true;
  } catch (const std::runtime_error&) {
    // No message in time: still connected, which the expectation below reports.
  }
  EXPECT_TRUE(ended) << "the stalled client was still connected after step " << next_step - 1;
  EXPECT_LT(next_step - 1, kLast);
  EXPECT_EQ(get(port_, "/api/runs", {kAuth}).status, 200u);
}

// The queue's bound in bytes: a client that stops reading is disconnected once what waits for
// it passes max_queued_bytes, long before max_queued_messages; one that reads gets every
// message, each near the bound, since a message into an empty queue always goes.
class SlowClientBytesTest : public ServerTest {
 protected:
  void configure(ServerOptions& options) override {
    options.max_queued_bytes = size_t{3} << 20;
    options.poll_interval = std::chrono::milliseconds(10);
  }
};

// A step's samples as large as the store keeps them: the most prompts, 2 x 16 KiB of text each.
std::vector<store::Sample> large_samples(int64_t step) {
  std::vector<store::Sample> samples(store::kMaxSamplesPerStep);
  for (size_t slot = 0; slot < samples.size(); ++slot) {
    samples[slot].step = step;
    samples[slot].slot = static_cast<int>(slot);
    samples[slot].prompt = std::string(store::kMaxSampleBytes, 'p');
    samples[slot].text = std::string(store::kMaxSampleBytes, 't');
  }
  return samples;
}

TEST_F(SlowClientBytesTest, ClientThatStopsReadingIsDroppedPastTheBytes) {
  // Each batch is a samples message of 64 x 32 KiB, 2 MiB: 16 MiB in all, more than the two
  // sockets' buffers (a few MB at most on Linux) and the 3 MiB a queue may hold.
  constexpr int kBatches = 8, kStepsPerBatch = 4;
  constexpr size_t kSamplesPerBatch = kStepsPerBatch * store::kMaxSamplesPerStep;
  LiveClient stalled(port_, "/api/runs/beta/live", {kAuth}, 4096);
  LiveClient keeping_up(port_, "/api/runs/beta/live", {kAuth});
  ASSERT_EQ(keeping_up.next()["type"], "hello");
  int64_t step = 0;
  for (int batch = 0; batch < kBatches; ++batch) {
    for (int i = 0; i < kStepsPerBatch; ++i) live_writer_->log_samples(large_samples(++step));
    live_writer_->flush();
    // The reading client gets every sample, each batch before the next is written: a message,
    // or a few where the writer committed the batch in parts.
    for (size_t got = 0; got < kSamplesPerBatch;) {
      const auto message = next_of(keeping_up, "samples");
      ASSERT_FALSE(message.is_null());
      got += message["rows"].size();
      if (got == kSamplesPerBatch) {
        ASSERT_EQ(message["rows"].back()["step"], step);
      }
    }
  }
  // The stalled client finds what its buffers held, then the connection's end, before the
  // last batch.
  int64_t last_step = 0;
  bool ended = false;
  try {
    for (;;) {
      const auto message = stalled.next(std::chrono::seconds(5));
      if (message["type"] == "samples") last_step = message["rows"].back()["step"].get<int64_t>();
    }
  } catch (const beast::system_error&) {
    ended = true;
  } catch (const std::runtime_error&) {
    // No message in time: still connected, which the expectation below reports.
  }
  EXPECT_TRUE(ended) << "the stalled client was still connected after step " << last_step;
  EXPECT_LT(last_step, step);
  EXPECT_EQ(get(port_, "/api/runs", {kAuth}).status, 200u);
}

TEST_F(ServerTest, LiveUpgradeForAnUnknownRunIsRefused) {
  EXPECT_THROW(LiveClient(port_, "/api/runs/nobody/live", {kAuth}), beast::system_error);
  EXPECT_THROW(LiveClient(port_, "/api/runs/beta", {kAuth}), beast::system_error);
  EXPECT_EQ(get(port_, "/api/runs", {kAuth}).status, 200u);
}

}  // namespace
}  // namespace kiln::monitor::test
