// End-to-end over several hosts on one machine (tests/netns_hosts.h): kiln train --hostfile
// --max-restarts supervises ranks spread over hosts. With --exclude-failed a host that dies is
// left out and the run goes on with fewer data-parallel ranks; and the chaos test: three
// faults at random steps (a host killed, a host cut off, a rank frozen) end in a completed run
// with the weights of a run that met none (docs/resilience.md).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/rank_places.h"
#include "store/run_figures.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/netns_hosts.h"
#include "tests/run_command.h"
#include "tests/run_progress.h"

namespace kiln::test {
namespace {

// Each step logged, a checkpoint every 10; a global batch of 8 (4 ranks, or 2 left).
std::string args(const std::string& prefix, int steps) {
  return small_run(prefix) + " --set train.global_batch=8 --set train.micro_batch=1 --set train.steps=" +
         std::to_string(steps) +
         " --set train.log_interval=1 --set train.checkpoint_interval=10 --set train.eval_interval=0"
         " --set train.sample_tokens=0 --set parallel.timeout_s=3";
}

std::vector<store::RankPlace> places(const std::string& store_path, const std::string& run) {
  auto db = store::open_store(store_path, store::Access::ReadOnly);
  return store::list_rank_places(*db, store::resolve_run(*db, run));
}

std::vector<store::Event> restarts(const std::string& store_path, const std::string& run) {
  auto db = store::open_store(store_path, store::Access::ReadOnly);
  std::vector<store::Event> found;
  for (const store::Event& e : store::list_events(*db, store::resolve_run(*db, run)))
    if (e.kind == "restart") found.push_back(e);
  return found;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Polls the log until `what` is in it `times` times; false after `seconds`.
bool wait_for_log(const std::string& log, const std::string& what, size_t times, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (count_of(read_text(log), what) >= times) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

void kill_ranks_on(const std::vector<store::RankPlace>& ranks, const std::string& host, int signal) {
  for (const store::RankPlace& p : ranks)
    if (p.host == host && p.pid) kill(static_cast<pid_t>(*p.pid), signal);
}

TEST(MultiHostRestart, ExcludeFailedGoesOnWithoutTheHostThatDied) {
  NetnsHosts hosts('x', 2);
  if (!hosts.up()) GTEST_SKIP() << hosts.why_not();
  const std::string dir = fresh_dir("multi_host_exclude");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db", log = dir + "/x.log";
  const int launcher = start_background("env KILN_FAULTS=slow@0:40 " + hosts.launch() + kiln + " train --ranks 4 --hostfile " +
                                            hosts.hostfile() + " --max-restarts 1 --exclude-failed --store " + store +
                                            " --name x" + args(prefix, 60),
                                        log);
  ASSERT_TRUE(wait_for_step_after(store, "x", 15)) << read_text(log);
  kill_ranks_on(places(store, "x"), hosts.host(1), SIGKILL);
  ASSERT_EQ(wait_exit(launcher), 0) << read_text(log);
  const std::string out = read_text(log);
  EXPECT_NE(out.find("kiln: restart 1 of 1: from " + dir + "/checkpoints/x/step-000000"), std::string::npos) << out;
  EXPECT_NE(out.find(") as 2 ranks on " + hosts.host(0) + "\n"), std::string::npos) << out;
  const std::vector<store::RankPlace> after = places(store, "x");
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].host, hosts.host(0));
  EXPECT_EQ(after[1].host, hosts.host(0));
  const std::vector<store::Event> events = restarts(store, "x");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].message.find("(host " + hosts.host(1) + ")"), std::string::npos) << events[0].message;
  EXPECT_NE(events[0].message.find(" on 2 ranks on " + hosts.host(0)), std::string::npos) << events[0].message;
  auto db = store::open_store(store, store::Access::ReadOnly);
  const store::RunRecord run = store::get_run(*db, store::resolve_run(*db, "x"));
  EXPECT_EQ(run.status, store::RunStatus::Completed);
  EXPECT_EQ(run.layout, "tp1.pp1.dp2");
}

