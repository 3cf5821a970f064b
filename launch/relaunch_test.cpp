#include "launch/relaunch.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::launch {
namespace {

namespace fs = std::filesystem;
using store::testing_util::error_of;

class RelaunchTest : public store::testing_util::StoreTest {
 protected:
  // A run "src" of two ranks and two tags, started in the test's folder, with checkpoints at
  // steps 3 and 6 (only 3's on disk), that ended as `status`.
  void record_run(store::RunStatus status) {
    store::RunWriter writer(path());
    store::RunInfo info;
    info.name = "src";
    info.host = "elsewhere";
    info.tags = {"keep", "-dash"};
    info.workdir = dir_.string();
    info.world_size = 2;
    writer.create_run(info);
    for (const int64_t step : {3, 6}) writer.log_checkpoint({step, "ckpt/src/step" + std::to_string(step), {}, "", 0, std::nullopt});
    fs::create_directories(dir_ / "ckpt/src/step3");
    std::ofstream(dir_ / "ckpt/src/step3/manifest.json") << "{}";
    if (status != store::RunStatus::Running) writer.finish(status);
    writer.flush();
  }

  RelaunchRequest request() const { return {"src", path(), {"train.steps=8"}, 0, false, std::nullopt, "", "here"}; }

  static std::vector<std::string> dashboard(const store::RunRecord&, Relaunch& relaunch) {
    relaunch.notes.push_back("dashboard decided");
    return {"--serve=127.0.0.1:0"};
  }
};

TEST_F(RelaunchTest, AResumeIsRebuiltFromTheRecordInItsOrderWithEveryValueAttached) {
  record_run(store::RunStatus::Released);
  auto db = store::open_store(path(), store::Access::ReadOnly);
  const Relaunch r = plan_relaunch(*db, request(), dashboard);
  const std::string checkpoint = (dir_ / "ckpt/src/step3").string();
  EXPECT_EQ(r.run.name, "src");
  EXPECT_EQ(r.step, 3) << "the newest checkpoint on disk";
  EXPECT_EQ(r.checkpoint, checkpoint);
  EXPECT_EQ(r.ranks, 2);
  EXPECT_EQ(r.workdir, dir_.string());
  EXPECT_EQ(r.command.args,
            (std::vector<std::string>{"--resume=" + checkpoint, "--store=" + path(), "--ranks=2", "--name=src",
                                      "--tag=keep", "--tag=-dash", "--serve=127.0.0.1:0", "--set=train.steps=8"}));
  EXPECT_EQ(r.command.ranks, 1) << "the ranks are in the words, attached";
  EXPECT_TRUE(r.command.detached);
  EXPECT_EQ(r.command.log_path, "") << "in this process's place";
  EXPECT_EQ(r.notes, (std::vector<std::string>{"dashboard decided"}));
  EXPECT_EQ(train_child(r.command).argv[1], "train");
}

TEST_F(RelaunchTest, AForkTakesTheCheckpointAtOrBeforeItsStepAFreeNameAndALogWhenDetached) {
  record_run(store::RunStatus::Completed);
  auto db = store::open_store(path(), store::Access::ReadOnly);
  RelaunchRequest fork = request();
  fork.fork_step = 5;
  fork.ranks = 1;
  fork.detach = true;
  const Relaunch r = plan_relaunch(*db, fork, dashboard);
  EXPECT_EQ(r.step, 3);
  EXPECT_EQ(r.ranks, 1);
  EXPECT_EQ(r.command.args[2], "--name=src-fork-3");
  EXPECT_EQ(fs::path(r.command.log_path).parent_path(), dir_ / "ckpt");
  EXPECT_EQ(fs::path(r.command.log_path).filename().string().rfind("src-fork-3-", 0), 0u);

  fork.fork_step = 2;
  EXPECT_EQ(error_of([&] { plan_relaunch(*db, fork, dashboard); }),
            "run 1 ('src') has no checkpoint at or before step 2 on disk (it recorded steps 6, 3; a deleted or moved "
            "folder cannot be used)");
  fork.fork_step = 3;
  fork.fork_name = "src";
  EXPECT_EQ(error_of([&] { plan_relaunch(*db, fork, dashboard); }),
            "a run named 'src' already exists; choose another --name");
}

TEST_F(RelaunchTest, ARunWhoseProcessLivesElsewhereIsRefused) {
  record_run(store::RunStatus::Running);
  auto db = store::open_store(path(), store::Access::ReadOnly);
  const std::string refused = error_of([&] { plan_relaunch(*db, request(), dashboard); });
  EXPECT_EQ(refused.rfind("run 1 ('src') is running in process ", 0), 0u) << refused;
  EXPECT_NE(refused.find(" on elsewhere; release or stop it first"), std::string::npos) << refused;
}

}  // namespace
}  // namespace kiln::launch
