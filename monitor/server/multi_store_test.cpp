// One server over several stores (docs/dashboard.md#several-stores), over real HTTP: the runs
// of every store in one list with their store, a second store's run read, charted, compared,
// followed live and scraped as the first store's are, every change to it refused, names that
// two stores hold resolved only by address, and a missing or foreign store refused at start.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "monitor/server/server.h"
#include "monitor/server/test_client.h"
#include "store/commands.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::monitor::test {
namespace {

using kiln::test::error_of;
using store::testing_util::interval;
using store::testing_util::loss_of;
using store::testing_util::run_info;

// Three stores, as three hosts' would be:
//   main.db    alpha (completed), shared (completed)            served, writable
//   host-b.db  gamma (live, its writer open), shared, twin      read-only
//   host-c.db  twin, delta (completed), and sweep "widths"      read-only
class MultiStoreTest : public store::testing_util::StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    finished(path("main.db"), "alpha");
    finished(path("main.db"), "shared");
    gamma_writer_ = std::make_unique<store::RunWriter>(path("host-b.db"));
    gamma_ = gamma_writer_->create_run(run_info("gamma"));
    gamma_writer_->log_metrics(interval(5, 2));
    gamma_writer_->flush();
    finished(path("host-b.db"), "shared");
    finished(path("host-b.db"), "twin");
    finished(path("host-c.db"), "twin");
    delta_ = finished(path("host-c.db"), "delta");
    {
      auto db = store::open_store(path("host-c.db"), store::Access::ReadWrite);
      db->exec("INSERT INTO sweeps (id, name, created_at, ended_at, status) VALUES (1, 'widths', " +
               std::to_string(store::unix_now()) + ", " + std::to_string(store::unix_now()) + ", 'ended')");
      db->exec("INSERT INTO sweep_points (sweep_id, point, params_json, run_name) "
               "VALUES (1, 0, '{\"model.d\":64}', 'delta')");
      db->exec("UPDATE runs SET sweep_id = 1, sweep_point = 0 WHERE name = 'delta'");
    }
    ServerOptions options;
    options.store_path = path("main.db");
    options.read_only_stores = {path("host-b.db"), path("host-c.db")};
    options.poll_interval = std::chrono::milliseconds(50);
    server_ = std::make_unique<Server>(parse_listen_address("127.0.0.1:0"), options);
    server_->start();
    port_ = server_->port();
  }

  void TearDown() override {
    server_.reset();
    gamma_writer_.reset();
    StoreTest::TearDown();
  }

  static int64_t finished(const std::string& store_path, const std::string& name) {
    store::RunWriter writer(store_path);
    const int64_t id = writer.create_run(run_info(name));
    for (int64_t step : {10, 20}) writer.log_metrics(interval(step, 2));
    writer.log_valid({20, 0, 2.5});
    writer.finish(store::RunStatus::Completed);
    writer.flush();
    return id;
  }

  HttpResult change(http::verb method, const std::string& target, const std::string& body) {
    return request(port_, method, target, body, {{"Content-Type", "application/json"}});
  }

  int64_t gamma_ = 0;
  int64_t delta_ = 0;
  std::unique_ptr<store::RunWriter> gamma_writer_;
  std::unique_ptr<Server> server_;
  uint16_t port_ = 0;
};

