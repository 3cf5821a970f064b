#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/host_snapshot.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "base/check.h"
#include "tests/test_files.h"
#include "trainer/config/config.h"
#include "trainer/memory/host_copy.h"
#include "tests/error_of.h"
#include "tests/small_model.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using test::error_of;

ModelConfig small_model() {
  ModelConfig m = test::small_model("llama", 16, 11, 6);
  m.make_vocab_size_divisible_by = 8;
  return m;
}

// A model and optimizer that have taken two steps, so every tensor holds something.
struct Trained {
  std::unique_ptr<Ops> ops = make_cpu_ops(2);
  TrainConfig train;
  GptModel model{small_model(), 2, *ops};
  AdamW optimizer{train, model.parameters(), *ops};

  explicit Trained(uint64_t seed) {
    model.init_parameters(seed);
    const std::vector<int32_t> tokens = {1, 4, 2, 9, 10, 3, 0, 5, 5, 7, 8, 2};
    const std::vector<int32_t> targets = {4, 2, 9, 10, 3, 6, 5, 5, 1, 8, 2, 1};
    for (int step = 0; step < 2; ++step) {
      model.zero_grad();
      model.set_batch(tokens.data(), targets.data(), 2, 6);
      model.forward();
      model.backward(1.0 / 12);
      optimizer.step(1e-2);
    }
  }

  TrainingState state(int64_t step) const {
    TrainingState s;
    s.step = step;
    s.optimizer_steps = optimizer.steps_taken();
    s.consumed_samples = step * 4;
    s.seed = 9;
    s.lr_scale = 0.5;
    s.loss_scaler = {1024, 3, 1};
    s.run_name = "unit";
    s.layout = "tp1.pp1.dp1";
    Config config;
    config.model = small_model();
    s.config = config_to_json(config);
    return s;
  }
};

std::vector<double> values(Ops& ops, const Tensor& t) { return copy_to_doubles(ops, t); }

using test::mode_of;

// Another user, for the tests that hand a file to one: they need root to.
constexpr uid_t kNobody = 65534;

class CheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    root_ = (fs::path(testing::TempDir()) /
             ("kiln_ckpt_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) +
              "_" + std::to_string(getpid())))
                .string();
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

TEST_F(CheckpointTest, RestoresEveryTensorAndTheState) {
  Trained a(1);
  const WrittenCheckpoint written = save_checkpoint(root_, a.state(2), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0);
  EXPECT_EQ(written.path, root_ + "/step-00000002");
  EXPECT_GT(written.bytes, 0);

  Trained b(2);  // another initialisation, another history
  const Checkpoint checkpoint(written.path);
  checkpoint.restore(b.model, b.optimizer, *b.ops);
  for (const Parameter& p : a.model.parameters().all())
    EXPECT_EQ(values(*a.ops, p.value), values(*b.ops, b.model.parameters().find(p.name).value)) << p.name;
  EXPECT_EQ(values(*a.ops, a.optimizer.state_for_checkpoint().exp_avg),
            values(*b.ops, b.optimizer.state_for_checkpoint().exp_avg));
  EXPECT_EQ(values(*a.ops, a.optimizer.state_for_checkpoint().exp_avg_sq),
            values(*b.ops, b.optimizer.state_for_checkpoint().exp_avg_sq));
  EXPECT_EQ(b.optimizer.steps_taken(), 2);
  const TrainingState& s = checkpoint.state();
  EXPECT_EQ(s.step, 2);
  EXPECT_EQ(s.consumed_samples, 8);
  EXPECT_EQ(s.seed, 9u);
  EXPECT_EQ(s.lr_scale, 0.5);
  EXPECT_EQ(s.loss_scaler.scale, 1024);
  EXPECT_EQ(s.loss_scaler.clean_steps, 3);
  EXPECT_EQ(s.run_name, "unit");
  EXPECT_EQ(s.config["model"]["n_layer"], 2);
}

