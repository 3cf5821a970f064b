// Sweeps over real HTTP against a real server and store: GET /api/sweeps (the list and its
// progress) and GET /api/sweeps/{sweep} (by id, name or prefix: the points, their runs'
// figures, the swept keys and the best point), and their bad input.
#include <gtest/gtest.h>

#include <string>

#include "monitor/server/server_fixture.h"
#include "monitor/server/test_client.h"
#include "store/schema.h"

namespace kiln::monitor::test {
namespace {

class SweepsApiTest : public ServerTest {
 protected:
  // Sweep "lr-sweep" of three points: alpha (completed), beta (live) and one not launched;
  // and an older ended sweep with none.
  void SetUp() override {
    ServerTest::SetUp();
    auto db = store::open_store(path(), store::Access::ReadWrite);
    const double now = store::unix_now();
    db->exec("INSERT INTO sweeps (id, name, created_at, ended_at, status) VALUES (1, 'width', " +
             std::to_string(now - 100) + ", " + std::to_string(now - 50) + ", 'ended')");
    db->exec("INSERT INTO sweeps (id, name, created_at, heartbeat_at, command_line, spec_json) VALUES "
             "(2, 'lr-sweep', " + std::to_string(now - 10) + ", " + std::to_string(now) +
             ", 'kiln sweep --config base.json --grid train.lr=1e-3,3e-3,1e-2', '{\"grid\":[\"train.lr\"]}')");
    db->exec(R"(INSERT INTO sweep_points (sweep_id, point, params_json, run_name) VALUES
                (2, 0, '{"train.lr":0.001}', 'alpha'), (2, 1, '{"train.lr":0.003}', 'beta'),
                (2, 2, '{"train.lr":0.01}', NULL))");
    db->exec("UPDATE runs SET sweep_id = 2, sweep_point = 0 WHERE name = 'alpha'");
    db->exec("UPDATE runs SET sweep_id = 2, sweep_point = 1 WHERE name = 'beta'");
  }
};

TEST_F(SweepsApiTest, ListsSweepsNewestFirstWithTheirProgress) {
  const HttpResult r = get(port_, "/api/sweeps", {kAuth});
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto sweeps = r.json();
  ASSERT_EQ(sweeps.size(), 2u);
  EXPECT_EQ(sweeps[0]["name"], "lr-sweep");
  EXPECT_EQ(sweeps[0]["id"], 2);
  EXPECT_EQ(sweeps[0]["status"], "live");
  EXPECT_EQ(sweeps[0]["points"], 3);
  EXPECT_EQ(sweeps[0]["launched"], 2);
  EXPECT_EQ(sweeps[0]["completed"], 1);
  EXPECT_EQ(sweeps[0]["running"], 1);
  EXPECT_EQ(sweeps[0]["failed"], 0);
  EXPECT_EQ(sweeps[1]["name"], "width");
  EXPECT_EQ(sweeps[1]["status"], "ended");
  EXPECT_TRUE(sweeps[1]["ended_at"].is_number());

  EXPECT_EQ(get(port_, "/api/sweeps?limit=1", {kAuth}).json().size(), 1u);
  for (const char* bad : {"/api/sweeps?limit=0", "/api/sweeps?limit=1001", "/api/sweeps?limit=x"})
    EXPECT_EQ(get(port_, bad, {kAuth}).status, 400u) << bad;
}

TEST_F(SweepsApiTest, ServesASweepsPointsWithTheirRunsFigures) {
  const HttpResult r = get(port_, "/api/sweeps/lr-sweep", {kAuth});
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto body = r.json();
  EXPECT_EQ(body["sweep"]["name"], "lr-sweep");
  EXPECT_EQ(body["sweep"]["command_line"], "kiln sweep --config base.json --grid train.lr=1e-3,3e-3,1e-2");
  EXPECT_EQ(body["sweep"]["spec"], nlohmann::json::parse(R"({"grid":["train.lr"]})"));
  EXPECT_EQ(body["parameters"], nlohmann::json({"train.lr"}));
  ASSERT_EQ(body["points"].size(), 3u);

  const auto& p0 = body["points"][0];
  EXPECT_EQ(p0["point"], 0);
  EXPECT_DOUBLE_EQ(p0["params"]["train.lr"].get<double>(), 0.001);
  EXPECT_EQ(p0["run_id"], alpha_);
  EXPECT_EQ(p0["run_name"], "alpha");
  EXPECT_EQ(p0["status"], "completed");
  EXPECT_EQ(p0["last_step"], 30);
  // interval(): rank r's loss is 10 / (1 + step) + 0.001 r, tokens/s 1000 (r + 1).
  EXPECT_DOUBLE_EQ(p0["final_loss"].get<double>(), 10.0 / 31 + 0.0005);
  EXPECT_DOUBLE_EQ(p0["best_loss"].get<double>(), 10.0 / 31 + 0.0005);
  EXPECT_DOUBLE_EQ(p0["final_valid_loss"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(p0["best_valid_loss"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(p0["tokens_per_s"].get<double>(), 1500.0);

  const auto& p1 = body["points"][1];
  EXPECT_EQ(p1["status"], "running");
  EXPECT_EQ(p1["last_step"], 5);
  EXPECT_TRUE(p1["final_valid_loss"].is_null());

  const auto& p2 = body["points"][2];
  EXPECT_EQ(p2["status"], "pending") << "not launched";
  EXPECT_TRUE(p2["run_id"].is_null());
  EXPECT_TRUE(p2["run_name"].is_null());
  EXPECT_TRUE(p2["final_loss"].is_null());

  EXPECT_EQ(body["best"]["point"], 0) << "the only point with a validation loss";
  EXPECT_EQ(body["best"]["metric"], "final_valid_loss");
  EXPECT_EQ(body["best"]["partial"], false) << "alpha completed";
  EXPECT_EQ(body["best"]["label"], "best");

  EXPECT_EQ(get(port_, "/api/sweeps/2", {kAuth}).json()["sweep"]["name"], "lr-sweep") << "by id";
  EXPECT_EQ(get(port_, "/api/sweeps/lr", {kAuth}).json()["sweep"]["name"], "lr-sweep") << "by prefix";
}

TEST_F(SweepsApiTest, RunsListCarriesEachRunsSweep) {
  const auto runs = get(port_, "/api/runs", {kAuth}).json()["runs"];
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& run : runs) {
    EXPECT_EQ(run["sweep_id"], 2) << run["name"];
    EXPECT_EQ(run["sweep_point"], run["name"] == "alpha" ? 0 : 1);
  }
}

TEST_F(SweepsApiTest, AnUnknownSweepIs404NamingIt) {
  const HttpResult r = get(port_, "/api/sweeps/depth", {kAuth});
  EXPECT_EQ(r.status, 404u);
  EXPECT_NE(r.json()["error"].get<std::string>().find("no sweep named 'depth'"), std::string::npos) << r.body;
  EXPECT_EQ(get(port_, "/api/sweeps/99", {kAuth}).status, 404u);
  EXPECT_EQ(request(port_, http::verb::post, "/api/sweeps/2", "{}").status, 405u);
}

}  // namespace
}  // namespace kiln::monitor::test
