// End-to-end, through the real binary, on small tmpfs mounts that fill up: a checkpoint that
// cannot be written (synchronously or in the background) is a warning and an event, and the
// run trains on (failing only after train.checkpoint_failures in a row, leaving no
// half-written folder); a store that fills up loses nothing: what it could not take when the
// run ended is in a recovery file, which `kiln runs recover` loads into the store once it has
// room.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

// A tmpfs of `kib` KiB mounted at `dir` while it lives.
class Tmpfs {
 public:
  Tmpfs(const std::string& dir, int64_t kib) : dir_(dir) {
    fs::create_directories(dir);
    const CommandResult r = run_command("mount -t tmpfs -o size=" + std::to_string(kib) + "k tmpfs " + dir);
    mounted_ = r.exit_code == 0;
    error_ = r.output;
  }
  ~Tmpfs() {
    if (mounted_) run_command("umount " + dir_);
  }
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

// KiB the files under `dir` take on a tmpfs (whole 4 KiB pages).
int64_t kib_of(const std::string& dir) {
  int64_t kib = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) kib += (static_cast<int64_t>(entry.file_size()) + 4095) / 4096 * 4;
  return kib;
}

// Fills the filesystem of `dir` with a file, then gives `keep_kib` back.
void fill(const std::string& dir, int64_t keep_kib) {
  const std::string filler = dir + "/filler";
  const int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  const std::vector<char> block(4096, 'x');
  off_t size = 0;
  while (write(fd, block.data(), block.size()) == static_cast<ssize_t>(block.size())) size += 4096;
  ASSERT_EQ(ftruncate(fd, std::max<off_t>(0, size - keep_kib * 1024)), 0);
  close(fd);
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

class FullDiskCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root, to mount a tmpfs";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fresh_dir(std::string("full_disk_") + info->name());
    prefix_ = prepare_corpus(dir_);
    store_ = dir_ + "/runs.db";
  }

  // The small run, every step logged, no validation or sample, checkpoints every 2 steps in `checkpoints`.
  std::string run(const std::string& name, int steps, const std::string& checkpoints) const {
    return kiln + " train --name " + name + " --store " + store_ + small_run(prefix_) +
           " --set train.steps=" + std::to_string(steps) +
           " --set train.log_interval=1 --set train.eval_interval=0 --set train.sample_tokens=0"
           " --set train.checkpoint_interval=2 --set train.checkpoint_dir=" + checkpoints;
  }

  // A tmpfs for checkpoints that holds one of the small run's and half of another.
  int64_t room_for_one_checkpoint() {
    const CommandResult probe = run_command(run("probe", 2, dir_ + "/probe"));
    EXPECT_EQ(probe.exit_code, 0) << probe.output;
    return kib_of(dir_ + "/probe/probe") * 3 / 2;
  }

  // The run `name` of 6 steps wrote its checkpoint of step 2 under `checkpoints`, and those of
  // steps 4 and 6 found the disk full: two failures, under the default three in a row, each
  // a warning and an `error` event; the run completed.
  void expect_steps_4_and_6_unwritten(const CommandResult& r, const std::string& name,
                                      const std::string& checkpoints) {
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* step : {"4", "6"}) {
      const std::string warning = std::string("kiln: warning: the checkpoint of step ") + step + " was not written (";
      const size_t at = r.output.find(warning);
      ASSERT_NE(at, std::string::npos) << r.output;
      const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
      EXPECT_NE(line.find("No space left on device"), std::string::npos) << line;
      EXPECT_NE(line.find("training goes on and tries again at the next checkpoint"), std::string::npos) << line;
    }
    EXPECT_NE(r.output.find("step 6/6"), std::string::npos) << r.output;
    // No half-written folder is left taking the space: step 2's checkpoint and `latest` only.
    EXPECT_EQ(names_in(checkpoints + "/" + name), (std::set<std::string>{"latest", "step-00000002"}));
    EXPECT_EQ(read_text(checkpoints + "/" + name + "/latest"), "step-00000002\n");

    auto db = store::open_store(store_, store::Access::ReadOnly);
    const int64_t id = store::resolve_run(*db, name);
    const store::RunRecord record = store::get_run(*db, id);
    EXPECT_EQ(record.status, store::RunStatus::Completed);
    EXPECT_EQ(record.last_step, 6);
    store::Statement events(*db, "SELECT step, message FROM events WHERE run_id = ? AND kind = 'error' ORDER BY id");
    events.bind(1, id);
    std::vector<int64_t> failed_steps;
    while (events.step()) {
      failed_steps.push_back(events.int64(0));
      EXPECT_EQ(events.text(1).rfind("the checkpoint of step " + std::to_string(events.int64(0)) + " was not written (", 0),
                0u)
          << events.text(1);
    }
    EXPECT_EQ(failed_steps, (std::vector<int64_t>{4, 6}));
    EXPECT_EQ(db->query_int("SELECT count(*) FROM checkpoints WHERE run_id = " + std::to_string(id)), 1);
  }

  std::string dir_, prefix_, store_;
};

TEST_F(FullDiskCli, CheckpointsThatHitAFullDiskWarnAndTheRunCompletes) {
  const std::string checkpoints = dir_ + "/checkpoints";
  const Tmpfs disk(checkpoints, room_for_one_checkpoint());
  ASSERT_TRUE(disk.mounted()) << disk.error();
  expect_steps_4_and_6_unwritten(run_command(run("squeezed", 6, checkpoints)), "squeezed", checkpoints);
}