TEST(MultiHostRestart, ChaosTestThreeFaultsEndInTheWeightsOfARunThatMetNone) {
  NetnsHosts hosts('c', 2);
  if (!hosts.up()) GTEST_SKIP() << hosts.why_not();
  const std::string dir = fresh_dir("multi_host_chaos");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db", log = dir + "/chaos.log";
  constexpr int kSteps = 200;
  const std::string tp2 = " --set parallel.tp=2";
  const CommandResult calm = run_command(hosts.launch() + kiln + " train --ranks 4 --hostfile " + hosts.hostfile() +
                                         " --no-store --name calm" + args(prefix, kSteps) + tp2);
  ASSERT_EQ(calm.exit_code, 0) << calm.output;

  std::random_device device;
  const unsigned seed = device();
  std::mt19937 random(seed);
  std::vector<std::string> faults = {"kill a host", "cut a host", "freeze a rank"};
  std::shuffle(faults.begin(), faults.end(), random);
  // The faults land at random steps, in turn, each after the restart before it trains again.
  std::vector<int64_t> at;
  for (int i = 0; i < 3; ++i) at.push_back(std::uniform_int_distribution<int64_t>(15, 55)(random) + 60 * i);
  std::printf("chaos seed %u: %s at step %ld, %s at %ld, %s at %ld\n", seed, faults[0].c_str(), at[0],
              faults[1].c_str(), at[1], faults[2].c_str(), at[2]);

  const int launcher = start_background("env KILN_FAULTS=slow@0:40 " + hosts.launch() + kiln + " train --ranks 4 --hostfile " +
                                            hosts.hostfile() + " --max-restarts 3 --store " + store + " --name chaos" +
                                            args(prefix, kSteps) + tp2,
                                        log);
  for (size_t i = 0; i < faults.size(); ++i) {
    if (i > 0) {
      ASSERT_TRUE(wait_for_log(log, "training again at step", i, 90)) << read_text(log);
    }
    ASSERT_TRUE(wait_for_step_after(store, "chaos", at[i])) << faults[i] << "\n" << read_text(log);
    const std::vector<store::RankPlace> ranks = places(store, "chaos");
    if (faults[i] == "kill a host") {
      kill_ranks_on(ranks, hosts.host(1), SIGKILL);
      ASSERT_TRUE(wait_for_log(log, "kiln: the run failed (", i + 1, 60)) << read_text(log);
    } else if (faults[i] == "cut a host") {
      ASSERT_EQ(run_command(source_dir() + "/scripts/netns-hosts cut " + hosts.name() + " " + hosts.host(1)).exit_code, 0);
      ASSERT_TRUE(wait_for_log(log, "kiln: the run failed (", i + 1, 60)) << read_text(log);
      // Mended within the pause before the restart, as a switch port that flapped.
      ASSERT_EQ(run_command(source_dir() + "/scripts/netns-hosts mend " + hosts.name() + " " + hosts.host(1)).exit_code, 0);
    } else {
      kill_ranks_on({ranks.at(3)}, hosts.host(1), SIGSTOP);
      ASSERT_TRUE(wait_for_log(log, "kiln: the run failed (", i + 1, 60)) << read_text(log);
      kill_ranks_on({ranks.at(3)}, hosts.host(1), SIGKILL);
    }
  }
  ASSERT_EQ(wait_exit(launcher), 0) << read_text(log);
  const std::string out = read_text(log);
  EXPECT_EQ(count_of(out, "training again at step"), 3u) << out;
  const auto weights = [&](const std::string& run) {
    return run_command("cat " + dir + "/checkpoints/" + run + "/step-00000200/*.safetensors | sha256sum").output;
  };
  EXPECT_EQ(weights("chaos"), weights("calm"));
  const size_t goodput = out.find("kiln: goodput ");
  ASSERT_NE(goodput, std::string::npos) << out;
  std::printf("%s", out.substr(goodput, out.find('\n', goodput) + 1 - goodput).c_str());
  EXPECT_EQ(restarts(store, "chaos").size(), 3u);
  auto db = store::open_store(store, store::Access::ReadOnly);
  EXPECT_EQ(store::get_run(*db, store::resolve_run(*db, "chaos")).status, store::RunStatus::Completed);
}

}  // namespace
}  // namespace kiln::test
