// End-to-end, through the real binary: kiln runs resume and kiln runs fork start a training
// process from what the store holds, and anyone who can write the store file can write it
// (docs/security.md, "Relaunching a run from the store"). The relaunch is rebuilt from the
// store's fields, each checked as if typed, never from the recorded command line's text; a
// dashboard that had a token gets it again from the user, never from the store; and a run
// whose process was killed a moment ago starts again instead of being sent a command.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "monitor/server/test_client.h"
#include "store/commands.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

// Every step logged, at a constant learning rate, a checkpoint every `checkpoint_every` steps.
std::string steady(const std::string& prefix, const std::string& dir, int steps, int checkpoint_every) {
  return small_run(prefix) + " --set train.steps=" + std::to_string(steps) +
         " --set train.log_interval=1 --set train.eval_interval=0 --set train.decay=constant"
         " --set train.warmup=0 --set train.sample_tokens=0 --set train.checkpoint_interval=" +
         std::to_string(checkpoint_every) + " --set train.checkpoint_dir=" + dir + "/checkpoints";
}

store::RunRecord relaunch_record_of(const std::string& path, const std::string& run) {
  auto db = store::open_store(path, store::Access::ReadOnly);
  return store::get_run(*db, store::resolve_run(*db, run));
}

// What a writer of the store file can do: any SQL.
void rewrite_store(const std::string& path, const std::string& sql) {
  auto db = store::open_store(path, store::Access::ReadWrite);
  db->exec(sql);
}

std::string checkpoint_of(const std::string& dir, const std::string& run, int step) {
  return fmt::format("{}/checkpoints/{}/step-{:08d}", dir, run, step);
}

// A POST that changes the run (stops it), with the token or without.
unsigned stop_status(const std::string& url, const std::string& run, const std::string& token) {
  std::vector<std::pair<std::string, std::string>> headers = {{"Content-Type", "application/json"}};
  if (!token.empty()) headers.push_back({"Authorization", "Bearer " + token});
  return monitor::test::request(port_of(url), monitor::test::http::verb::post, "/api/runs/" + run + "/commands",
                                R"({"action":"stop"})", headers)
      .status;
}

TEST(RelaunchSecurityCli, ARewrittenCommandLineChangesNothingTheRelaunchRuns) {
  const std::string dir = fresh_dir("relaunch_rewritten");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const CommandResult trained =
      run_command(kiln + " train --name src --tag keep --tag=-dash --serve 127.0.0.1:0 --allow-host dash.example"
                         " --max-connections 16 --store " + store + steady(prefix, dir, 6, 3));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  // A config with a hook, spelled as the old filter missed it, and options that were never given.
  std::ofstream(dir + "/evil.json") << R"({"alerts": {"command": "touch )" << dir << R"(/ran"}})";
  rewrite_store(store, "UPDATE runs SET command_line = 'kiln train -c" + dir +
                           "/evil.json --tag evil --serve 0.0.0.0:80 --set train.steps=99' WHERE name = 'src'");

  const CommandResult resumed = run_command(kiln + " runs resume src --store " + store + " --set train.steps=8");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  // The same command as before the rewrite: the checkpoint, the run's tags and dashboard as the
  // store recorded them (values attached, so a tag "-dash" is a value), this command's --set.
  const std::string expected = "kiln: " + fs::canonical(kiln).string() + " train --resume=" +
                               checkpoint_of(dir, "src", 6) + " --store=" + store +
                               " --name=src --tag=keep --tag=-dash --serve=127.0.0.1:0 --allow-host=dash.example"
                               " --max-connections=16 --set=train.steps=8\n";
  EXPECT_NE(resumed.output.find(expected), std::string::npos) << resumed.output;
  EXPECT_FALSE(fs::exists(dir + "/ran"));
  const store::RunRecord run = relaunch_record_of(store, "src");
  EXPECT_EQ(run.status, store::RunStatus::Completed);
  EXPECT_EQ(run.last_step, 8);
  EXPECT_EQ(run.tags, (std::vector<std::string>{"keep", "-dash"}));

  // A fork is rebuilt the same way, under its own name.
  rewrite_store(store, "UPDATE runs SET command_line = 'kiln train -c" + dir + "/evil.json' WHERE name = 'src'");
  const CommandResult forked = run_command(kiln + " runs fork src --step 3 --store " + store);
  ASSERT_EQ(forked.exit_code, 0) << forked.output;
  EXPECT_NE(forked.output.find(" train --resume=" + checkpoint_of(dir, "src", 3) + " --store=" + store +
                               " --name=src-fork-3 --tag=keep --tag=-dash --serve=127.0.0.1:0"
                               " --allow-host=dash.example --max-connections=16\n"),
            std::string::npos)
      << forked.output;
  EXPECT_FALSE(fs::exists(dir + "/ran"));
}

