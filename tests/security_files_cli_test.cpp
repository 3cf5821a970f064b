// End-to-end: the files kiln reads back and writes for one user, as another user sharing the
// machine would attack them (docs/security.md#checkpoints-logs-and-the-files-kiln-reads-back):
// a hook planted in a checkpoint is not run on resume, checkpoints are private whatever the
// umask, another user's checkpoint or a planted link is refused on resume and on write,
// `--resume latest` picks only the user's own runs, small files are read to a bound and only
// when regular, and a blank $KILN_TOKEN is refused. Each test runs the real binary.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "store/json_rows.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"
#include "trainer/checkpoint/durable_file.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uid_t kNobody = 65534;

// A regression that reads a link to /dev/zero without end fails here on memory, within seconds,
// rather than taking the machine's; one that waits on a FIFO ends at the timeout (exit 124).
const std::string kBounded = "ulimit -v 4194304; timeout 20 ";

class SecurityFilesCli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir(testing::UnitTest::GetInstance()->current_test_info()->name());
    checkpoints_ = dir_ + "/checkpoints";
  }
  // The corpus the small run trains on, prepared by the tests that train.
  const std::string& prefix() {
    if (prefix_.empty()) prefix_ = prepare_corpus(dir_);
    return prefix_;
  }
  // Eight steps of the small run, logged each step, a checkpoint at steps 4 and 8.
  std::string eight_steps() {
    return small_run(prefix()) + " --set train.steps=8 --set train.log_interval=1 --set train.eval_interval=0"
                                " --set train.sample_tokens=0 --set train.checkpoint_interval=4"
                                " --set train.checkpoint_dir=" + checkpoints_;
  }
  void train_base(const std::string& name, const std::string& settings = "") {
    const CommandResult r = run_command(kiln + " train --no-store --name " + name + eight_steps() + settings);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  std::string dir_, prefix_, checkpoints_;
};

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

bool is_empty_folder(const std::string& path) { return fs::is_directory(path) && fs::is_empty(path); }

// Sets config.alerts.command in a checkpoint's state.json and records the file's new size and
// SHA-256 in its manifest, as anyone who can write the files can: the checksum has no key.
void plant_hook(const std::string& checkpoint, const std::string& command) {
  const std::string state_path = checkpoint + "/state.json", manifest_path = checkpoint + "/manifest.json";
  json state = json::parse(read_text(state_path));
  state["config"]["alerts"]["command"] = command;
  std::ofstream(state_path, std::ios::trunc) << state.dump(2) << "\n";
  json manifest = json::parse(read_text(manifest_path));
  manifest["files"]["state.json"] = {{"bytes", fs::file_size(state_path)}, {"sha256", sha256_of_file(state_path)}};
  std::ofstream(manifest_path, std::ios::trunc) << manifest.dump(2) << "\n";
}

TEST_F(SecurityFilesCli, AHookPlantedInACheckpointIsNotRunNamedAndNotKept) {
  const std::string store = dir_ + "/runs.db", ran = dir_ + "/hook-ran";
  // The memory rule at this fraction fires at the first logged step of every run: an alert the
  // resumed run raises at once, for its hook (if it had one) to take.
  train_base("base", " --set alerts.memory_fraction=0.000001");
  const std::string hook = "touch " + ran;
  plant_hook(checkpoints_ + "/base/step-00000004", hook);

  const CommandResult forked =
      run_command(kiln + " train --store " + store + " --name forked --resume " + checkpoints_ + "/base/step-00000004");
  ASSERT_EQ(forked.exit_code, 0) << forked.output;
  EXPECT_NE(forked.output.find("kiln: alert: memory: "), std::string::npos) << forked.output;
  EXPECT_FALSE(fs::exists(ran)) << forked.output;
  EXPECT_NE(forked.output.find("kiln: warning: not running the alert hook the checkpoint holds, alerts.command \"" +
                               hook + "\": a resumed run runs only a hook its own command line gives "
                               "(--set alerts.command=COMMAND, or a --config file that sets it)\n"),
            std::string::npos)
      << forked.output;

  // Not copied on: neither into the next checkpoint nor into the run's record.
  const json next = json::parse(read_text(checkpoints_ + "/forked/step-00000008/state.json"));
  EXPECT_EQ(next["config"]["alerts"]["command"], "");
  auto db = store::open_store(store, store::Access::ReadOnly);
  EXPECT_EQ(store::config_json(store::get_run(*db, store::resolve_run(*db, "forked")))["alerts"]["command"], "");

  // A hook given on the resuming command line is the user's own, and runs.
  const CommandResult given = run_command(kiln + " train --store " + store + " --name given --resume " + checkpoints_ +
                                          "/base/step-00000004 --set 'alerts.command=" + hook + "'");
  ASSERT_EQ(given.exit_code, 0) << given.output;
  EXPECT_EQ(given.output.find("not running the alert hook"), std::string::npos) << given.output;
  EXPECT_TRUE(fs::exists(ran)) << given.output;
}

