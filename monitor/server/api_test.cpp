// The JSON API over real HTTP against a real server and store.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "monitor/server/server_fixture.h"
#include "monitor/server/server_limits.h"
#include "monitor/server/test_client.h"
#include "store/commands.h"
#include "store/database.h"
#include "store/export.h"
#include "store/json_rows.h"
#include "store/metric_fields.h"
#include "store/run_queries.h"
#include "store/schema.h"

namespace kiln::monitor::test {
namespace {

using store::testing_util::loss_of;

TEST_F(ServerTest, ListsRunsNewestFirstWithFilters) {
  const HttpResult all = get(port_, "/api/runs", {kAuth});
  ASSERT_EQ(all.status, 200u);
  EXPECT_EQ(all.content_type, "application/json");
  const auto runs = all.json()["runs"];
  EXPECT_EQ(all.json()["total"], 2);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["name"], "beta");
  EXPECT_EQ(runs[0]["status"], "running");
  EXPECT_EQ(runs[1]["name"], "alpha");
  EXPECT_EQ(runs[1]["status"], "completed");
  EXPECT_EQ(runs[1]["steps"], 100);
  EXPECT_DOUBLE_EQ(runs[1]["loss"].get<double>(), (loss_of(30, 0) + loss_of(30, 1)) / 2);