// Written in the background, step 4's failure is found at a later step boundary, and counted
// and recorded as a synchronous one is.
TEST_F(FullDiskCli, CheckpointsWrittenInTheBackgroundThatHitAFullDiskWarnTheSame) {
  const std::string checkpoints = dir_ + "/checkpoints";
  const Tmpfs disk(checkpoints, room_for_one_checkpoint());
  ASSERT_TRUE(disk.mounted()) << disk.error();
  const CommandResult r = run_command(run("squeezed", 6, checkpoints) + " --set train.async_checkpoint=true");
  EXPECT_NE(r.output.find("kiln: checkpoint step 4 snapshot in "), std::string::npos) << r.output;
  expect_steps_4_and_6_unwritten(r, "squeezed", checkpoints);
}

TEST_F(FullDiskCli, CheckpointsFailingInARowFailTheRun) {
  const std::string checkpoints = dir_ + "/checkpoints";
  const Tmpfs disk(checkpoints, room_for_one_checkpoint());
  ASSERT_TRUE(disk.mounted()) << disk.error();
  const CommandResult r = run_command(run("doomed", 8, checkpoints) + " --set train.checkpoint_failures=2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("kiln: warning: the checkpoint of step 4 was not written ("), std::string::npos) << r.output;
  const std::regex error(
      "kiln: error: the checkpoint of step 6 was not written \\([^\n]*No space left on device[^\n]*\\): 2 checkpoints "
      "in a row could not be written \\(train.checkpoint_failures=2\\), so the run stops; [^\n]*\n");
  EXPECT_TRUE(std::regex_search(r.output, error)) << r.output;
  EXPECT_EQ(r.output.find("step 7/8"), std::string::npos) << r.output;
  EXPECT_EQ(names_in(checkpoints + "/doomed"), (std::set<std::string>{"latest", "step-00000002"}));
  auto db = store::open_store(store_, store::Access::ReadOnly);
  EXPECT_EQ(store::get_run(*db, store::resolve_run(*db, "doomed")).status, store::RunStatus::Failed);
}

TEST_F(FullDiskCli, AStoreOnAFullDiskLeavesARecoveryFileThatRecoverLoads) {
  const std::string folder = dir_ + "/store", tmp = dir_ + "/tmp";
  fs::create_directories(tmp);
  const Tmpfs disk(folder, 2048);
  ASSERT_TRUE(disk.mounted()) << disk.error();
  store_ = folder + "/runs.db";
  const CommandResult first = run_command(run("first", 2, dir_ + "/checkpoints"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // Room to open the store and record the run's start, not its 200 steps.
  fill(folder, 96);
  const CommandResult r = run_command("TMPDIR=" + tmp + " " + run("starved", 200, dir_ + "/checkpoints") +
                                      " --set train.checkpoint_interval=50");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch found;
  ASSERT_TRUE(std::regex_search(r.output, found, std::regex("kiln runs recover (\\S+)\n"))) << r.output;
  const std::string file = found[1];
  // Beside the store there was no room: the temp folder took it.
  EXPECT_EQ(fs::path(file).parent_path(), fs::path(tmp)) << file;
  EXPECT_NE(r.output.find("kiln: warning: the run store " + store_ + " could not take the run's last "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("disk full"), std::string::npos) << r.output;
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);

  int64_t id = 0;
  {
    auto db = store::open_store(store_, store::Access::ReadOnly);
    id = store::resolve_run(*db, "starved");
    const store::RunRecord before = store::get_run(*db, id);
    EXPECT_EQ(before.stored_status, store::RunStatus::Running);
    EXPECT_LT(before.last_step.value_or(0), 200);
  }

  fs::remove(folder + "/filler");
  const CommandResult loaded = run_command(kiln + " runs recover " + file);
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_EQ(loaded.output.rfind("loaded " + file + " into " + store_ + ": ", 0), 0u) << loaded.output;
  EXPECT_NE(loaded.output.find(", now completed; last step 200\n"), std::string::npos) << loaded.output;

  const CommandResult shown = run_command(kiln + " runs show starved --store " + store_);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_NE(shown.output.find("completed"), std::string::npos) << shown.output;
  auto db = store::open_store(store_, store::Access::ReadOnly);
  const store::RunRecord after = store::get_run(*db, id);
  EXPECT_EQ(after.status, store::RunStatus::Completed);
  EXPECT_EQ(after.last_step, 200);
  const std::string run = " WHERE run_id = " + std::to_string(id);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metrics" + run), 200);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM checkpoints" + run), 4);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM events" + run + " AND kind = 'end'"), 1);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM events" + run + " AND kind = 'recovered'"), 1);
  const int64_t events = db->query_int("SELECT count(*) FROM events" + run);

  // Loading it again adds nothing.
  const CommandResult again = run_command(kiln + " runs recover " + file);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.output, store_ + " already holds everything in " + file + ": nothing loaded (run " +
                              std::to_string(id) + " (starved), last step 200)\n");
  EXPECT_EQ(db->query_int("SELECT count(*) FROM events" + run), events);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM metrics" + run), 200);

  // A file that is not a recovery file is refused, in one line, and changes nothing.
  const CommandResult a_store = run_command(kiln + " runs recover " + store_);
  EXPECT_EQ(a_store.exit_code, 1) << a_store.output;
  EXPECT_EQ(a_store.output.rfind("kiln: error: recover: " + store_ + " is a run store, not a recovery file", 0), 0u)
      << a_store.output;
  const CommandResult text = run_command(kiln + " runs recover " + prefix_ + ".idx");
  EXPECT_EQ(text.exit_code, 1) << text.output;
  EXPECT_EQ(text.output.rfind("kiln: error: recover: " + prefix_ + ".idx is not a kiln recovery file (", 0), 0u)
      << text.output;
  EXPECT_EQ(db->query_int("SELECT count(*) FROM events" + run), events);
}

}  // namespace
}  // namespace kiln::test
