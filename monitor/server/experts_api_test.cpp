// The routing of a run's MoE layers over real HTTP against a real server and store:
// GET /api/runs/{run}/experts (every layer's series, one layer, a step range, the bounds,
// bad input) and the live stream's `experts` messages after hello's last_expert_step.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "monitor/server/server_fixture.h"
#include "monitor/server/test_client.h"

namespace kiln::monitor::test {
namespace {

// Layer `layer` at `step` over 4 experts; expert 0's count says the step.
store::ExpertLoad load_at(int64_t step, int layer) {
  store::ExpertLoad load;
  load.step = step;
  load.layer = layer;
  load.tokens = {100 + step, 100, 100, 100 - layer};
  load.aux_loss = 0.01 * (layer + 1);
  load.router_entropy = 1.25;
  return load;
}

void log_steps(store::RunWriter& writer, int64_t first, int64_t last, std::vector<int> layers) {
  for (int64_t step = first; step <= last; ++step) {
    std::vector<store::ExpertLoad> loads;
    for (int layer : layers) loads.push_back(load_at(step, layer));
    writer.log_expert_loads(loads);
  }
  writer.flush();
}

TEST_F(ServerTest, ServesEachLayersExpertLoadsAsColumns) {
  log_steps(*live_writer_, 1, 10, {1, 3});
  store::ExpertLoad capped = load_at(11, 3);
  capped.tokens = {300, 60, 20, 20};
  capped.dropped = {44, 0, 0, 0};
  live_writer_->log_expert_loads({load_at(11, 1), capped});
  live_writer_->flush();

  const HttpResult r = get(port_, "/api/runs/beta/experts", {kAuth});
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto body = r.json();
  EXPECT_EQ(body["layers"], nlohmann::json({1, 3}));
  EXPECT_EQ(body["last_step"], 11);
  EXPECT_EQ(body["steps_per_layer"], 500);
  ASSERT_EQ(body["series"].size(), 2u);
  const auto& layer3 = body["series"][1];
  EXPECT_EQ(layer3["layer"], 3);
  EXPECT_EQ(layer3["experts"], 4);
  ASSERT_EQ(layer3["step"].size(), 11u);
  EXPECT_EQ(layer3["step"][0], 1);
  EXPECT_EQ(layer3["tokens"][0], nlohmann::json({101, 100, 100, 97}));
  EXPECT_EQ(layer3["dropped"][0], nlohmann::json::array()) << "none dropped";
  EXPECT_EQ(layer3["tokens"][10], nlohmann::json({300, 60, 20, 20}));
  EXPECT_EQ(layer3["dropped"][10], nlohmann::json({44, 0, 0, 0}));
  EXPECT_DOUBLE_EQ(layer3["imbalance"][10].get<double>(), 3.0);  // 300 / (400 / 4)
  EXPECT_DOUBLE_EQ(layer3["imbalance"][0].get<double>(), 101.0 * 4 / 398);
  EXPECT_DOUBLE_EQ(layer3["aux_loss"][0].get<double>(), 0.04);
  EXPECT_DOUBLE_EQ(layer3["router_entropy"][0].get<double>(), 1.25);

  const auto one = get(port_, "/api/runs/beta/experts?layer=1&from=4&to=6", {kAuth}).json();
  ASSERT_EQ(one["series"].size(), 1u);
  EXPECT_EQ(one["series"][0]["layer"], 1);
  EXPECT_EQ(one["series"][0]["step"], nlohmann::json({4, 5, 6}));
  EXPECT_EQ(one["series"][0]["tokens"][2][0], 106);
  EXPECT_EQ(one["layers"], nlohmann::json({1, 3})) << "the selector's choices, whatever was asked";

  const auto sampled = get(port_, "/api/runs/beta/experts?layer=3&limit=3", {kAuth}).json();
  EXPECT_EQ(sampled["series"][0]["step"], nlohmann::json({1, 6, 11})) << "both ends and the middle";

  const auto dense = get(port_, "/api/runs/alpha/experts", {kAuth}).json();
  EXPECT_TRUE(dense["layers"].empty());
  EXPECT_TRUE(dense["series"].empty());
  EXPECT_TRUE(dense["last_step"].is_null());
  EXPECT_EQ(get(port_, "/api/runs/beta", {kAuth}).json()["latest_experts"].size(), 2u);
  EXPECT_TRUE(get(port_, "/api/runs/alpha", {kAuth}).json()["latest_experts"].empty());
}

TEST_F(ServerTest, ManyExpertsGetFewerStepsWithinTheAnswersBound) {
  // 1024 experts on each of 4 layers: 2^20 counts allow 256 steps per layer.
  for (int64_t step = 1; step <= 300; ++step) {
    std::vector<store::ExpertLoad> loads;
    for (int layer = 0; layer < 4; ++layer) {
      store::ExpertLoad load;
      load.step = step;
      load.layer = layer;
      load.tokens.assign(1024, 2);
      loads.push_back(std::move(load));
    }
    live_writer_->log_expert_loads(loads);
    // Committed as it goes: steps logged faster than the writer commits them would pass the
    // queue's capacity for expert loads, which thins them (store/write_queue.h), and the
    // test is of the answer's bound, not of the queue.
    if (step % 25 == 0) live_writer_->flush();
  }
  live_writer_->flush();
  const auto body = get(port_, "/api/runs/beta/experts?limit=2000", {kAuth}).json();
  EXPECT_EQ(body["steps_per_layer"], 256);
  ASSERT_EQ(body["series"].size(), 4u);
  EXPECT_EQ(body["series"][0]["step"].size(), 256u);
  EXPECT_EQ(body["series"][0]["step"].back(), 300);
  EXPECT_EQ(get(port_, "/api/runs/beta/experts?layer=2&limit=2000", {kAuth}).json()["series"][0]["step"].size(), 300u);
}

TEST_F(ServerTest, RefusesBadExpertQueriesInOneLine) {
  log_steps(*live_writer_, 1, 2, {0, 2});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"layer=x", "layer"},
      {"layer=-1", "layer must be from 0 to 511"},
      {"layer=512", "layer must be from 0 to 511"},
      {"layer=1", "layer 1 has no expert loads in this run (its MoE layers: 0, 2)"},
      {"from=9&to=3", "from (9) is after to (3)"},
      {"from=a", "from"},
      {"limit=0", "limit must be from 1 to 2000"},
      {"limit=2001", "limit must be from 1 to 2000"},
  };
  for (const auto& [query, error] : cases) {
    const HttpResult r = get(port_, "/api/runs/beta/experts?" + query, {kAuth});
    EXPECT_EQ(r.status, 400u) << query;
    const std::string message = r.json()["error"].get<std::string>();
    EXPECT_NE(message.find(error), std::string::npos) << query << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
  }
  const HttpResult none = get(port_, "/api/runs/alpha/experts?layer=0", {kAuth});
  EXPECT_EQ(none.status, 400u);
  EXPECT_EQ(none.json()["error"], "layer 0 has no expert loads in this run (it has none)");
  EXPECT_EQ(get(port_, "/api/runs/nosuch/experts", {kAuth}).status, 404u);
}

