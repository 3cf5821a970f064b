// What a run's writer could not commit at exit goes to a recovery file, which loads into the
// store once, whole, and only into the run it belongs to.
#include "store/run_recovery.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::error_of;
using testing_util::interval;
using testing_util::run_info;
using testing_util::StoreTest;
namespace fs = std::filesystem;

class RunRecoveryTest : public StoreTest {
 protected:
  // A run whose store fills after its start: 300 steps, a checkpoint and its end are still
  // queued when the run closes its writer. Returns what close() said.
  WriterClose run_on_a_full_disk(const std::string& name) {
    WriterOptions options;
    options.heartbeat_interval_s = 0;
    options.on_open = [](Database& db) {
      db.exec("PRAGMA max_page_count = " + std::to_string(db.query_int("PRAGMA page_count") + 8));
    };
    RunWriter writer(path(), options);
    run_id_ = writer.create_run(run_info(name));
    for (int64_t step = 1; step <= 300; ++step) writer.log_metrics(interval(step, 4));
    writer.log_checkpoint({300, "/ckpt/" + name + "/step-00000300", 4096, "tp1.pp1.dp4", 0, 2.5});
    writer.finish(RunStatus::Completed);
    return writer.close();
  }

  int64_t count(const std::string& table) {
    auto db = open_store(path(), Access::ReadOnly);
    return db->query_int("SELECT count(*) FROM " + table + " WHERE run_id = " + std::to_string(run_id_));
  }

  int64_t run_id_ = 0;
};

TEST_F(RunRecoveryTest, WhatTheStoreCouldNotTakeLoadsOnceAndWhole) {
  const WriterClose closed = run_on_a_full_disk("full");
  EXPECT_GT(closed.items_left, 0u);
  EXPECT_EQ(closed.error.rfind("store: " + path() + ": disk full", 0), 0u) << closed.error;
  EXPECT_EQ(closed.recovery_error, "");
  EXPECT_EQ(closed.recovery_file, path() + ".run-1-" + std::to_string(getpid()) + ".recover");
  EXPECT_EQ(fs::status(closed.recovery_file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  {
    auto db = open_store(path(), Access::ReadOnly);
    const RunRecord before = get_run(*db, run_id_);
    EXPECT_EQ(before.stored_status, RunStatus::Running);
    EXPECT_LT(before.last_step.value_or(0), 300);
  }

  const RecoveryLoad load = load_recovery(closed.recovery_file);
  EXPECT_EQ(load.store, fs::absolute(path()).string());
  EXPECT_EQ(load.run_id, run_id_);
  EXPECT_EQ(load.run_name, "full");
  EXPECT_GT(load.metric_rows, 0);
  EXPECT_EQ(load.status, "completed");
  EXPECT_EQ(load.last_step, 300);
  auto db = open_store(path(), Access::ReadOnly);
  const RunRecord after = get_run(*db, run_id_);
  EXPECT_EQ(after.status, RunStatus::Completed);
  EXPECT_TRUE(after.ended_at.has_value());
  EXPECT_FALSE(after.pid.has_value());
  EXPECT_EQ(count("metrics"), 300 * 4);
  EXPECT_EQ(count("checkpoints"), 1);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM events WHERE kind = 'end' AND message = 'completed'"), 1);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM events WHERE kind = 'recovered'"), 1);
  EXPECT_EQ(db->query_text("SELECT message FROM events WHERE kind = 'error' AND message LIKE 'the store could not%'"),
            "the store could not take these rows when the run ended (" + closed.error + "); they were saved to " +
                closed.recovery_file + " for kiln runs recover");
  const int64_t events = count("events");

  const RecoveryLoad again = load_recovery(closed.recovery_file);
  EXPECT_TRUE(again.nothing_new());
  EXPECT_EQ(again.last_step, 300);
  EXPECT_EQ(count("events"), events);
  EXPECT_EQ(count("metrics"), 300 * 4);
}

TEST_F(RunRecoveryTest, AWriterWhoseStoreTookEverythingLeavesNoFile) {
  RunWriter writer(path());
  writer.create_run(run_info("fine"));
  writer.log_metrics(interval(1, 2));
  writer.finish(RunStatus::Completed);
  const WriterClose closed = writer.close();
  EXPECT_EQ(closed.items_left, 0u);
  EXPECT_EQ(closed.recovery_file, "");
  EXPECT_EQ(error_of([&] { writer.log_metrics(interval(2, 2)); }),
            "store: log after close: the writer of " + path() + " has stopped");
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) files += entry.path().extension() == ".recover";
  EXPECT_EQ(files, 0u);
}

TEST_F(RunRecoveryTest, RefusesWhatIsNotARecoveryFileOrNotItsRun) {
  const std::string file = run_on_a_full_disk("full").recovery_file;
  ASSERT_FALSE(file.empty());

  std::ofstream(path("notes.txt")) << "not a database, though long enough to look like one\n"
                                   << std::string(4096, 'x');
  EXPECT_EQ(error_of([&] { load_recovery(path("notes.txt")); }),
            "recover: " + path("notes.txt") + " is not a kiln recovery file (store: " + path("notes.txt") +
                " is not a kiln run store (file is not a database))");
  EXPECT_EQ(error_of([&] { load_recovery(path()); }),
            "recover: " + path() +
                " is a run store, not a recovery file (kiln writes one when a run ends with rows its store could "
                "not take); read it with --store");
  EXPECT_EQ(error_of([&] { load_recovery(path("missing.recover")); }), "recover: no file " + path("missing.recover"));
  EXPECT_EQ(error_of([&] { load_recovery(file, path("elsewhere.db")); }),
            "recover: no run store at " + path("elsewhere.db") + ", where " + file +
                "'s rows belong; give --store PATH if the store has moved");

  // The run removed, and another run under its name: the rows are not that run's.
  {
    auto db = open_store(path(), Access::ReadWrite);
    remove_run(*db, run_id_, true);
  }
  EXPECT_EQ(error_of([&] { load_recovery(file); }),
            "recover: " + fs::absolute(path()).string() + " has no run named 'full' (was it removed?); nothing loaded");
  {
    RunWriter writer(path());
    writer.create_run(run_info("full"));
    writer.finish(RunStatus::Completed);
  }
  const std::string refused = error_of([&] { load_recovery(file); });
  EXPECT_EQ(refused.rfind("recover: run 'full' in " + fs::absolute(path()).string() + " is another run than the one " +
                              file + " holds rows of (created ",
                          0),
            0u)
      << refused;
}

}  // namespace
}  // namespace kiln::store
