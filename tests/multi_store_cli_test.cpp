// End-to-end, through the real binary: `kiln serve --store A --store B` and `--stores DIR` show
// the runs of two stores that two `kiln train --store` runs recorded as one list, each with
// its store's label, the first store's run writable and the second's read-only (a change to
// it refused); a missing, foreign or repeated store is refused at start in one line, with
// nothing written (docs/dashboard.md#several-stores).
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "monitor/server/test_client.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

// `kiln serve` with these options until the test has asked it what it wanted; the runs it lists.
nlohmann::json served_runs(const std::string& dir, const std::string& name, const std::string& stores) {
  const std::string log = dir + "/" + name + ".log";
  const int pid = start_background(kiln + " serve" + stores + " --listen 127.0.0.1:0", log);
  const std::string url = wait_for_url(log);
  EXPECT_FALSE(url.empty()) << read_text(log);
  nlohmann::json runs;
  if (!url.empty()) {
    const uint16_t port = port_of(url);
    const auto listed = monitor::test::get(port, "/api/runs");
    EXPECT_EQ(listed.status, 200u) << listed.body;
    runs = listed.json()["runs"];
    // The second store's run is read-only: the server refuses to tag it.
    const auto tag = monitor::test::request(port, monitor::test::http::verb::post, "/api/runs/host-b:other/tags",
                                            R"({"add": ["x"]})");
    EXPECT_EQ(tag.status, 403u) << tag.body;
    EXPECT_EQ(monitor::test::get(port, "/api/runs/host-b:other/metrics?keys=loss&ranks=0").json()["run"], "host-b:1");
  }
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);
  return runs;
}

void expect_both_runs(const nlohmann::json& runs) {
  ASSERT_EQ(runs.size(), 2u) << runs.dump();
  // Newest first: the second store's run was recorded last.
  EXPECT_EQ(runs[0]["name"], "other");
  EXPECT_EQ(runs[0]["store"], "host-b");
  EXPECT_EQ(runs[0]["id"], "host-b:1");
  EXPECT_EQ(runs[0]["writable"], false);
  EXPECT_EQ(runs[0]["status"], "completed");
  EXPECT_EQ(runs[1]["name"], "base");
  EXPECT_EQ(runs[1]["store"], "host-a");
  EXPECT_EQ(runs[1]["id"], 1);
  EXPECT_EQ(runs[1]["writable"], true);
}

TEST(MultiStoreCli, ServesTwoTrainedStoresAsOneList) {
  const std::string dir = fresh_dir("multi_store_serve");
  const std::string prefix = prepare_corpus(dir);
  std::filesystem::create_directories(dir + "/hosts");
  for (const auto& [store, name] : {std::pair{"host-a", "base"}, std::pair{"host-b", "other"}}) {
    const CommandResult trained =
        run_command(kiln + " train --name " + name + " --store " + dir + "/hosts/" + store + ".db" + small_run(prefix));
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
  }
  const std::string a = dir + "/hosts/host-a.db", b = dir + "/hosts/host-b.db";
  expect_both_runs(served_runs(dir, "two", " --store " + a + " --store " + b));
  expect_both_runs(served_runs(dir, "folder", " --stores " + dir + "/hosts"));
  // A --store that --stores DIR also holds is shown once.
  expect_both_runs(served_runs(dir, "both", " --store " + a + " --stores " + dir + "/hosts"));
  const std::string log = read_text(dir + "/two.log");
  EXPECT_NE(log.find("kiln: serving " + a + " (host-a), and read-only " + b + " (host-b) at http://127.0.0.1:"),
            std::string::npos)
      << log;
}

TEST(MultiStoreCli, RefusesAMissingForeignOrRepeatedStoreInOneLine) {
  const std::string dir = fresh_dir("multi_store_refuse");
  const std::string prefix = prepare_corpus(dir);
  const CommandResult trained = run_command(kiln + " train --name base --store " + dir + "/a.db" + small_run(prefix));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::string a = dir + "/a.db";
  // timeout: a server that wrongly starts would otherwise serve on.
  const auto serve = [&](const std::string& stores) {
    return run_command("timeout 10 " + kiln + " serve" + stores + " --listen 127.0.0.1:0");
  };

  const CommandResult missing = serve(" --store " + a + " --store " + dir + "/none.db");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.output, "kiln: error: store: no store at " + dir +
                                "/none.db (give --store PATH or set KILN_STORE; `kiln train` creates the store)\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/none.db"));

  { std::ofstream(dir + "/notes.db") << "not a store\n"; }
  const CommandResult foreign = serve(" --store " + a + " --store " + dir + "/notes.db");
  EXPECT_EQ(foreign.exit_code, 1);
  EXPECT_TRUE(is_one_line(foreign.output)) << foreign.output;
  EXPECT_EQ(foreign.output.rfind("kiln: error: store: ", 0), 0u) << foreign.output;
  EXPECT_EQ(read_text(dir + "/notes.db"), "not a store\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/notes.db-wal"));

  const CommandResult twice = serve(" --store " + a + " --store " + a);
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_EQ(twice.output, "kiln: error: store: " + a + " is given twice\n");

  const CommandResult empty = serve(" --stores " + dir + "/nothing");
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_EQ(empty.output,
            "kiln: error: store: no folder at " + dir + "/nothing (--stores takes a folder of *.db run stores)\n");
}

}  // namespace
}  // namespace kiln::test