TEST_F(SecurityFilesCli, CheckpointsArePrivateWhateverTheUmask) {
  const CommandResult r = run_command("umask 002; " + kiln + " train --no-store --name open" + eight_steps());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string run = checkpoints_ + "/open";
  EXPECT_EQ(mode_of(run), 0700u);
  EXPECT_EQ(mode_of(run + "/latest"), 0600u);
  for (const std::string step : {"/step-00000004", "/step-00000008"}) {
    EXPECT_EQ(mode_of(run + step), 0700u) << step;
    for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.json", "manifest.json"})
      EXPECT_EQ(mode_of(run + step + "/" + file), 0600u) << step << "/" << file;
  }
}

TEST_F(SecurityFilesCli, ACheckpointOfAnotherUserIsRefusedOnResume) {
  train_base("base");
  const std::string checkpoint = checkpoints_ + "/base/step-00000004";
  ASSERT_EQ(::chown(checkpoint.c_str(), kNobody, kNobody), 0);
  const CommandResult r = run_command(kiln + " train --no-store --resume " + checkpoint);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("kiln: error: checkpoint: the checkpoint folder " + checkpoint + " belongs to ", 0), 0u)
      << r.output;
  EXPECT_NE(r.output.find(", not to you; kiln resumes only checkpoints of your own (copy one you trust into a "
                          "folder of yours)\n"),
            std::string::npos)
      << r.output;

  // A file in it that others may write is refused the same way, with what to do.
  ASSERT_EQ(::chown(checkpoint.c_str(), ::geteuid(), ::getegid()), 0);
  fs::permissions(checkpoint + "/state.json", fs::perms::group_write, fs::perm_options::add);
  const CommandResult writable = run_command(kiln + " train --no-store --resume " + checkpoint);
  EXPECT_EQ(writable.exit_code, 1) << writable.output;
  EXPECT_EQ(writable.output, "kiln: error: checkpoint: the checkpoint file " + checkpoint +
                                 "/state.json may be written by other users (mode 0620); `chmod go-w` it if you "
                                 "trust it; kiln resumes only checkpoints of your own (copy one you trust into a "
                                 "folder of yours)\n");
}

