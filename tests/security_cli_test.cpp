// End-to-end, through the real binary: the holes a security review found in the CLI and the
// store (docs/security.md). A token never reaches the store or the console, a blank one is
// refused, a setting that would kill a run is refused unless forced, a name cannot leave its
// folder, bad bytes cannot hide the history, and a run is never left stuck as `running`.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "monitor/server/test_client.h"
#include "store/commands.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A store holding one live-looking run "steered" with train.lr 0.001 over 100 steps.
std::string store_with_a_run(const std::string& dir) {
  const std::string path = dir + "/runs.db";
  store::RunWriter writer(path);
  store::RunInfo info;
  info.name = "steered";
  info.config_json = R"({"train":{"lr":0.001,"steps":100}})";
  writer.create_run(info);
  writer.flush();
  return path;
}

TEST(SecurityCli, TheTokenNeverReachesTheStoreTheConsoleOrAnExport) {
  const std::string dir = fresh_dir("security_token");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const CommandResult trained =
      run_command(kiln + " train --store " + store + " --name tok --serve 127.0.0.1:0 --token s3cret-t0ken" +
                  small_run(prefix) + " --set train.checkpoint_dir=" + dir + "/checkpoints");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_EQ(trained.output.find("s3cret"), std::string::npos) << trained.output;
  const CommandResult shown = run_command(kiln + " runs show tok --json --store " + store);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  const std::string line = json::parse(shown.output)["command_line"];
  EXPECT_NE(line.find("--serve 127.0.0.1:0 --token *** "), std::string::npos) << line;
  for (const std::string format : {"json", "csv"}) {
    const CommandResult exported = run_command(kiln + " runs export tok --format " + format + " --store " + store);
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    EXPECT_EQ(exported.output.find("s3cret"), std::string::npos) << format;
  }
}

TEST(SecurityCli, ATokenComesFromAFileOrTheEnvironmentAndABlankOneIsRefused) {
  const std::string dir = fresh_dir("security_token_file");
  const std::string store = store_with_a_run(dir);
  std::ofstream(dir + "/token") << "from-the-file\n";
  std::ofstream(dir + "/blank") << "  \n";
  const int pid = start_background("env -u KILN_TOKEN " + kiln + " serve --store " + store + " --listen 0.0.0.0:0 --token-file " + dir + "/token", dir + "/serve.log");
  const std::string url = wait_for_url(dir + "/serve.log");
  ASSERT_FALSE(url.empty()) << read_text(dir + "/serve.log");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  // Every interface: the banner names the machine, not a loopback address it would hide behind.
  EXPECT_EQ(url.rfind(std::string("http://") + host + ":", 0), 0u) << url;
  const std::string pause = R"({"action":"pause"})";
  const std::pair<std::string, std::string> json_type{"Content-Type", "application/json"};
  EXPECT_EQ(monitor::test::request(port_of(url), monitor::test::http::verb::post, "/api/runs/steered/commands", pause,
                                   {json_type})
                .status,
            401u);
  EXPECT_EQ(monitor::test::request(port_of(url), monitor::test::http::verb::post, "/api/runs/steered/commands", pause,
                                   {json_type, {"Authorization", "Bearer from-the-file"}})
                .status,
            202u);
  kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 0) << read_text(dir + "/serve.log");

  // timeout: a server that wrongly accepts what it should refuse would otherwise serve on.
  const std::string serve = "env -u KILN_TOKEN timeout 10 " + kiln + " serve --store " + store;

  const CommandResult blank_flag = run_command(serve + " --token '   '");
  EXPECT_EQ(blank_flag.exit_code, 1);
  EXPECT_EQ(blank_flag.output,
            "kiln: error: --token is blank; give a token (one word of printable characters), or none to listen on "
            "loopback only\n");
  const CommandResult blank_env =
      run_command("env KILN_TOKEN=' ' timeout 10 " + kiln + " serve --store " + store + " --listen 0.0.0.0:0");
  EXPECT_EQ(blank_env.exit_code, 1);
  EXPECT_EQ(blank_env.output.rfind("kiln: error: $KILN_TOKEN is blank;", 0), 0u) << blank_env.output;
  const CommandResult blank_file = run_command(serve + " --token-file " + dir + "/blank");
  EXPECT_EQ(blank_file.exit_code, 1);
  EXPECT_EQ(blank_file.output.rfind("kiln: error: --token-file " + dir + "/blank is blank;", 0), 0u)
      << blank_file.output;
  const CommandResult spaced = run_command(serve + " --token 'two words'");
  EXPECT_EQ(spaced.output,
            "kiln: error: --token holds a space or a control character; a token is one word of printable "
            "characters\n");
  const CommandResult missing = run_command(serve + " --token-file " + dir + "/none");
  EXPECT_EQ(missing.output, "kiln: error: --token-file " + dir + "/none: No such file or directory\n");
}