  EXPECT_EQ(get(port_, "/api/runs?status=completed", {kAuth}).json()["runs"].size(), 1u);
  EXPECT_EQ(get(port_, "/api/runs?tag=baseline", {kAuth}).json()["runs"][0]["name"], "alpha");
  EXPECT_EQ(get(port_, "/api/runs?name=et", {kAuth}).json()["runs"][0]["name"], "beta");
  EXPECT_EQ(get(port_, "/api/runs?limit=1", {kAuth}).json()["runs"].size(), 1u);
  // Config values, comma-separated, all holding (beta's config sets train.lr 0.001, n_layer 2).
  const auto where = get(port_, "/api/runs?where=train.lr=1e-3,model.n_layer=2", {kAuth});
  ASSERT_EQ(where.json()["runs"].size(), 1u) << where.body;
  EXPECT_EQ(where.json()["runs"][0]["name"], "beta");
  EXPECT_TRUE(get(port_, "/api/runs?where=train.lr=0.002", {kAuth}).json()["runs"].empty());
  const auto bad = get(port_, "/api/runs?where=train.lr", {kAuth});
  EXPECT_EQ(bad.status, 400u);
  EXPECT_NE(bad.body.find("is not KEY=VALUE with a dotted config key"), std::string::npos) << bad.body;
}

// The runs table's questions, answered by the server over every run: an order, a page, groups
// and a search (alpha: lr 3e-4, tag baseline, completed; beta: lr 1e-3, no tags, running).
// store/run_table_test.cpp holds the orders' finer points (absent values, text and numbers).
TEST_F(ServerTest, SortsPagesGroupsAndSearchesRuns) {
  const auto names = [&](const std::string& query) {
    std::vector<std::string> found;
    const nlohmann::json answer = get(port_, "/api/runs?" + query, {kAuth}).json();
    for (const auto& run : answer["runs"]) found.push_back(run["name"]);
    return found;
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(names("sort=name&order=asc"), (Names{"alpha", "beta"}));
  EXPECT_EQ(names("sort=name"), (Names{"beta", "alpha"}));
  EXPECT_EQ(names("sort=config:train.lr&order=asc"), (Names{"alpha", "beta"}));
  // beta's latest loss (step 5) is above alpha's (step 30).
  EXPECT_EQ(names("sort=loss&order=asc"), (Names{"alpha", "beta"}));
  EXPECT_EQ(names("sort=loss&order=desc"), (Names{"beta", "alpha"}));
  const auto page = get(port_, "/api/runs?sort=name&order=asc&offset=1&limit=1", {kAuth}).json();
  EXPECT_EQ(page["total"], 2);
  EXPECT_EQ(page["offset"], 1);
  ASSERT_EQ(page["runs"].size(), 1u);
  EXPECT_EQ(page["runs"][0]["name"], "beta");
  EXPECT_TRUE(get(port_, "/api/runs?offset=5", {kAuth}).json()["runs"].empty());

  // Groups in order of their values, absent last; each run says its group.
  const auto by_tag = get(port_, "/api/runs?group=tag", {kAuth}).json();
  EXPECT_EQ(by_tag["groups"], nlohmann::json::parse(R"j([{"label": "baseline", "runs": 1}, {"label": "(no tags)", "runs": 1}])j"));
  EXPECT_EQ(by_tag["runs"][0]["group"], "baseline");
  EXPECT_EQ(by_tag["runs"][1]["name"], "beta");
  const auto by_lr = get(port_, "/api/runs?group=train.lr&sort=name", {kAuth}).json();
  EXPECT_EQ(by_lr["groups"], nlohmann::json::parse(R"([{"label": "0.0003", "runs": 1}, {"label": "0.001", "runs": 1}])"));
  EXPECT_FALSE(get(port_, "/api/runs", {kAuth}).json().contains("groups"));

  // Search words: in the name or a tag, any case; KEY=VALUE words match a config value.
  EXPECT_EQ(names("q=BASE"), (Names{"alpha"}));
  EXPECT_EQ(names("q=et"), (Names{"beta"}));
  EXPECT_EQ(names("q=a%20train.lr%3D0.001"), (Names{"beta"}));
  EXPECT_TRUE(names("q=alpha%20beta").empty()) << "every word must match";

  const auto keys = get(port_, "/api/config-keys", {kAuth}).json()["keys"];
  EXPECT_EQ(keys, nlohmann::json({"model.n_layer", "train.lr", "train.steps"}));

  const std::vector<std::pair<std::string, std::string>> refused = {
      {"sort=speed", "cannot sort by 'speed': sort by one of status, name"},
      {"sort=config:a..b", "is not KEY=VALUE with a dotted config key"},
      {"order=up", "order must be asc or desc"},
      {"group=a..b", "is not KEY=VALUE with a dotted config key"},
      {"limit=0", "limit must be from 1 to 1000"},
      {"limit=1001", "limit must be from 1 to 1000"},
      {"offset=-1", "offset must be 0 or more"}};
  for (const auto& [query, message] : refused) {
    const HttpResult r = get(port_, "/api/runs?" + query, {kAuth});
    EXPECT_EQ(r.status, 400u) << query;
    EXPECT_NE(r.body.find(message), std::string::npos) << query << ": " << r.body;
  }
}

TEST_F(ServerTest, ShowsOneRunByIdOrName) {
  const auto by_name = get(port_, "/api/runs/alpha", {kAuth}).json();
  EXPECT_EQ(by_name["id"], alpha_);
  EXPECT_EQ(by_name["config"]["train"]["steps"], 100);
  ASSERT_EQ(by_name["latest_metrics"].size(), 2u);
  EXPECT_EQ(by_name["latest_metrics"][1]["step"], 30);
  EXPECT_DOUBLE_EQ(by_name["latest_valid"]["loss"].get<double>(), 2.5);
  EXPECT_EQ(get(port_, "/api/runs/" + std::to_string(alpha_), {kAuth}).json()["name"], "alpha");
  // The run's plan, for the run page's planned-beside-measured line; beta has none.
  EXPECT_DOUBLE_EQ(by_name["planned_step_s"].get<double>(), 0.0125);
  EXPECT_EQ(by_name["planned_memory_bytes"], int64_t{3} << 20);
  const auto beta = get(port_, "/api/runs/beta", {kAuth}).json();
  EXPECT_TRUE(beta.contains("planned_step_s") && beta["planned_step_s"].is_null()) << beta.dump();
  EXPECT_TRUE(beta.contains("planned_memory_bytes") && beta["planned_memory_bytes"].is_null()) << beta.dump();
}

TEST_F(ServerTest, ServesSeriesForKeysRanksAndStepRange) {
  const HttpResult r = get(port_, "/api/runs/alpha/metrics?keys=loss,lr&ranks=1&from=20&to=30", {kAuth});
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto series = r.json()["series"];
  ASSERT_EQ(series["loss"].size(), 1u);
  const auto& rank1 = series["loss"][0];
  EXPECT_EQ(rank1["rank"], 1);
  EXPECT_EQ(rank1["step"], nlohmann::json({20, 30}));
  EXPECT_DOUBLE_EQ(rank1["value"][0].get<double>(), loss_of(20, 1));
  EXPECT_DOUBLE_EQ(rank1["value"][1].get<double>(), loss_of(30, 1));
  EXPECT_DOUBLE_EQ(series["lr"][0]["value"][0].get<double>(), 1e-4);

  // Downsampled to one point: the last value, with the bucket's extremes.
  const auto one = get(port_, "/api/runs/alpha/metrics?ranks=0&points=1", {kAuth}).json()["series"]["loss"][0];
  ASSERT_EQ(one["step"].size(), 1u);
  EXPECT_DOUBLE_EQ(one["value"][0].get<double>(), loss_of(30, 0));
  EXPECT_DOUBLE_EQ(one["max"][0].get<double>(), loss_of(10, 0));
  EXPECT_DOUBLE_EQ(one["min"][0].get<double>(), loss_of(30, 0));
}

// points=0 asks for every row, but no more than the cap: a range longer than that many steps
// comes downsampled to it rather than read whole into memory.
TEST_F(ServerTest, EveryRowIsCappedAtTheMostPoints) {
  for (int64_t step : {6, 7, 300005}) live_writer_->log_metrics(store::testing_util::interval(step, 2));
  live_writer_->flush();
  const auto rank0 = get(port_, "/api/runs/beta/metrics?ranks=0&points=0", {kAuth}).json()["series"]["loss"][0];
  // 300000 steps in buckets of 4: steps 5, 6 and 7 share the first.
  EXPECT_EQ(rank0["step"], nlohmann::json({7, 300005}));
  EXPECT_DOUBLE_EQ(rank0["max"][0].get<double>(), loss_of(5, 0));
  const auto short_range = get(port_, "/api/runs/beta/metrics?ranks=0&points=0&to=7", {kAuth}).json()["series"]["loss"][0];
  EXPECT_EQ(short_range["step"], nlohmann::json({5, 6, 7}));
}

// One answer's points are shared among its series: many keys and ranks get fewer each.
TEST(AnswerPointsTest, SeriesShareTheAnswersPoints) {
  EXPECT_EQ(limits::points_per_series(1000, 1), 1000u);
  EXPECT_EQ(limits::points_per_series(100000, 2), 100000u);
  EXPECT_EQ(limits::points_per_series(100000, 17 * 8), 1927u);  // 2^18 / 136
  EXPECT_EQ(limits::points_per_series(1000, 1024), 256u);
  EXPECT_EQ(limits::points_per_series(1000, size_t{1} << 20), 1u);  // never none
}

// The export streams in chunks, each read on its own, and says the same as `kiln runs
// export`. Three ranks a step: chunks of 1024 rows end mid-step.
TEST_F(ServerTest, StreamsTheCsvExportInChunks) {
  for (int64_t step = 6; step < 1506; ++step) live_writer_->log_metrics(store::testing_util::interval(step, 3));
  live_writer_->flush();
  const HttpResult csv = get(port_, "/api/runs/beta/export.csv", {kAuth});
  ASSERT_EQ(csv.status, 200u);
  EXPECT_EQ(csv.headers[http::field::transfer_encoding], "chunked");
  EXPECT_EQ(csv.headers[http::field::content_disposition], "attachment; filename=\"beta.csv\"");
  const auto db = store::open_store(path(), store::Access::ReadOnly);
  std::ostringstream expected;
  store::write_metrics_csv(*db, beta_, expected);
  EXPECT_EQ(std::count(csv.body.begin(), csv.body.end(), '\n'), 1 + 2 + 1500 * 3);
  EXPECT_EQ(csv.body, expected.str());
  EXPECT_EQ(get(port_, "/api/runs/beta", {kAuth}).status, 200u);  // the connection pool is whole again
}

TEST_F(ServerTest, ServesValidationEventsAndCsv) {
  const auto valid = get(port_, "/api/runs/alpha/valid", {kAuth}).json();
  ASSERT_EQ(valid.size(), 1u);
  EXPECT_EQ(valid[0]["step"], 30);
  EXPECT_FALSE(get(port_, "/api/runs/alpha/events", {kAuth}).json().empty());

  const HttpResult csv = get(port_, "/api/runs/alpha/export.csv", {kAuth});
  ASSERT_EQ(csv.status, 200u);
  EXPECT_EQ(csv.content_type, "text/csv; charset=utf-8");
  EXPECT_EQ(csv.body.substr(0, csv.body.find('\n')), store::metrics_csv_header());
  EXPECT_EQ(std::count(csv.body.begin(), csv.body.end(), '\n'), 1 + 3 * 2);
}

TEST_F(ServerTest, ComparesRuns) {
  const HttpResult r = get(port_, "/api/compare?runs=alpha,beta", {kAuth});
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto c = r.json();
  ASSERT_EQ(c["summary"].size(), 2u);
  EXPECT_EQ(c["summary"][0]["logged_steps"], 3);
  EXPECT_EQ(c["summary"][1]["logged_steps"], 1);
  ASSERT_EQ(c["config_diff"].size(), 1u);
  EXPECT_EQ(c["config_diff"][0]["key"], "train.lr");
  EXPECT_EQ(get(port_, "/api/compare?runs=alpha", {kAuth}).status, 400u);
}

TEST_F(ServerTest, QueuesCommandsOnlyWithTheToken) {
  const std::string pause = R"({"action":"pause"})";
  EXPECT_EQ(request(port_, http::verb::post, "/api/runs/beta/commands", pause).status, 401u);
  const auto wrong = std::pair<std::string, std::string>{"Authorization", "Bearer nope"};
  EXPECT_EQ(request(port_, http::verb::post, "/api/runs/beta/commands", pause, {wrong}).status, 401u);

  const HttpResult queued = request(port_, http::verb::post, "/api/runs/beta/commands", pause, {kAuth});
  ASSERT_EQ(queued.status, 202u) << queued.body;
  EXPECT_EQ(queued.json()["action"], "pause");
  EXPECT_EQ(queued.json()["status"], "pending");

  const HttpResult set = request(port_, http::verb::post, "/api/runs/beta/commands",
                                 R"({"action":"set","setting":"train.lr=0.0001"})", {kAuth});
  ASSERT_EQ(set.status, 202u) << set.body;

  const auto db = store::open_store(path(), store::Access::ReadOnly);
  const auto pending = store::pending_commands(*db, beta_);
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].action, store::CommandAction::Pause);
  EXPECT_EQ(pending[1].argument, "train.lr=0.0001");