// What train.async_checkpoint writes: a host snapshot taken at a step and written after the
// training has changed every parameter is the checkpoint a write at that step makes, byte for
// byte.
TEST_F(CheckpointTest, ASnapshotWritesItsStepsFilesAfterTheModelHasMovedOn) {
  Trained a(1);
  const OptimizerState optimizer = a.optimizer.state_for_checkpoint();
  const std::string direct = save_checkpoint(root_ + "/direct", a.state(2), a.model, optimizer, *a.ops, 0).path;
  HostSnapshot snapshot(*a.ops);
  // Reserved before the first step: the copies take that memory and no more, each tensor's
  // bytes on cache lines of its own.
  const CheckpointSources sources = checkpoint_sources(a.model, optimizer, *a.ops);
  snapshot.reserve(sources);
  const size_t held = snapshot.bytes();
  size_t tensor_bytes = 0, tensors = 0;
  for (const auto* list : {&sources.model, &sources.optimizer})
    for (const TensorSource& source : *list) {
      tensor_bytes += static_cast<size_t>(source.info.shape.numel()) * dtype_size(source.info.dtype);
      ++tensors;
    }
  EXPECT_GE(held, tensor_bytes);
  EXPECT_LT(held, tensor_bytes + 64 * tensors);
  snapshot.take(checkpoint_sources(a.model, optimizer, *a.ops));
  EXPECT_EQ(snapshot.bytes(), held);
  for (const Parameter& p : a.model.parameters().all()) a.ops->fill(p.value, 0.5);
  a.ops->fill(optimizer.exp_avg, 0.25);
  const CheckpointSources& copies = snapshot.copies();
  const std::string copied = write_checkpoint(root_ + "/copied", a.state(2), copies.model, copies.optimizer, 0).path;
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.json", "manifest.json"})
    EXPECT_EQ(test::text_of(copied + "/" + file), test::text_of(direct + "/" + file)) << file;

  // The next snapshot takes the model as it is now, in the same memory.
  snapshot.take(checkpoint_sources(a.model, optimizer, *a.ops));
  EXPECT_EQ(snapshot.bytes(), held);
  const std::string later = write_checkpoint(root_ + "/later", a.state(2), copies.model, copies.optimizer, 0).path;
  EXPECT_NE(test::text_of(later + "/model.safetensors"), test::text_of(direct + "/model.safetensors"));
  Trained b(2);
  Checkpoint(later).restore(b.model, b.optimizer, *b.ops);
  for (const Parameter& p : b.model.parameters().all())
    EXPECT_EQ(values(*b.ops, p.value), std::vector<double>(static_cast<size_t>(p.value.numel()), 0.5)) << p.name;
}

TEST_F(CheckpointTest, DamagedOrIncompleteCheckpointsAreRefusedNamingTheFile) {
  Trained a(1);
  const std::string path = save_checkpoint(root_, a.state(2), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0).path;
  const std::string model = path + "/model.safetensors";
  const auto size = fs::file_size(model);

  {  // one byte changed, same size
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 5));
    f.put('\x7f');
  }
  EXPECT_EQ(error_of([&] { Checkpoint c(path); }),
            "checkpoint: " + model + " is damaged: its SHA-256 does not match the manifest");
  fs::resize_file(model, size - 100);
  EXPECT_EQ(error_of([&] { Checkpoint c(path); }),
            "checkpoint: " + model + " is damaged: " + std::to_string(size - 100) +
                " bytes, the manifest says " + std::to_string(size));
  fs::remove(model);
  EXPECT_EQ(error_of([&] { Checkpoint c(path); }), "checkpoint: " + model + " is missing");
  fs::remove(path + "/manifest.json");
  EXPECT_EQ(error_of([&] { Checkpoint c(path); }),
            "checkpoint: " + path + " is not a complete checkpoint (it has no manifest.json)");
}

TEST_F(CheckpointTest, AnotherModelShapeIsRefused) {
  Trained a(1);
  const Checkpoint checkpoint(
      save_checkpoint(root_, a.state(2), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0).path);
  Config other;
  other.model = small_model();
  other.model.n_layer = 3;
  EXPECT_EQ(error_of([&] { checkpoint.check_model(config_to_json(other)["model"]); }),
            "checkpoint: " + checkpoint.path() + " holds another model: model.n_layer is 2 there, 3 here");
  other.model.n_layer = 2;
  checkpoint.check_model(config_to_json(other)["model"]);
}