TEST(RelaunchSecurityCli, TheLaunchRecordIsCheckedAsIfTypedAndAnOlderRunStartsWithoutItsDashboard) {
  const std::string dir = fresh_dir("relaunch_record");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  ASSERT_EQ(run_command(kiln + " train --name rec --serve 127.0.0.1:0 --store " + store + steady(prefix, dir, 4, 2))
                .exit_code,
            0);
  const auto refused = [&](const std::string& launch) {
    rewrite_store(store, "UPDATE runs SET launch = '" + launch + "' WHERE name = 'rec'");
    const CommandResult r = run_command("env -u KILN_TOKEN " + kiln + " runs resume rec --store " + store);
    EXPECT_EQ(r.exit_code, 1) << launch << ": " << r.output;
    return r.output;
  };
  EXPECT_EQ(refused(R"({"serve":"0.0.0.0:80","token":false})"),
            "kiln: error: run 1 ('rec') records a dashboard kiln would refuse: --listen 0.0.0.0 reaches beyond this "
            "machine; give --token TOKEN so that only holders of it can read and change runs, or listen on "
            "127.0.0.1\n");
  EXPECT_EQ(refused(R"({"serve":"127.0.0.1:0","allow_hosts":["evil.example/x -c/evil.json"]})")
                .rfind("kiln: error: run 1 ('rec') records a dashboard kiln would refuse: --allow-host "
                       "'evil.example/x -c/evil.json': give a host name or an IP address",
                       0),
            0u);
  // Any other shape is refused too (store/run_launch_test.cpp has each).
  EXPECT_EQ(refused(R"({"serve":"127.0.0.1:0","command":"touch x"})"),
            "kiln: error: run 1 ('rec') records a dashboard kiln would refuse: store: the launch record holds "
            "'command', which kiln does not record\n");
  rewrite_store(store, "UPDATE runs SET name = '../up' WHERE name = 'rec'");
  const CommandResult bad_name = run_command(kiln + " runs resume 1 --store " + store);
  EXPECT_EQ(bad_name.exit_code, 1) << bad_name.output;
  EXPECT_EQ(bad_name.output.rfind("kiln: error: store: ", 0), 0u) << bad_name.output;
  rewrite_store(store, "UPDATE runs SET name = 'rec' WHERE id = 1");
  EXPECT_EQ(relaunch_record_of(store, "rec").last_step, 4) << "nothing was started";

  // Recorded before the store kept launches: started again without the dashboard, and said so.
  rewrite_store(store, "UPDATE runs SET launch = NULL WHERE name = 'rec'");
  const CommandResult old = run_command(kiln + " runs resume rec --store " + store + " --set train.steps=6");
  ASSERT_EQ(old.exit_code, 0) << old.output;
  EXPECT_NE(old.output.find("kiln: run 1 ('rec') was recorded before kiln kept how runs were launched (store schema "
                            "8), so it starts again without a dashboard (kiln serve shows it)\n"),
            std::string::npos)
      << old.output;
  EXPECT_NE(old.output.find(" train --resume=" + checkpoint_of(dir, "rec", 4) + " --store=" + store +
                            " --name=rec --set=train.steps=6\n"),
            std::string::npos)
      << old.output;
  EXPECT_EQ(relaunch_record_of(store, "rec").last_step, 6);
}

// A run served with a token (from a file, or typed), resumed: refused without the token, and
// with it given again (--token-file, or $KILN_TOKEN) serving a dashboard that refuses changes
// without it.
void expect_token_asked_again(const std::string& name, bool from_file, const std::string& token) {
  const std::string dir = fresh_dir("relaunch_token_" + name);
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  std::ofstream(dir + "/token") << token << "\n";
  const std::string given = from_file ? "--token-file " + dir + "/token" : "--token " + token;
  // Started in `dir`, where kiln runs resume starts it again.
  const CommandResult trained = run_command("env -u KILN_TOKEN -C " + dir + " " + kiln + " train --name " + name +
                                            " --serve 127.0.0.1:0 " + given + " --store " + store +
                                            steady(prefix, dir, 4, 2));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  // A planted file named like the redacted value is never read as the token.
  std::ofstream(dir + "/***") << "planted\n";
  const std::string resume = kiln + " runs resume " + name + " --store " + store + " --set train.steps=300";
  const CommandResult without = run_command("env -u KILN_TOKEN " + resume);
  EXPECT_EQ(without.exit_code, 1) << without.output;
  EXPECT_EQ(without.output, "kiln: error: run 1 ('" + name +
                                "') served its dashboard with a token, which kiln never stores; give it again with "
                                "--token-file FILE, $KILN_TOKEN or --token TOKEN\n");
  EXPECT_EQ(relaunch_record_of(store, name).last_step, 4) << "nothing was started";

  // Each step at least 20 ms (a planted fault), so the run still serves while it is asked.
  const std::string log = dir + "/resume.log";
  const int pid = start_background(from_file ? "env -u KILN_TOKEN KILN_FAULTS=throughput@1:20 " + resume +
                                                   " --token-file " + dir + "/token"
                                             : "env KILN_TOKEN=" + token + " KILN_FAULTS=throughput@1:20 " + resume,
                                   log);
  const std::string url = wait_for_url(log);
  ASSERT_FALSE(url.empty()) << read_text(log);
  EXPECT_EQ(stop_status(url, name, ""), 401u);
  EXPECT_EQ(stop_status(url, name, "planted"), 401u);
  EXPECT_EQ(stop_status(url, name, token), 202u);
  EXPECT_EQ(wait_exit(pid), 0) << read_text(log);
  const std::string output = read_text(log);
  EXPECT_NE(output.find("kiln: the dashboard's token goes to the training in $KILN_TOKEN, off its command line\n"),
            std::string::npos)
      << output;
  EXPECT_EQ(output.find(token), std::string::npos) << "the token is never printed";
  const store::RunRecord run = relaunch_record_of(store, name);
  EXPECT_EQ(run.status, store::RunStatus::Stopped);
  EXPECT_LT(run.last_step.value_or(300), 300);
}