  const HttpResult ended = request(port_, http::verb::post, "/api/runs/alpha/commands", pause, {kAuth});
  EXPECT_EQ(ended.status, 409u);
  EXPECT_EQ(ended.json()["error"], "run 1 is completed; only a running or paused run takes commands");
  const HttpResult bad_setting = request(port_, http::verb::post, "/api/runs/beta/commands",
                                         R"({"action":"set","setting":"model.n_layer=3"})", {kAuth});
  EXPECT_EQ(bad_setting.status, 400u);
  EXPECT_EQ(bad_setting.json()["error"], "unknown setting 'model.n_layer=3'");
}

// The server checks a setting against the run's own config, as `kiln runs set` does, and
// lets it past its range only when the request says so.
TEST_F(ServerTest, ASettingIsCheckedAgainstTheRunsConfigUnlessForced) {
  const std::string target = "/api/runs/beta/commands";
  const HttpResult wild = request(port_, http::verb::post, target, R"({"action":"set","setting":"train.lr=1e300"})",
                                  {kAuth});
  EXPECT_EQ(wild.status, 400u);
  EXPECT_EQ(wild.json()["error"],
            R"(out of range for the run's config {"train":{"lr":0.001,"steps":100},"model":{"n_layer":2}})");
  const HttpResult bad_force = request(port_, http::verb::post, target,
                                       R"({"action":"set","setting":"train.lr=1e300","force":"yes"})", {kAuth});
  EXPECT_EQ(bad_force.status, 400u);
  EXPECT_EQ(bad_force.json()["error"], "\"force\" must be true or false");
  EXPECT_EQ(request(port_, http::verb::post, target, R"({"action":"pause","force":true})", {kAuth}).json()["error"],
            "only \"set\" takes a \"setting\" and \"force\"");
  const HttpResult forced = request(port_, http::verb::post, target,
                                    R"({"action":"set","setting":"train.lr=1e300","force":true})", {kAuth});
  ASSERT_EQ(forced.status, 202u) << forced.body;
  EXPECT_EQ(forced.json()["argument"], "train.lr=1e300");
}