TEST_F(MultiStoreTest, ListsEveryStoresRunsAsOneListWithTheirStore) {
  const HttpResult r = get(port_, "/api/runs");
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto runs = r.json()["runs"];
  ASSERT_EQ(runs.size(), 7u) << r.body;
  EXPECT_EQ(r.json()["stores"], 3);
  int first_store = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    const std::string store = run["store"];
    // The served store's runs keep their plain ids; the others' are addressed LABEL:ID.
    if (store == "main") {
      ++first_store;
      EXPECT_TRUE(run["id"].is_number_integer()) << run.dump();
      EXPECT_EQ(run["writable"], true);
    } else {
      EXPECT_TRUE(store == "host-b" || store == "host-c") << store;
      EXPECT_EQ(run["id"].get<std::string>().rfind(store + ":", 0), 0u) << run.dump();
      EXPECT_EQ(run["writable"], false);
    }
    // Newest first over all stores.
    if (i > 0) {
      EXPECT_GE(runs[i - 1]["created_at"].get<double>(), run["created_at"].get<double>());
    }
  }
  EXPECT_EQ(first_store, 2);
  EXPECT_EQ(runs[0]["name"], "delta");
  EXPECT_EQ(runs[0]["id"], "host-c:" + std::to_string(delta_));
  // A sweep's run points at its sweep by the sweep's address in the same store.
  EXPECT_EQ(runs[0]["sweep_id"], "host-c:1");
  // Filters and the limit apply to the one list.
  const auto limited = get(port_, "/api/runs?limit=2").json()["runs"];
  ASSERT_EQ(limited.size(), 2u);
  EXPECT_EQ(limited[0]["name"], "delta");
  EXPECT_EQ(limited[1]["name"], "twin");
  EXPECT_EQ(limited[1]["store"], "host-c");
  const auto named = get(port_, "/api/runs?name=twin").json()["runs"];
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0]["store"], "host-c");
  EXPECT_EQ(named[1]["store"], "host-b");
  EXPECT_EQ(get(port_, "/api/runs?status=running").json()["runs"][0]["id"], "host-b:" + std::to_string(gamma_));
  // Pages over every store's runs in one order.
  const auto second = get(port_, "/api/runs?limit=2&offset=1").json();
  EXPECT_EQ(second["total"], 7);
  ASSERT_EQ(second["runs"].size(), 2u);
  EXPECT_EQ(second["runs"][0]["name"], "twin");
  EXPECT_EQ(second["runs"][0]["store"], "host-c");
}

TEST_F(MultiStoreTest, ReadsAndChartsASecondStoresRunAsTheFirstsAreRead) {
  const std::string gamma = "host-b:" + std::to_string(gamma_);
  for (const std::string& typed : {gamma, std::string("host-b:gamma"), std::string("gamma"), std::string("gam")}) {
    const HttpResult r = get(port_, "/api/runs/" + typed);
    ASSERT_EQ(r.status, 200u) << typed << ": " << r.body;
    EXPECT_EQ(r.json()["id"], gamma);
    EXPECT_EQ(r.json()["name"], "gamma");
    EXPECT_EQ(r.json()["store"], "host-b");
    EXPECT_EQ(r.json()["writable"], false);
    EXPECT_EQ(r.json()["latest_metrics"].size(), 2u);
  }
  const HttpResult metrics = get(port_, "/api/runs/" + gamma + "/metrics?keys=loss&ranks=1");
  ASSERT_EQ(metrics.status, 200u) << metrics.body;
  EXPECT_EQ(metrics.json()["run"], gamma);
  EXPECT_DOUBLE_EQ(metrics.json()["series"]["loss"][0]["value"][0].get<double>(), loss_of(5, 1));
  const auto ranks = get(port_, "/api/runs/host-c:delta/ranks").json();
  EXPECT_EQ(ranks["run"], "host-c:" + std::to_string(delta_));
  EXPECT_EQ(ranks["ranks"].size(), 2u);
  EXPECT_EQ(get(port_, "/api/runs/host-c:delta/valid").json()[0]["loss"], 2.5);
  for (const char* part : {"samples", "experts", "rank-heat", "alerts", "system", "events", "commands"})
    EXPECT_EQ(get(port_, std::string("/api/runs/host-c:delta/") + part).status, 200u) << part;
  const HttpResult csv = get(port_, "/api/runs/host-c:delta/export.csv");
  ASSERT_EQ(csv.status, 200u);
  EXPECT_NE(csv.body.find("\ndelta,20,"), std::string::npos) << csv.body;
}

