// A store read by a user who may not create its -shm index (a folder not theirs to write):
// read whole from its -wal, refused in one line when its -shm exists but may not be read,
// and refused once a writer has started since the reader opened it.
#include "store/unindexed_read.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "store/database.h"
#include "store/metric_queries.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::as_unprivileged;
using testing_util::error_of;
using testing_util::interval;
using testing_util::run_info;
using testing_util::StoreTest;
namespace fs = std::filesystem;

class UnindexedReadTest : public StoreTest {
 protected:
  // A run of 30 steps whose every commit is still in the -wal (the writer never reached a
  // checkpoint of the -wal), copied with the files named by `suffixes` into a folder that
  // others may read, not write: what a writer that died leaves, or a copy of its store.
  std::string copied_store(std::initializer_list<const char*> suffixes) {
    WriterOptions options;
    options.heartbeat_interval_s = 0;  // nothing commits while the files are copied
    RunWriter writer(path(), options);
    writer.create_run(run_info("in-the-wal"));
    for (int64_t step = 1; step <= 30; ++step) writer.log_metrics(interval(step, 2));
    writer.flush();
    EXPECT_GT(fs::file_size(path() + "-wal"), 0u);
    const fs::path folder = dir_ / "copy";
    fs::create_directories(folder);
    for (const char* suffix : suffixes) fs::copy_file(path() + suffix, (folder / "runs.db").string() + suffix);
    fs::permissions(folder, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
    return (folder / "runs.db").string();
  }
};

std::string runs_and_rows(const std::string& store) {
  auto db = open_store(store, Access::ReadOnly);
  const auto runs = list_runs(*db);
  int64_t rows = 0;
  for (const auto& run : runs) for_each_metric(*db, run.id, [&](const MetricRow&) { ++rows; });
  return std::to_string(runs.size()) + " run(s), " + std::to_string(rows) + " rows, last step " +
         (runs.empty() ? "-" : std::to_string(runs[0].last_step.value_or(-1)));
}

TEST_F(UnindexedReadTest, ACopiedStoreAndWalWithoutTheIndexReadWhole) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to read as another user";
  const std::string store = copied_store({"", "-wal"});
  EXPECT_EQ(unindexed_read(store, ""), UnindexedRead::PrivateIndex);
  EXPECT_EQ(as_unprivileged([&] { return runs_and_rows(store); }), "1 run(s), 60 rows, last step 30");
  EXPECT_FALSE(fs::exists(store + "-shm"));  // read without writing a thing beside it
}

TEST_F(UnindexedReadTest, AStoreWithoutWalReadsItsMainFile) {
  {
    RunWriter writer(path());
    writer.create_run(run_info("closed"));
    writer.log_metrics(interval(1, 2));
    writer.finish(RunStatus::Completed);
    writer.flush();
  }  // the last connection moves the -wal into the main file and removes it
  ASSERT_FALSE(fs::exists(path() + "-wal"));
  EXPECT_EQ(unindexed_read(path(), ""), UnindexedRead::MainFileOnly);
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  EXPECT_EQ(as_unprivileged([&] { return runs_and_rows(path()); }), "1 run(s), 2 rows, last step 1");
}

TEST_F(UnindexedReadTest, AnIndexThisUserMayNotReadIsRefusedInOneLine) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to read as another user";
  const std::string store = copied_store({"", "-wal", "-shm"});
  fs::permissions(store + "-shm", fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(as_unprivileged([&] { return error_of([&] { open_store(store, Access::ReadOnly); }); }),
            "store: " + store + " cannot be read whole: its newest commits are indexed in " + store +
                "-shm (owner root, mode 0600), which this user (nobody) may not read, and a writer may be using "
                "it; read the store as a user who may, or ask its owner to make " + store +
                "-shm readable (it takes the store file's mode when a writer creates it)");
}

TEST_F(UnindexedReadTest, AReaderWithoutTheIndexRefusesOnceAWriterStarts) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to read as another user";
  const std::string store = copied_store({"", "-wal"});
  int to_parent[2], to_child[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(to_child), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    std::string report;
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    try {
      auto db = open_store(store, Access::ReadOnly);
      report = std::to_string(list_runs(*db).size()) + " run(s); ";
      char go = 0;
      if (write(to_parent[1], "r", 1) != 1 || read(to_child[0], &go, 1) != 1) _exit(3);
      report += error_of([&] { list_runs(*db); });
    } catch (const std::exception& e) {
      report = std::string("unexpected: ") + e.what();
    }
    _exit(write(to_parent[1], report.data(), report.size()) == static_cast<ssize_t>(report.size()) ? 0 : 1);
  }
  char ready = 0;
  ASSERT_EQ(read(to_parent[0], &ready, 1), 1);
  {
    // Root may write the folder: a writer starts on the copy and records a second run.
    RunWriter writer(store);
    writer.create_run(run_info("after"));
    writer.flush();
    ASSERT_EQ(write(to_child[1], "g", 1), 1);
    close(to_parent[1]);
    std::string report;
    char buffer[1024];
    for (ssize_t n; (n = read(to_parent[0], buffer, sizeof buffer)) > 0;) report.append(buffer, static_cast<size_t>(n));
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_EQ(report, "1 run(s); " + store_changed_message(store));
  }
}

}  // namespace
}  // namespace kiln::store