TEST_F(CheckpointTest, KeepsTheNewestAndACrashedWriteLeavesTheLastWhole) {
  Trained a(1);
  for (int64_t step : {10, 20, 30}) save_checkpoint(root_, a.state(step), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 2);
  EXPECT_FALSE(fs::exists(root_ + "/step-00000010"));
  EXPECT_TRUE(fs::exists(root_ + "/step-00000020"));
  EXPECT_EQ(find_checkpoint(root_, "unused"), root_ + "/step-00000030");

  // A write that died half-way: a temporary folder with part of a checkpoint in it. The
  // latest checkpoint is still the last whole one, and the next save clears the debris.
  fs::create_directories(root_ + "/.tmp-step-00000040-99999");
  std::ofstream(root_ + "/.tmp-step-00000040-99999/model.safetensors") << "partial";
  EXPECT_EQ(Checkpoint(find_checkpoint(root_, "unused")).state().step, 30);
  save_checkpoint(root_, a.state(40), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 2);
  EXPECT_FALSE(fs::exists(root_ + "/.tmp-step-00000040-99999"));
  EXPECT_FALSE(fs::exists(root_ + "/step-00000020"));
  EXPECT_EQ(Checkpoint(find_checkpoint(root_, "unused")).state().step, 40);
}

TEST_F(CheckpointTest, ARewindDropsTheCheckpointsPastItsStepAndLatestNamesItAgain) {
  Trained a(1);
  EXPECT_TRUE(complete_checkpoint_steps(root_).empty()) << "no run folder yet";
  for (int64_t step : {10, 20, 30, 40}) save_checkpoint(root_, a.state(step), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0);
  // A write that died half-way, and a folder without its manifest, are no checkpoints.
  fs::create_directories(root_ + "/.tmp-step-00000050-99999");
  fs::remove(root_ + "/step-00000040/manifest.json");
  EXPECT_EQ(complete_checkpoint_steps(root_), (std::vector<int64_t>{10, 20, 30}));
  drop_checkpoints_after(root_, 20);
  EXPECT_EQ(complete_checkpoint_steps(root_), (std::vector<int64_t>{10, 20}));
  EXPECT_FALSE(fs::exists(root_ + "/step-00000040"));
  EXPECT_EQ(find_checkpoint(root_, "unused"), root_ + "/step-00000020");
  // The training goes on from step 20 and writes step 30 again.
  save_checkpoint(root_, a.state(30), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0);
  EXPECT_EQ(Checkpoint(find_checkpoint(root_, "unused")).state().step, 30);
}