TEST_F(ServerTest, EditsTagsAndNotes) {
  const HttpResult tags = request(port_, http::verb::post, "/api/runs/alpha/tags",
                                  R"({"add":["best"],"remove":["baseline"]})", {kAuth});
  ASSERT_EQ(tags.status, 200u) << tags.body;
  EXPECT_EQ(tags.json()["tags"], nlohmann::json({"best"}));
  ASSERT_EQ(request(port_, http::verb::put, "/api/runs/alpha/notes", R"({"notes":"keep"})", {kAuth}).status, 200u);
  EXPECT_EQ(get(port_, "/api/runs/alpha", {kAuth}).json()["notes"], "keep");
  EXPECT_EQ(request(port_, http::verb::put, "/api/runs/alpha/notes", R"({"notes":"x"})").status, 401u);
}

TEST_F(ServerTest, RemovesEndedRunsAndLiveOnesOnlyWhenForced) {
  EXPECT_EQ(request(port_, http::verb::delete_, "/api/runs/beta", "", {kAuth}).status, 409u);
  EXPECT_EQ(request(port_, http::verb::delete_, "/api/runs/alpha", "", {kAuth}).status, 200u);
  EXPECT_EQ(get(port_, "/api/runs/alpha", {kAuth}).status, 404u);
}