TEST_F(MultiStoreTest, ResolvesNamesTwoStoresHoldOnlyByAddress) {
  // The first store's name is the name it always was.
  const auto shared = get(port_, "/api/runs/shared").json();
  EXPECT_TRUE(shared["id"].is_number_integer()) << shared.dump();
  EXPECT_EQ(shared["store"], "main");
  EXPECT_EQ(get(port_, "/api/runs/host-b:shared").json()["store"], "host-b");
  // Two other stores hold "twin": the error names both, by address.
  const HttpResult twin = get(port_, "/api/runs/twin");
  EXPECT_EQ(twin.status, 404u);
  const std::string error = twin.json()["error"];
  EXPECT_NE(error.find("run 'twin' is ambiguous: twin (host-b:"), std::string::npos) << error;
  EXPECT_NE(error.find("twin (host-c:"), std::string::npos) << error;
  EXPECT_NE(error.find("give LABEL:NAME or LABEL:ID"), std::string::npos) << error;
  EXPECT_EQ(get(port_, "/api/runs/host-c:twin").json()["store"], "host-c");
  // A prefix must name one run of all the stores.
  EXPECT_EQ(get(port_, "/api/runs/tw").status, 404u);
  EXPECT_EQ(get(port_, "/api/runs/del").json()["name"], "delta");
  // An id alone is the first store's.
  EXPECT_EQ(get(port_, "/api/runs/1").json()["name"], "alpha");
  const HttpResult label = get(port_, "/api/runs/host-z:1");
  EXPECT_EQ(label.status, 404u);
  EXPECT_EQ(label.json()["error"],
            "store: no store labelled 'host-z' on this server (its stores: main, host-b, host-c)");
  const HttpResult unknown = get(port_, "/api/runs/elta");
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_EQ(unknown.json()["error"],
            "store: no run named 'elta' in any of the 3 stores (main, host-b, host-c); did you mean delta (host-c:" +
                std::to_string(delta_) + ")?");
}

TEST_F(MultiStoreTest, ComparesRunsOfDifferentStores) {
  const HttpResult r = get(port_, "/api/compare?runs=alpha,host-b:gamma,host-c:twin");
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto c = r.json();
  ASSERT_EQ(c["runs"].size(), 3u);
  EXPECT_EQ(c["runs"][0]["id"], 1);
  EXPECT_EQ(c["runs"][0]["store"], "main");
  EXPECT_EQ(c["runs"][1]["id"], "host-b:" + std::to_string(gamma_));
  EXPECT_EQ(c["runs"][1]["name"], "gamma");
  EXPECT_EQ(c["summary"][2]["store"], "host-c");
  EXPECT_EQ(c["summary"][2]["logged_steps"], 2);
  const HttpResult same = get(port_, "/api/compare?runs=gamma,host-b:gamma");
  EXPECT_EQ(same.status, 400u);
  EXPECT_EQ(same.json()["error"], "compare: 'gamma' and 'host-b:gamma' are the same run (id host-b:" +
                                      std::to_string(gamma_) + "); give distinct runs");
  EXPECT_EQ(get(port_, "/api/compare?runs=alpha,twin").status, 404u);
}

TEST_F(MultiStoreTest, RefusesEveryChangeToAReadOnlyStoresRun) {
  const std::string gamma = "/api/runs/host-b:gamma";
  const HttpResult pause = change(http::verb::post, gamma + "/commands", R"({"action": "pause"})");
  EXPECT_EQ(pause.status, 403u);
  EXPECT_EQ(pause.json()["error"], "run host-b:" + std::to_string(gamma_) + " is in store 'host-b' (" +
                                       path("host-b.db") + "), which this server shows read-only: change it with " +
                                       "`kiln runs ... --store " + path("host-b.db") +
                                       "`, or from a dashboard that serves that store first");
  EXPECT_EQ(change(http::verb::post, gamma + "/tags", R"({"add": ["x"]})").status, 403u);
  EXPECT_EQ(change(http::verb::put, gamma + "/notes", R"({"notes": "x"})").status, 403u);
  EXPECT_EQ(request(port_, http::verb::delete_, gamma + "?force=1").status, 403u);
  EXPECT_EQ(request(port_, http::verb::delete_, "/api/runs/host-c:delta").status, 403u);
  // Nothing reached the store.
  {
    auto db = store::open_store(path("host-b.db"), store::Access::ReadOnly);
    EXPECT_TRUE(store::list_commands(*db, gamma_).empty());
    const store::RunRecord run = store::get_run(*db, gamma_);
    EXPECT_TRUE(run.tags.empty());
    EXPECT_EQ(run.notes, "");
    EXPECT_EQ(store::list_runs(*db).size(), 3u);
  }
  // The first store's runs change as ever.
  const HttpResult tags = change(http::verb::post, "/api/runs/alpha/tags", R"({"add": ["kept"]})");
  EXPECT_EQ(tags.status, 200u) << tags.body;
  EXPECT_EQ(tags.json()["tags"], nlohmann::json({"kept"}));
}

