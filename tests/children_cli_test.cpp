// End-to-end, through the real binary: what kiln hands the processes it starts, and what its
// server shows to whom (docs/security.md#hooks-and-the-processes-kiln-starts). An alert's
// hook gets stdin, stdout and stderr and no other descriptor (not the dashboard's socket); a
// detached run's log that is a link planted at its path is refused, its target untouched;
// with a token, reads and the live feed need it; configs are shown with their secrets hidden.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "monitor/server/test_client.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
namespace http = monitor::test::http;

// The small run logging every step, alerts judging from the fifth logged step, no throughput
// rule (a busy test machine is slow now and then with no fault of the run's).
std::string children_alert_run(const std::string& prefix, int steps) {
  return small_run(prefix) + " --set train.steps=" + std::to_string(steps) +
         " --set train.log_interval=1 --set train.eval_interval=0 --set train.sample_tokens=0"
         " --set alerts.min_samples=5 --set alerts.window=20 --set alerts.throughput_fraction=0";
}

std::string write_token(const std::string& dir, const std::string& token) {
  const std::string path = dir + "/token";
  std::ofstream(path) << token << "\n";
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  return path;
}

// The status line of a WebSocket upgrade for `target`, with extra header lines.
std::string upgrade(uint16_t port, const std::string& target, const std::string& extra = "") {
  return monitor::test::raw_exchange(port, monitor::test::upgrade_request(port, target, extra));
}