TEST_F(ServerTest, ExportsLiveRunsForPrometheus) {
  const HttpResult r = get(port_, "/metrics", {kAuth});
  ASSERT_EQ(r.status, 200u);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r.body.find("# TYPE kiln_loss gauge\n"), std::string::npos);
  EXPECT_NE(r.body.find("kiln_loss{run=\"beta\",rank=\"1\"} " + fmt::format("{}", loss_of(5, 1)) + "\n"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("kiln_steps_total{run=\"beta\"} 5\n"), std::string::npos);
  EXPECT_NE(r.body.find("kiln_memory_used_bytes{run=\"beta\",rank=\"0\"} 1073741824\n"), std::string::npos);
  EXPECT_EQ(r.body.find("run=\"alpha\""), std::string::npos);  // ended runs are not scraped
  // Every gauge of the metric list, with its help text.
  for (const store::MetricField& f : store::kMetricFields)
    if (!f.prometheus.empty()) {
      EXPECT_NE(r.body.find(fmt::format("# HELP {} {}\n# TYPE {} gauge\n", f.prometheus, f.description, f.prometheus)),
                std::string::npos)
          << f.name;
    }
}

TEST_F(ServerTest, ServesTheMetricList) {
  const HttpResult r = get(port_, "/api/metric-fields", {kAuth});
  ASSERT_EQ(r.status, 200u);
  EXPECT_EQ(r.json(), store::metric_fields_json());
  EXPECT_EQ(r.json()[4]["name"], "loss");
  EXPECT_EQ(r.json()[4]["views"], nlohmann::json::parse(R"(["run_chart", "compare_grid"])"));
}

TEST_F(ServerTest, CountsEachRulesAlertsForPrometheus) {
  for (const char* rule : {"loss_spike", "straggler", "loss_spike"}) {
    store::Alert alert;
    alert.rule = rule;
    alert.message = "planted";
    live_writer_->log_alert(alert);
  }
  const std::string body = get(port_, "/metrics", {kAuth}).body;
  EXPECT_NE(body.find("# TYPE kiln_alerts_total counter\n"), std::string::npos) << body;
  EXPECT_NE(body.find("kiln_alerts_total{run=\"beta\",rule=\"loss_spike\"} 2\n"), std::string::npos) << body;
  EXPECT_NE(body.find("kiln_alerts_total{run=\"beta\",rule=\"straggler\"} 1\n"), std::string::npos) << body;
}

}  // namespace
}  // namespace kiln::monitor::test