TEST_F(CheckpointTest, LatestIsTheNewestOfAnyRun) {
  Trained a(1);
  save_checkpoint(root_ + "/first", a.state(5), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  save_checkpoint(root_ + "/second", a.state(3), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0);
  EXPECT_EQ(find_checkpoint("latest", root_), root_ + "/second/step-00000003");
  EXPECT_EQ(find_checkpoint(root_ + "/first", root_), root_ + "/first/step-00000005");
  EXPECT_EQ(error_of([&] { find_checkpoint("latest", root_ + "/none"); }),
            "--resume latest: no checkpoint under " + root_ + "/none (train.checkpoint_dir)");
  EXPECT_EQ(error_of([&] { find_checkpoint(root_, root_); }),
            "--resume " + root_ + ": not a checkpoint (no manifest.json) nor a folder of "
            "checkpoints (no latest file)");
}

TEST_F(CheckpointTest, IsWrittenForItsUserAloneWhateverTheUmask) {
  Trained a(1);
  const mode_t saved = ::umask(002);
  const std::string path = save_checkpoint(root_, a.state(2), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0).path;
  ::umask(saved);
  EXPECT_EQ(mode_of(root_), 0700u);
  EXPECT_EQ(mode_of(root_ + "/latest"), 0600u);
  EXPECT_EQ(mode_of(path), 0700u);
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.json", "manifest.json"})
    EXPECT_EQ(mode_of(path + "/" + file), 0600u) << file;
}

TEST_F(CheckpointTest, IsNeverWrittenThroughALinkedRunOrStepFolder) {
  Trained a(1);
  const std::string target = root_ + "-target";
  fs::remove_all(target);
  fs::create_directory(target);
  fs::create_directory_symlink(target, root_);
  const std::string hint = "; checkpoints go only into folders of your own (give the run another --name, or remove it)";
  EXPECT_EQ(error_of([&] { save_checkpoint(root_, a.state(2), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0); }),
            "checkpoint: the run folder " + root_ +
                " is a symbolic link; kiln does not follow links it reads back or writes into" + hint);
  EXPECT_EQ(error_of([&] { check_run_folder(root_); }),
            "checkpoint: the run folder " + root_ +
                " is a symbolic link; kiln does not follow links it reads back or writes into" + hint);
  EXPECT_TRUE(fs::is_empty(target));

  // A run folder others may write is refused too; one that is missing is made when written.
  fs::remove(root_);
  fs::create_directory(root_);
  fs::permissions(root_, fs::perms::owner_all | fs::perms::group_all);
  EXPECT_EQ(error_of([&] { check_run_folder(root_); }),
            "checkpoint: the run folder " + root_ +
                " may be written by other users (mode 0770); `chmod go-w` it if you trust it" + hint);
  fs::remove(root_);
  check_run_folder(root_);

  // A step written again (a run resumed from an earlier one) whose folder is a link.
  save_checkpoint(root_, a.state(2), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0);
  fs::remove_all(root_ + "/step-00000002");
  fs::create_directory_symlink(target, root_ + "/step-00000002");
  EXPECT_EQ(error_of([&] { save_checkpoint(root_, a.state(2), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0); }),
            "checkpoint: the step folder " + root_ +
                "/step-00000002 is a symbolic link; kiln does not follow links it reads back or writes into" + hint);
  EXPECT_TRUE(fs::is_empty(target));
  fs::remove_all(target);
}

TEST_F(CheckpointTest, AResumeTrustsOnlyWhatIsTheUsersOwnAndNoOneElsesToWrite) {
  Trained a(1);
  const std::string path = save_checkpoint(root_, a.state(2), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0).path;
  EXPECT_EQ(find_checkpoint_to_resume(root_, "unused"), path);
  EXPECT_EQ(find_checkpoint_to_resume(path, "unused"), path);
  const std::string hint = "; kiln resumes only checkpoints of your own (copy one you trust into a folder of yours)";

  fs::permissions(path + "/model.safetensors", fs::perms::others_write, fs::perm_options::add);
  EXPECT_EQ(error_of([&] { find_checkpoint_to_resume(path, "unused"); }),
            "checkpoint: the checkpoint file " + path +
                "/model.safetensors may be written by other users (mode 0602); `chmod go-w` it if you trust it" + hint);
  fs::permissions(path + "/model.safetensors", fs::perms::others_write, fs::perm_options::remove);

  fs::permissions(root_ + "/latest", fs::perms::group_write, fs::perm_options::add);
  EXPECT_EQ(error_of([&] { find_checkpoint_to_resume(root_, "unused"); }),
            "checkpoint: the latest file " + root_ +
                "/latest may be written by other users (mode 0620); `chmod go-w` it if you trust it" + hint);
  // Reading a checkpoint (kiln generate, kiln export) trusts it with nothing that runs.
  EXPECT_EQ(find_checkpoint(root_, "unused"), path);
  fs::permissions(root_ + "/latest", fs::perms::group_write, fs::perm_options::remove);

  const std::string linked = root_ + "/step-00000003";
  fs::create_directory_symlink(path, linked);
  EXPECT_EQ(error_of([&] { find_checkpoint_to_resume(linked, "unused"); }),
            "checkpoint: the checkpoint folder " + linked +
                " is a symbolic link; kiln does not follow links it reads back or writes into" + hint);
  fs::remove(linked);

  if (::geteuid() != 0) GTEST_SKIP() << "handing a checkpoint to another user needs root";
  ASSERT_EQ(::chown(path.c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(error_of([&] { find_checkpoint_to_resume(root_, "unused"); }),
            "checkpoint: the checkpoint folder " + path + " belongs to nobody, not to you" + hint);
  ASSERT_EQ(::chown(path.c_str(), 0, 0), 0);
  ASSERT_EQ(::chown(root_.c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(error_of([&] { find_checkpoint_to_resume(root_, "unused"); }),
            "checkpoint: the run folder " + root_ + " belongs to nobody, not to you" + hint);
}

TEST_F(CheckpointTest, LatestIsASmallRegularFileNeverALink) {
  Trained a(1);
  save_checkpoint(root_, a.state(2), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0);
  const std::string latest = root_ + "/latest";
  fs::remove(latest);
  fs::create_symlink("/dev/zero", latest);
  EXPECT_EQ(error_of([&] { find_checkpoint(root_, "unused"); }),
            "checkpoint: the latest file " + latest + " is a symbolic link; kiln does not follow it");
  fs::remove(latest);
  ASSERT_EQ(::mkfifo(latest.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { find_checkpoint(root_, "unused"); }),
            "checkpoint: the latest file " + latest + " is not a regular file");
  fs::remove(latest);
  std::ofstream(latest) << std::string(100, '0');
  EXPECT_EQ(error_of([&] { find_checkpoint(root_, "unused"); }),
            "checkpoint: the latest file " + latest + " is larger than 64 bytes");
}

TEST_F(CheckpointTest, LatestOfAnyRunIsNeverAnotherUsersRun) {
  if (::geteuid() != 0) GTEST_SKIP() << "handing a run to another user needs root";
  Trained a(1);
  save_checkpoint(root_ + "/mine", a.state(5), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  save_checkpoint(root_ + "/theirs", a.state(3), a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0);
  EXPECT_EQ(find_checkpoint("latest", root_), root_ + "/theirs/step-00000003");
  ASSERT_EQ(::chown((root_ + "/theirs").c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(find_checkpoint("latest", root_), root_ + "/mine/step-00000005");
  fs::remove_all(root_ + "/mine");
  EXPECT_EQ(error_of([&] { find_checkpoint("latest", root_); }),
            "--resume latest: no checkpoint of yours under " + root_ + " (train.checkpoint_dir)");
}

TEST_F(CheckpointTest, AResumedRunRunsOnlyTheHookItsOwnCommandLineGives) {
  Trained a(1);
  // A config a run could take: the tiny demo's (the small model's alone is no run's).
  TrainingState state = a.state(2);
  state.config = config_to_json(load_config("", {}));
  const std::string plain = save_checkpoint(root_, state, a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0).path;
  state.step = 3;
  state.config["alerts"]["command"] = "curl -d @- https://example.com/hook";
  const std::string path = save_checkpoint(root_, state, a.model, a.optimizer.state_for_checkpoint(), *a.ops, 0).path;

  const ResumedConfig dropped = resumed_config(path, {"train.steps=9"});
  EXPECT_EQ(dropped.dropped_hook, "curl -d @- https://example.com/hook");
  EXPECT_EQ(dropped.config.alerts.command, "");
  EXPECT_EQ(dropped.config.train.steps, 9);

  const ResumedConfig given = resumed_config(path, {"alerts.command=cat > alert.json"});
  EXPECT_EQ(given.dropped_hook, "");
  EXPECT_EQ(given.config.alerts.command, "cat > alert.json");
  const ResumedConfig silenced = resumed_config(path, {"alerts.command="});
  EXPECT_EQ(silenced.dropped_hook, "");
  EXPECT_EQ(silenced.config.alerts.command, "");

  // A checkpoint without a hook (every run without one writes "") has nothing to say.
  EXPECT_EQ(resumed_config(plain, {}).dropped_hook, "");
}

}  // namespace
}  // namespace kiln