TEST(ChildrenCli, AnAlertHookGetsNoDescriptorButItsStandardStreams) {
  const std::string dir = fresh_dir("children_hook");
  const std::string prefix = prepare_corpus(dir);
  // The hook lists its shell's open descriptors; the run serves a dashboard, so it holds a
  // listening socket and its store.
  const CommandResult r = run_command(
      "env -u KILN_TOKEN KILN_FAULTS=nan@3 " + kiln + " train --store " + dir + "/runs.db --name hooked" +
      " --serve 127.0.0.1:0 --token-file " + write_token(dir, "t0ken") + children_alert_run(prefix, 6) +
      " --set 'alerts.command=exec > " + dir + "/fds; ls /proc/$$/fd; true'");
  ASSERT_NE(r.output.find("kiln: alert: nan: loss is nan at step 3\n"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(dir + "/fds"), "0\n1\n2\n") << r.output;
}

TEST(ChildrenCli, ASweepRefusesAPointsLogThatIsAPlantedLink) {
  const std::string dir = fresh_dir("children_sweep");
  const std::string prefix = prepare_corpus(dir);
  const std::string folder = dir + "/checkpoints/lr";
  fs::create_directories(folder);
  fs::permissions(dir + "/checkpoints", fs::perms::owner_all);
  fs::permissions(folder, fs::perms::owner_all);
  std::ofstream(dir + "/target") << "not the sweep's\n";
  fs::create_symlink(dir + "/target", folder + "/lr-0.log");
  const CommandResult r = run_command(kiln + " sweep --name lr --grid train.lr=1e-3,3e-3" + small_run(prefix) +
                                      " --set train.checkpoint_dir=" + dir + "/checkpoints --store " + dir + "/runs.db");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("kiln: error: sweep: point 0: log " + folder +
                          "/lr-0.log is a symbolic link; kiln does not follow it\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(read_text(dir + "/target"), "not the sweep's\n");
}

TEST(ChildrenCli, ADetachedResumeRefusesALogThatIsAPlantedLink) {
  const std::string dir = fresh_dir("children_resume");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db", checkpoints = dir + "/checkpoints";
  const CommandResult trained = run_command(kiln + " train --store " + store + " --name first" + small_run(prefix) +
                                            " --set train.checkpoint_interval=3 --set train.checkpoint_dir=" + checkpoints);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  // The detached run's log is CHECKPOINT_DIR/NAME-YYYYmmdd-HHMMSS.log: a link waits at every
  // name of the next minute.
  std::ofstream(dir + "/target") << "not the run's\n";
  for (std::time_t t = std::time(nullptr) - 1, end = t + 60; t <= end; ++t) {
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
    fs::create_symlink(dir + "/target", checkpoints + "/first-" + stamp + ".log");
  }
  const CommandResult r = run_command(kiln + " runs resume first --detach --set train.steps=9 --store " + store);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("kiln: error: log " + checkpoints + "/first-"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(".log is a symbolic link; kiln does not follow it\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("started as process"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(dir + "/target"), "not the run's\n");
}

TEST(ChildrenCli, WithATokenReadsAndTheLiveFeedNeedIt) {
  const std::string dir = fresh_dir("children_reads");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const CommandResult trained = run_command(kiln + " train --store " + store + " --name done" + small_run(prefix));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::string log = dir + "/serve.log";
  const int server = start_background("env -u KILN_TOKEN " + kiln + " serve --store " + store +
                                          " --listen 127.0.0.1:0 --token-file " + write_token(dir, "t0ken"),
                                      log);
  const std::string url = wait_for_url(log);
  ASSERT_FALSE(url.empty()) << read_text(log);
  const uint16_t port = port_of(url);
  const monitor::test::Headers auth = {{"Authorization", "Bearer t0ken"}};

  EXPECT_EQ(monitor::test::get(port, "/api/runs").status, 401u);
  EXPECT_EQ(monitor::test::get(port, "/api/runs/done").status, 401u);
  EXPECT_EQ(monitor::test::get(port, "/metrics").status, 401u);
  EXPECT_EQ(upgrade(port, "/api/runs/done/live"), "HTTP/1.1 401 Unauthorized");
  EXPECT_EQ(monitor::test::get(port, "/").status, 200u) << "the page itself holds no data";
  const monitor::test::HttpResult runs = monitor::test::get(port, "/api/runs", auth);
  EXPECT_EQ(runs.status, 200u);
  EXPECT_EQ(runs.json()["runs"][0]["name"], "done");
  EXPECT_EQ(upgrade(port, "/api/runs/done/live", "Authorization: Bearer t0ken\r\n"), "HTTP/1.1 101 Switching Protocols");
  // The browser's way: the token once for a cookie that reads and follows.
  const monitor::test::HttpResult session =
      monitor::test::request(port, http::verb::post, "/api/session", "{}", auth);
  ASSERT_EQ(session.status, 200u) << session.body;
  const std::string set_cookie(session.headers[http::field::set_cookie]);
  const std::string cookie = set_cookie.substr(0, set_cookie.find(';'));
  EXPECT_EQ(monitor::test::get(port, "/api/runs", {{"Cookie", cookie}}).status, 200u);
  EXPECT_EQ(upgrade(port, "/api/runs/done/live", "Cookie: " + cookie + "\r\n"), "HTTP/1.1 101 Switching Protocols");
  ::kill(server, SIGTERM);
  EXPECT_EQ(wait_exit(server), 0) << read_text(log);
}

TEST(ChildrenCli, ConfigsAreShownWithoutTheirSecrets) {
  const std::string dir = fresh_dir("children_redact");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  // The hook is in the run's config and on its recorded command line: both are shown.
  const CommandResult trained =
      run_command(kiln + " train --store " + store + " --name hooked" + small_run(prefix) +
                  " --set alerts.throughput_fraction=0 --set 'alerts.command=curl https://user:pw@hooks.example/x?token=abc'");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto hidden = [](const std::string& text, const std::string& where) {
    EXPECT_EQ(text.find("pw"), std::string::npos) << where << ": " << text;
    EXPECT_EQ(text.find("abc"), std::string::npos) << where << ": " << text;
  };
  for (const char* show : {" runs show hooked --json", " runs show hooked", " runs export hooked --format json"}) {
    const CommandResult shown = run_command(kiln + show + " --store " + store);
    EXPECT_EQ(shown.exit_code, 0) << shown.output;
    hidden(shown.output, show);
  }
  const nlohmann::json shown = nlohmann::json::parse(run_command(kiln + " runs show hooked --json --store " + store).output);
  EXPECT_EQ(shown["config"]["alerts"]["command"], "curl https://user:***@hooks.example/x?token=***");
  EXPECT_NE(shown["command_line"].get<std::string>().find("'alerts.command=curl https://user:***@hooks.example/x?token=***'"),
            std::string::npos)
      << shown["command_line"];

  const std::string log = dir + "/serve.log";
  const int server = start_background(kiln + " serve --store " + store + " --listen 127.0.0.1:0", log);
  const std::string url = wait_for_url(log);
  ASSERT_FALSE(url.empty()) << read_text(log);
  for (const char* target : {"/api/runs/hooked", "/api/runs?config=1"}) {
    const monitor::test::HttpResult served = monitor::test::get(port_of(url), target);
    EXPECT_EQ(served.status, 200u) << target;
    hidden(served.body, target);
  }
  ::kill(server, SIGTERM);
  EXPECT_EQ(wait_exit(server), 0) << read_text(log);
}

}  // namespace
}  // namespace kiln::test