TEST(SecurityCli, ASettingOutsideItsSaneRangeIsRefusedUnlessForced) {
  const std::string dir = fresh_dir("security_settings");
  const std::string store = store_with_a_run(dir);
  const std::string set = kiln + " runs set steered --store " + store + " ";
  const CommandResult wild = run_command(set + "train.lr=0.02");
  EXPECT_EQ(wild.exit_code, 1);
  EXPECT_EQ(wild.output,
            "kiln: error: train.lr=0.02 is outside its range: above 0 and at most 0.01 (10x the run's configured "
            "peak 0.001); add --force to set it anyway\n");
  EXPECT_EQ(run_command(set + "train.lr_scale=50").output,
            "kiln: error: train.lr_scale=50 is outside its range: above 0 and at most 10; add --force to set it "
            "anyway\n");
  EXPECT_EQ(run_command(set + "train.log_interval=1000").output,
            "kiln: error: train.log_interval=1000 is outside its range: at most the run's train.steps, 100; add "
            "--force to set it anyway\n");
  EXPECT_EQ(run_command(set + "train.lr=0.01").exit_code, 0);
  const CommandResult forced = run_command(set + "train.lr=0.5 --force");
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  auto db = store::open_store(store, store::Access::ReadOnly);
  const auto commands = store::list_commands(*db, store::resolve_run(*db, "steered"));
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0].argument, "train.lr=0.01");
  EXPECT_EQ(commands[1].argument, "train.lr=0.5");
}

TEST(SecurityCli, ARunNameCannotLeaveTheCheckpointFolder) {
  const std::string dir = fresh_dir("security_names");
  const std::string prefix = prepare_corpus(dir);
  fs::create_directories(dir + "/inside");
  const std::string run = small_run(prefix) + " --set train.checkpoint_interval=6 --set train.checkpoint_dir=" + dir +
                          "/inside/checkpoints --store " + dir + "/runs.db";
  for (const std::string name : {"../../escape", "a/../../escape", ".hidden"}) {
    const CommandResult refused = run_command(kiln + " train --name '" + name + "'" + run);
    EXPECT_EQ(refused.exit_code, 1) << name;
    EXPECT_EQ(refused.output.rfind("kiln: error: store: run name '" + name + "' ", 0), 0u) << refused.output;
    EXPECT_EQ(refused.output.find('\n'), refused.output.size() - 1) << refused.output;
  }
  EXPECT_FALSE(fs::exists(dir + "/escape"));
  EXPECT_FALSE(fs::exists(dir + "/runs.db")) << "refused before the store was touched";
  // A config file's name that no run name may hold becomes one that can.
  fs::copy_file(KILN_SOURCE_DIR "/configs/tiny.json", dir + "/my tiny (v2).json");
  const CommandResult defaulted = run_command("cd " + dir + " && " + kiln + " train --config 'my tiny (v2).json'" + run);
  ASSERT_EQ(defaulted.exit_code, 0) << defaulted.output;
  EXPECT_NE(defaulted.output.find("kiln: saved checkpoint " + dir + "/inside/checkpoints/my-tiny-v2-"), std::string::npos)
      << defaulted.output;
}

TEST(SecurityCli, AnEmptyFileIsNotMadeAStoreByAFailingEdit) {
  const std::string dir = fresh_dir("security_empty");
  std::ofstream(dir + "/empty.db");
  const CommandResult tagged = run_command(kiln + " runs tag nothing keep --store " + dir + "/empty.db");
  EXPECT_EQ(tagged.exit_code, 1);
  EXPECT_EQ(tagged.output, "kiln: error: store: " + dir +
                               "/empty.db is empty, not a run store (`kiln train` creates the store)\n");
  EXPECT_EQ(fs::file_size(dir + "/empty.db"), 0u);
}