TEST_F(MultiStoreTest, FollowsASecondStoresLiveRun) {
  LiveClient client(port_, "/api/runs/host-b:gamma/live");
  const auto hello = client.next();
  EXPECT_EQ(hello["type"], "hello");
  EXPECT_EQ(hello["run"]["id"], "host-b:" + std::to_string(gamma_));
  EXPECT_EQ(hello["run"]["store"], "host-b");
  EXPECT_EQ(hello["last_step"], 5);
  gamma_writer_->log_metrics(interval(6, 2));
  gamma_writer_->flush();
  const auto metrics = next_of(client, "metrics");
  ASSERT_EQ(metrics["rows"].size(), 2u);
  EXPECT_EQ(metrics["rows"][0]["step"], 6);
  gamma_writer_->finish(store::RunStatus::Completed);
  gamma_writer_->flush();
  const auto status = next_of(client, "status");
  EXPECT_EQ(status["run"]["status"], "completed");
  EXPECT_EQ(status["run"]["id"], "host-b:" + std::to_string(gamma_));
}

TEST_F(MultiStoreTest, ScrapesLiveRunsOfEveryStoreWithTheirStore) {
  const HttpResult r = get(port_, "/metrics");
  ASSERT_EQ(r.status, 200u);
  EXPECT_NE(r.body.find("kiln_loss{run=\"gamma\",store=\"host-b\",rank=\"1\"} "), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("kiln_steps_total{run=\"gamma\",store=\"host-b\"} 5"), std::string::npos) << r.body;
}

TEST_F(MultiStoreTest, ShowsEachStoresSweepsByAddress) {
  const auto sweeps = get(port_, "/api/sweeps").json();
  ASSERT_EQ(sweeps.size(), 1u);
  EXPECT_EQ(sweeps[0]["id"], "host-c:1");
  EXPECT_EQ(sweeps[0]["store"], "host-c");
  const HttpResult sweep = get(port_, "/api/sweeps/widths");
  ASSERT_EQ(sweep.status, 200u) << sweep.body;
  EXPECT_EQ(sweep.json()["sweep"]["id"], "host-c:1");
  EXPECT_EQ(sweep.json()["points"][0]["run_id"], "host-c:" + std::to_string(delta_));
  EXPECT_DOUBLE_EQ(sweep.json()["points"][0]["final_loss"].get<double>(), (loss_of(20, 0) + loss_of(20, 1)) / 2);
}

class MultiStoreStartTest : public store::testing_util::StoreTest {};

TEST_F(MultiStoreStartTest, RefusesAMissingForeignOrRepeatedStoreAtStart) {
  { store::RunWriter writer(path("main.db")); }
  const auto start = [&](const std::vector<std::string>& read_only) {
    ServerOptions options;
    options.store_path = path("main.db");
    options.read_only_stores = read_only;
    return error_of([&] { Server server(parse_listen_address("127.0.0.1:0"), options); });
  };
  EXPECT_EQ(start({path("none.db")}), "store: no store at " + path("none.db"));
  EXPECT_FALSE(std::filesystem::exists(path("none.db")));
  { std::ofstream(path("notes.db")) << "not a store\n"; }
  EXPECT_EQ(start({path("notes.db")}).rfind("store: ", 0), 0u) << start({path("notes.db")});
  EXPECT_EQ(start({path("main.db")}), "store: " + path("main.db") + " is given twice");
  EXPECT_EQ(start(std::vector<std::string>(limits::kMaxStores, path("main.db"))),
            "store: 65 stores given; a server shows at most 64");
}

}  // namespace
}  // namespace kiln::monitor::test
