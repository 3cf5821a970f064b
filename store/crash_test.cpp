// kill -9 of the writing process at random moments, again and again, on one store file:
// every step whose commit was reported must be there, whole, with its exact values; a step
// is all ranks or none; and the file must pass SQLite's integrity check.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>

#include "base/check.h"
#include "store/metric_queries.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::interval;
using testing_util::loss_of;
using testing_util::run_info;
using testing_util::StoreTest;

class CrashTest : public StoreTest {};

constexpr int kRanks = 4;

// The child: records a run, one step per transaction, and after each commit tells the
// parent the step number through the pipe. It runs until it is killed.
[[noreturn]] void write_until_killed(const std::string& path, int round, int fd) {
  try {
    WriterOptions options;
    options.heartbeat_interval_s = 0.005;  // heartbeats commit concurrently with the steps
    RunWriter writer(path, options);
    writer.create_run(run_info("crash-" + std::to_string(round)));
    for (int64_t step = 0;; ++step) {
      writer.log_metrics(interval(step, kRanks));
      if (step % 16 == 0) writer.log_event("note", "at step " + std::to_string(step), step);
      writer.flush();
      if (write(fd, &step, sizeof step) != sizeof step) _exit(3);
    }
  } catch (...) {
    _exit(2);
  }
}

// Checks one run's rows: steps 0..n-1 each with every rank and exact values. Returns n.
int64_t check_run(Database& db, int64_t run) {
  std::map<int64_t, int> ranks;
  bool exact = true;
  for_each_metric(db, run, [&](const MetricRow& r) {
    ++ranks[r.step];
    exact = exact && r.loss == loss_of(r.step, r.rank) && r.tokens == r.step * 4096;
  });
  EXPECT_TRUE(exact) << "run " << run;
  int64_t expected = 0;
  for (const auto& [step, n] : ranks) {
    EXPECT_EQ(step, expected) << "a hole in run " << run;
    EXPECT_EQ(n, kRanks) << "step " << step << " of run " << run << " is partial";
    expected = step + 1;
  }
  return static_cast<int64_t>(ranks.size());
}

TEST_F(CrashTest, KillNineAtRandomMomentsLosesNoCommittedStep) {
  std::mt19937 rng(20240601);
  // The first kills come early (inside schema creation and create_run), later ones mid-run.
  const std::vector<int> fixed_delays_us = {2000, 10000, 15000, 20000};
  std::map<int, int64_t> reported;  // round -> last step reported committed (-1: none)
  constexpr int kRounds = 12;
  for (int round = 0; round < kRounds; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      write_until_killed(path(), round, fds[1]);
    }
    close(fds[1]);
    const int delay_us = round < static_cast<int>(fixed_delays_us.size())
                             ? fixed_delays_us[static_cast<size_t>(round)]
                             : std::uniform_int_distribution<int>(20000, 250000)(rng);
    usleep(static_cast<useconds_t>(delay_us));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child stopped by itself, exit " << WEXITSTATUS(status);
    int64_t step = -1, last = -1;
    while (read(fds[0], &step, sizeof step) == sizeof step) last = step;
    close(fds[0]);
    reported[round] = last;

    // Read it as the next `kiln runs show` would, then check the file itself.
    std::unique_ptr<Database> db;
    try {
      db = open_store(path(), Access::ReadOnly);
    } catch (const Error& e) {
      // Killed before the file or its schema was committed: nothing can have been reported.
      const std::string message = e.what();
      EXPECT_TRUE(message == "store: " + path() + ": no such run store" ||
                  message == "store: " + path() + " holds no kiln runs yet (an empty store)")
          << message;
      for (const auto& [r, last_step] : reported) EXPECT_EQ(last_step, -1) << "round " << r;
      continue;
    }
    EXPECT_EQ(db->query_text("PRAGMA integrity_check"), "ok");
    for (int r = 0; r <= round; ++r) {
      const int64_t id = db->query_int(
          "SELECT id FROM runs WHERE name = 'crash-" + std::to_string(r) + "'", 0);
      if (id == 0) {  // killed before create_run committed
        EXPECT_EQ(reported[r], -1) << "round " << r;
        continue;
      }
      const int64_t steps = check_run(*db, id);
      // Every reported step is there; at most one more (committed, not yet reported).
      EXPECT_GE(steps, reported[r] + 1) << "round " << r;
      EXPECT_LE(steps, reported[r] + 2) << "round " << r;
      EXPECT_EQ(get_run(*db, id, 0).status, RunStatus::Lost);  // died without ending
    }
  }
  // The later rounds ran long enough to commit many steps.
  int64_t most = -1;
  for (const auto& [round, last] : reported) most = std::max(most, last);
  EXPECT_GT(most, 50);
  // A writer can open the file again and carry on.
  RunWriter writer(path());
  writer.create_run(run_info("after-the-crashes"));
  writer.log_metrics(interval(0, kRanks));
  writer.finish(RunStatus::Completed);
  writer.flush();
}

}  // namespace
}  // namespace kiln::store

namespace kiln::store {
namespace {

// A writer killed inside a transaction of a rollback-journal file (a migration, before the
// store turns to WAL) leaves a hot journal: a reader must see the file as it was before the
// transaction, not half of it.
TEST_F(CrashTest, AReaderRollsBackWhatADeadWriterLeftHalfDone) {
  {
    Database db(path(), Access::ReadWrite);
    db.exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1)");
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Database db(path(), Access::ReadWrite);
    db.exec("BEGIN; DELETE FROM t; CREATE TABLE u (y); INSERT INTO t VALUES (2), (3)");
    db.exec("PRAGMA cache_spill = 1; CREATE TABLE big AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) SELECT i, randomblob(200) FROM n");
    _exit(0);  // no commit, no rollback: the journal stays hot
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(std::filesystem::exists(path() + "-journal")) << "the child left no hot journal";
  Database db(path(), Access::ReadOnly);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM t"), 1);
  EXPECT_EQ(db.query_int("SELECT x FROM t"), 1);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM sqlite_schema WHERE name IN ('u', 'big')"), 0);
  EXPECT_EQ(db.query_text("PRAGMA integrity_check"), "ok");
}

}  // namespace
}  // namespace kiln::store
