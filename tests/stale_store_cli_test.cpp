// End-to-end, through the real binary: a store whose writer died with its newest commits
// still in its -wal, read by another user (nobody) from a folder that user may not write,
// so SQLite cannot create the store's -shm index there. The reader shows the newest data or
// refuses in one line that says why; it never shows what the main file alone holds (an
// empty store, or an old one) as if it were the whole store.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups ";

// The highest step the store shows for run `name` (as root, who may create the -shm), or -1.
int64_t last_step(const std::string& store, const std::string& name) {
  try {
    auto db = store::open_store(store, store::Access::ReadOnly);
    return store::get_run(*db, store::resolve_run(*db, name)).last_step.value_or(-1);
  } catch (const std::exception&) {
    return -1;
  }
}

void copy_into(const std::string& folder, const std::string& from, std::initializer_list<const char*> suffixes) {
  fs::create_directories(folder);
  for (const char* suffix : suffixes)
    fs::copy_file(from + suffix, folder + "/runs.db" + suffix, fs::copy_options::overwrite_existing);
}

void read_only_for_others(const std::string& folder) {
  fs::permissions(folder, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
}

class StaleStoreCli : public ::testing::Test {
 protected:
  // Once for the suite: a run killed with SIGKILL after it recorded step 4, held at step 5
  // by a planted stall, so steps 1 to 4 are committed and, the run being young, still in the
  // -wal (SQLite moves them to the main file only every 1000 pages).
  static void SetUpTestSuite() {
    if (geteuid() != 0) return;
    dir_ = fresh_dir("stale_store");
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
    const std::string prefix = prepare_corpus(dir_);
    store_ = dir_ + "/killed/runs.db";
    fs::create_directories(dir_ + "/killed");
    const int pid = start_background(
        "env KILN_FAULTS=stall@5:600 " + kiln + " train --name killed --store " + store_ + small_run(prefix) +
            " --set train.steps=8 --set train.log_interval=1 --set train.eval_interval=0"
            " --set train.sample_tokens=0 --set train.checkpoint_dir=" + dir_ + "/checkpoints",
        dir_ + "/train.log");
    for (int i = 0; i < 600 && last_step(store_, "killed") < 4; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(pid, SIGKILL);
    wait_exit(pid);
  }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root, to read as another user";
    if (run_command(as_nobody + kiln + " --version").exit_code != 0)
      GTEST_SKIP() << "nobody may not run " << kiln;
    ASSERT_EQ(last_step(store_, "killed"), 4) << read_text(dir_ + "/train.log");
    ASSERT_TRUE(fs::exists(store_ + "-wal"));
    ASSERT_TRUE(fs::exists(store_ + "-shm"));
  }

  static std::string dir_;
  static std::string store_;
};

std::string StaleStoreCli::dir_;
std::string StaleStoreCli::store_;

json shown_as_nobody(const std::string& store) {
  const CommandResult r = run_command(as_nobody + kiln + " runs show killed --json --store " + store);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? json::parse(r.output) : json();
}

TEST_F(StaleStoreCli, ADeadWritersStoreWithItsIndexReadsWhole) {
  // The files as the killed writer left them (-shm included), in a folder nobody may not write:
  // SQLite's read-only WAL rules read the -wal through the existing index.
  const std::string folder = dir_ + "/as_left";
  copy_into(folder, store_, {"", "-wal", "-shm"});
  read_only_for_others(folder);
  const json run = shown_as_nobody(folder + "/runs.db");
  EXPECT_EQ(run.value("last_step", -1), 4) << run.dump();
  EXPECT_FALSE(fs::exists(folder + "/runs.db-journal"));
}

TEST_F(StaleStoreCli, ACopiedStoreAndWalWithoutIndexReadsTheNewestCommits) {
  // A store copied with its -wal but not its -shm (or whose -shm was removed): no -shm, and
  // nobody may not create one. Read as the main file alone it holds no run at all.
  const std::string folder = dir_ + "/copied";
  copy_into(folder, store_, {"", "-wal"});
  read_only_for_others(folder);
  const std::string store = folder + "/runs.db";
  const json run = shown_as_nobody(store);
  EXPECT_EQ(run.value("last_step", -1), 4) << run.dump();
  EXPECT_EQ(run.value("name", ""), "killed");
  const CommandResult listed = run_command(as_nobody + kiln + " runs list --store " + store);
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("killed"), std::string::npos) << listed.output;
  EXPECT_EQ(listed.output.find("no runs"), std::string::npos) << listed.output;
  // Reading wrote nothing beside the store, nor changed it.
  EXPECT_FALSE(fs::exists(store + "-shm"));
  EXPECT_EQ(fs::file_size(store + "-wal"), fs::file_size(store_ + "-wal"));
}

TEST_F(StaleStoreCli, AnIndexThisUserMayNotReadIsRefusedInOneLine) {
  // A -shm that exists but nobody may not open: a writer may be using it, so the newest
  // commits cannot be read safely. One line names the file, its owner and mode, and what to
  // do, instead of "no runs yet".
  const std::string folder = dir_ + "/private_index";
  copy_into(folder, store_, {"", "-wal", "-shm"});
  fs::permissions(folder + "/runs.db-shm", fs::perms::owner_read | fs::perms::owner_write);
  read_only_for_others(folder);
  const std::string store = folder + "/runs.db";
  const CommandResult listed = run_command(as_nobody + kiln + " runs list --store " + store);
  EXPECT_EQ(listed.exit_code, 1) << listed.output;
  EXPECT_EQ(listed.output, "kiln: error: store: " + store + " cannot be read whole: its newest commits are indexed in " +
                               store + "-shm (owner root, mode 0600), which this user (nobody) may not read, and a writer may be "
                               "using it; read the store as a user who may, or ask its owner to make " + store +
                               "-shm readable (it takes the store file's mode when a writer creates it)\n");
}

}  // namespace
}  // namespace kiln::test