TEST(SecurityCli, TextThatIsNotUtf8IsRefusedAndOldBadTextDoesNotHideTheHistory) {
  const std::string dir = fresh_dir("security_utf8");
  const std::string store = store_with_a_run(dir);
  const CommandResult note = run_command(kiln + " runs note steered \"$(printf 'caf\\351')\" --store " + store);
  EXPECT_EQ(note.exit_code, 1) << note.output;
  EXPECT_EQ(note.output,
            "kiln: error: store: the notes is not valid UTF-8 (a bad byte at offset 3); save it as UTF-8 text\n");
  const CommandResult tag = run_command(kiln + " runs tag steered \"$(printf '\\377')\" --store " + store);
  EXPECT_EQ(tag.exit_code, 1) << tag.output;
  // A store written before text was checked may hold such a note: every reader still works.
  store::open_store(store, store::Access::ReadWrite)->exec("UPDATE runs SET notes = CAST(x'626164ff' AS TEXT)");
  for (const std::string command : {"list --json", "show steered --json", "export steered --format json"}) {
    const CommandResult read = run_command(kiln + " runs " + command + " --store " + store);
    ASSERT_EQ(read.exit_code, 0) << command << ": " << read.output;
    const json parsed = json::parse(read.output, nullptr, false);
    EXPECT_FALSE(parsed.is_discarded()) << command;
    EXPECT_NE(read.output.find("bad\xef\xbf\xbd"), std::string::npos) << command << ": U+FFFD stands for the byte";
  }
}

TEST(SecurityCli, ABusyPortLeavesNoRunBehind) {
  const std::string dir = fresh_dir("security_busy_port");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor taken(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const std::string port = std::to_string(taken.local_endpoint().port());
  const std::string run = kiln + " train --store " + store + " --name busy" + small_run(prefix) +
                          " --set train.checkpoint_dir=" + dir + "/checkpoints --serve 127.0.0.1:";
  const CommandResult refused = run_command(run + port);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(refused.output.rfind("kiln: error: cannot listen on 127.0.0.1:" + port + ": ", 0), 0u) << refused.output;
  if (fs::exists(store)) {
    auto db = store::open_store(store, store::Access::ReadOnly);
    EXPECT_EQ(store::list_runs(*db, {}).size(), 0u) << "no run stuck as running";
  }
  const CommandResult trained = run_command(run + "0");
  EXPECT_EQ(trained.exit_code, 0) << "the name is free: " << trained.output;
}

// The newest checkpoint's step under a run's checkpoint folder, once `latest` names one.
int64_t wait_for_checkpoint(const std::string& root) {
  for (int i = 0; i < 600; ++i) {
    const std::string latest = read_text(root + "/latest");
    if (latest.rfind("step-", 0) == 0) return std::stoll(latest.substr(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// kill -9 leaves the run `running` with a fresh heartbeat; its process is gone, which the
// store can tell on the same host, so the run resumes at once rather than 30 s later.
TEST(SecurityCli, ARunKilledWithNineResumesAtOnce) {
  const std::string dir = fresh_dir("security_killed");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const std::string checkpoints = " --set train.checkpoint_dir=" + dir + "/checkpoints";
  const int pid = start_background(kiln + " train --store " + store + " --name killed" + small_run(prefix) + checkpoints +
                                       " --set train.steps=1000000 --set train.checkpoint_interval=3"
                                       " --set train.eval_interval=0 --set train.sample_tokens=0",
                                   dir + "/killed.log");
  const int64_t step = wait_for_checkpoint(dir + "/checkpoints/killed");
  ASSERT_GT(step, 0) << read_text(dir + "/killed.log");
  kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  {
    auto db = store::open_store(store, store::Access::ReadOnly);
    ASSERT_EQ(store::get_run(*db, store::resolve_run(*db, "killed")).status, store::RunStatus::Running);
  }
  const CommandResult resumed = run_command(kiln + " train --store " + store + " --resume latest" + checkpoints +
                                            " --set train.steps=" + std::to_string(wait_for_checkpoint(dir + "/checkpoints/killed") + 2));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  auto db = store::open_store(store, store::Access::ReadOnly);
  const int64_t id = store::resolve_run(*db, "killed");
  EXPECT_EQ(store::get_run(*db, id).status, store::RunStatus::Completed);
  bool noted = false;
  for (const auto& event : store::list_events(*db, id))
    noted = noted || (event.message.find("the run looked lost since") != std::string::npos &&
                      event.message.find("(its pid " + std::to_string(pid) + " is gone)") != std::string::npos);
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace kiln::test