TEST_F(SecurityFilesCli, LinkedStepAndRunFoldersAreRefusedOnResume) {
  train_base("base");
  // A step folder that is a link, to a whole checkpoint elsewhere.
  const std::string step = checkpoints_ + "/base/step-00000004", elsewhere = dir_ + "/elsewhere";
  fs::create_directory(elsewhere);
  fs::rename(step, elsewhere + "/step-00000004");
  fs::create_directory_symlink(elsewhere + "/step-00000004", step);
  const CommandResult linked_step = run_command(kiln + " train --no-store --resume " + step);
  EXPECT_EQ(linked_step.exit_code, 1) << linked_step.output;
  EXPECT_EQ(linked_step.output.rfind("kiln: error: checkpoint: the checkpoint folder " + step +
                                         " is a symbolic link; kiln does not follow links it reads back or writes into",
                                     0),
            0u)
      << linked_step.output;

  // A run folder that is a link: its `latest` is not followed through it.
  const std::string alias = checkpoints_ + "/alias";
  fs::create_directory_symlink(checkpoints_ + "/base", alias);
  const CommandResult linked_run = run_command(kiln + " train --no-store --set train.steps=9 --resume " + alias);
  EXPECT_EQ(linked_run.exit_code, 1) << linked_run.output;
  EXPECT_EQ(linked_run.output.rfind("kiln: error: checkpoint: the run folder " + alias + " is a symbolic link;", 0),
            0u)
      << linked_run.output;
  EXPECT_FALSE(fs::exists(checkpoints_ + "/base/step-00000009")) << linked_run.output;
}

TEST_F(SecurityFilesCli, LinkedRunAndStepFoldersAreNotWrittenThrough) {
  // A link planted where a new run's checkpoints go: the run stops before its first step.
  const std::string target = dir_ + "/target";
  fs::create_directories(checkpoints_);
  fs::create_directory(target);
  fs::create_directory_symlink(target, checkpoints_ + "/victim");
  const CommandResult fresh = run_command(kiln + " train --no-store --name victim" + eight_steps());
  EXPECT_EQ(fresh.exit_code, 1) << fresh.output;
  EXPECT_NE(fresh.output.find("kiln: error: checkpoint: the run folder " + checkpoints_ +
                              "/victim is a symbolic link; kiln does not follow links it reads back or writes into; "
                              "checkpoints go only into folders of your own (give the run another --name, or remove "
                              "it)\n"),
            std::string::npos)
      << fresh.output;
  EXPECT_EQ(fresh.output.find("step 1/8"), std::string::npos) << fresh.output;
  EXPECT_TRUE(is_empty_folder(target));

  // A link where a resumed run writes a step again: that checkpoint is refused, as one the disk
  // refuses is (a warning, train.checkpoint_failures), and nothing is written through it.
  train_base("base");
  const std::string step = checkpoints_ + "/base/step-00000008";
  fs::remove_all(step);
  fs::create_directory_symlink(target, step);
  const CommandResult resumed = run_command(kiln + " train --no-store --resume " + checkpoints_ + "/base/step-00000004");
  EXPECT_NE(resumed.output.find("kiln: warning: the checkpoint of step 8 was not written (checkpoint: the step folder " +
                                step + " is a symbolic link;"),
            std::string::npos)
      << resumed.output;
  EXPECT_TRUE(is_empty_folder(target));
  EXPECT_TRUE(fs::is_symlink(step));
}