TEST(RelaunchSecurityCli, ARunServedWithATokenFileIsResumedOnlyWithTheTokenGivenAgain) {
  expect_token_asked_again("from-file", true, "t0ken-in-a-file");
}

TEST(RelaunchSecurityCli, ARunServedWithATypedTokenIsResumedOnlyWithTheTokenGivenAgain) {
  expect_token_asked_again("from-flag", false, "typed-t0ken");
}

// The run's first checkpoint, once the store has recorded it (false after 30 s).
bool wait_for_checkpoint(const std::string& path, const std::string& run) {
  for (int i = 0; i < 300; ++i) {
    if (last_step(path, run)) {
      auto db = store::open_store(path, store::Access::ReadOnly);
      if (!store::list_checkpoints(*db, store::resolve_run(*db, run)).empty()) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(RelaunchSecurityCli, ARunKilledAMomentAgoStartsAgainFromItsCheckpointInsteadOfBeingSentACommand) {
  const std::string dir = fresh_dir("relaunch_killed");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db", log = dir + "/train.log";
  // A checkpoint at step 5, then a minute's stall (a planted fault): killed, not finished.
  constexpr int kSteps = 20;
  const int pid = start_background("env KILN_FAULTS=stall@8:60 " + kiln + " train --name killed --store " + store +
                                       steady(prefix, dir, kSteps, 5),
                                   log);
  ASSERT_TRUE(wait_for_checkpoint(store, "killed")) << read_text(log);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  const store::RunRecord dead = relaunch_record_of(store, "killed");
  ASSERT_EQ(dead.status, store::RunStatus::Running) << "within the heartbeat window it still reads as running";
  ASSERT_LT(dead.last_step.value_or(kSteps), kSteps);

  const CommandResult resumed = run_command(kiln + " runs resume killed --store " + store);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find(fmt::format("kiln: run 1 ('killed') reads as running, but its process {} on {} is "
                                            "gone (killed, or the machine restarted)\nkiln: resuming run 1 ('killed') from ",
                                            pid, dead.host)),
            std::string::npos)
      << resumed.output;
  const store::RunRecord run = relaunch_record_of(store, "killed");
  EXPECT_EQ(run.status, store::RunStatus::Completed);
  EXPECT_EQ(run.last_step, kSteps);
  {
    auto db = store::open_store(store, store::Access::ReadOnly);
    EXPECT_TRUE(store::list_commands(*db, run.id).empty()) << "no steering command was queued";
  }

  // A run that reads as running on another host cannot be judged from here: the resume is
  // queued, as for a live run, and the line says why.
  rewrite_store(store, "UPDATE runs SET status = 'running', host = 'elsewhere', pid = 1, heartbeat_at = "
                       "(julianday('now') - 2440587.5) * 86400.0 WHERE id = 1");
  const CommandResult elsewhere = run_command(kiln + " runs resume killed --store " + store);
  EXPECT_EQ(elsewhere.exit_code, 0) << elsewhere.output;
  EXPECT_NE(elsewhere.output.find("kiln: run 1 runs on elsewhere, not here: kiln cannot tell whether its process "
                                  "lives, so it queues a resume as for a paused run; if the process died, resume it "
                                  "there, or here once it reads as lost (30 s without a heartbeat)\n"),
            std::string::npos)
      << elsewhere.output;
  EXPECT_NE(elsewhere.output.find("queued resume for run 1 (killed) as command 1"), std::string::npos)
      << elsewhere.output;
}

}  // namespace
}  // namespace kiln::test