TEST_F(ServerTest, LiveStreamPushesNewStepsExpertLoads) {
  log_steps(*live_writer_, 1, 3, {0, 1});
  LiveClient client(port_, "/api/runs/beta/live", {kAuth});
  const auto hello = client.next();
  EXPECT_EQ(hello["type"], "hello");
  EXPECT_EQ(hello["last_expert_step"], 3);

  log_steps(*live_writer_, 4, 5, {0, 1});
  const auto message = next_of(client, "experts");
  ASSERT_EQ(message["rows"].size(), 4u);
  EXPECT_EQ(message["rows"][0]["step"], 4);
  EXPECT_EQ(message["rows"][0]["layer"], 0);
  EXPECT_EQ(message["rows"][1]["layer"], 1);
  EXPECT_EQ(message["rows"][3]["step"], 5);
  EXPECT_EQ(message["rows"][3]["tokens"], nlohmann::json({105, 100, 100, 99}));
  EXPECT_DOUBLE_EQ(message["rows"][3]["aux_loss"].get<double>(), 0.02);
}

TEST_F(ServerTest, HelloHasNoExpertStepForADenseRun) {
  LiveClient client(port_, "/api/runs/alpha/live", {kAuth});
  const auto hello = client.next();
  EXPECT_TRUE(hello["last_expert_step"].is_null());
}

}  // namespace
}  // namespace kiln::monitor::test