TEST_F(SecurityFilesCli, ResumeLatestPicksOnlyTheUsersOwnRuns) {
  train_base("mine");
  train_base("theirs");
  // Another user's run in a shared checkpoint_dir, newer than the user's own.
  ASSERT_EQ(run_command("chown -R 65534:65534 " + checkpoints_ + "/theirs && touch -d '+1 hour' " + checkpoints_ +
                        "/theirs/latest")
                .exit_code,
            0);
  const CommandResult r = run_command(kiln + " train --no-store --resume latest --set train.steps=9 --set "
                                      "train.checkpoint_dir=" + checkpoints_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kiln: resumed from " + checkpoints_ + "/mine/step-00000008 at step 8"), std::string::npos)
      << r.output;

  // With none of the user's own, none is picked.
  fs::remove_all(checkpoints_ + "/mine");
  const CommandResult none = run_command(kiln + " train --no-store --resume latest --set train.steps=9 --set "
                                         "train.checkpoint_dir=" + checkpoints_);
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_EQ(none.output, "kiln: error: --resume latest: no checkpoint of yours under " + checkpoints_ +
                             " (train.checkpoint_dir)\n");
}

TEST_F(SecurityFilesCli, ALatestThatIsALinkOrAFifoIsRefusedAtOnce) {
  train_base("base");
  const std::string run = checkpoints_ + "/base", latest = run + "/latest";
  const std::string resume = kBounded + kiln + " train --no-store --set train.steps=9 --resume " + run;
  fs::remove(latest);
  fs::create_symlink("/dev/zero", latest);
  const CommandResult zero = run_command(resume);
  EXPECT_EQ(zero.exit_code, 1) << zero.output;
  EXPECT_EQ(zero.output, "kiln: error: checkpoint: the latest file " + latest +
                             " is a symbolic link; kiln does not follow it\n");

  fs::remove(latest);
  ASSERT_EQ(::mkfifo(latest.c_str(), 0600), 0);
  const CommandResult fifo = run_command(resume);
  EXPECT_EQ(fifo.exit_code, 1) << fifo.output;
  EXPECT_EQ(fifo.output, "kiln: error: checkpoint: the latest file " + latest + " is not a regular file\n");
}

TEST_F(SecurityFilesCli, ATokenFileThatIsAFifoOrADeviceIsRefusedAtOnce) {
  const std::string store = dir_ + "/runs.db";
  store::open_store(store, store::Access::ReadWrite);
  const std::string serve = kBounded + "env -u KILN_TOKEN " + kiln + " serve --store " + store + " --token-file ";
  const std::string fifo = dir_ + "/token-fifo", zero = dir_ + "/token-zero";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", zero);
  for (const std::string& file : {fifo, zero}) {
    const CommandResult r = run_command(serve + file);
    EXPECT_EQ(r.exit_code, 1) << file << "\n" << r.output;
    EXPECT_EQ(r.output, "kiln: error: --token-file " + file + " is not a regular file\n");
  }
  // A link to a regular file is a token file like any other: only its size is bounded.
  std::ofstream(dir_ + "/long") << std::string(5000, 'x') << "\n";
  fs::create_symlink(dir_ + "/long", dir_ + "/token-long");
  const CommandResult long_file = run_command(serve + dir_ + "/token-long");
  EXPECT_EQ(long_file.exit_code, 1) << long_file.output;
  EXPECT_EQ(long_file.output, "kiln: error: --token-file " + dir_ + "/token-long is larger than 4096 bytes\n");
}

TEST_F(SecurityFilesCli, ABlankKilnTokenIsRefusedNotTakenForNone) {
  const std::string store = dir_ + "/runs.db";
  store::open_store(store, store::Access::ReadWrite);
  // timeout: a server that takes the blank token for none would serve on, open to every user.
  const CommandResult r = run_command("env KILN_TOKEN= timeout 10 " + kiln + " serve --store " + store +
                                      " --listen 0.0.0.0:0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output,
            "kiln: error: $KILN_TOKEN is blank; give a token (one word of printable characters), or none to listen on "
            "loopback only\n");
}

TEST_F(SecurityFilesCli, ASweepWritesItsBaseConfigOverAPlantedLinkNotThroughIt) {
  // base.json gives every point's run its config, hook included: a link planted at its name
  // must not make kiln write another file, nor take a file someone else can change.
  const std::string folder = checkpoints_ + "/planted", victim = dir_ + "/victim.json";
  fs::create_directories(folder);
  fs::permissions(folder, fs::perms::owner_all);
  std::ofstream(victim) << "untouched\n";
  fs::create_symlink(victim, folder + "/base.json");
  const CommandResult r = run_command(kiln + " sweep --name planted --grid train.lr=1e-3 --store " + dir_ + "/runs.db" +
                                      small_run(prefix()) + " --set train.checkpoint_dir=" + checkpoints_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_text(victim), "untouched\n");
  EXPECT_FALSE(fs::is_symlink(folder + "/base.json"));
  EXPECT_EQ(mode_of(folder + "/base.json"), 0600u);
  EXPECT_TRUE(json::parse(read_text(folder + "/base.json")).contains("model"));
}

}  // namespace
}  // namespace kiln::test
