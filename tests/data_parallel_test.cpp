// End-to-end: kiln train launched by mpirun as data-parallel replicas on the CPU trains the
// single-process loss curve (fp32 sums in another order only), and a batch the ranks cannot
// share is refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

class DataParallel : public testing::Test {
 protected:
  void SetUp() override {
#ifndef KILN_HAVE_MPI
    GTEST_SKIP() << "skipped: built without MPI";
#endif
  }
};

TEST_F(DataParallel, TwoRanksTrainTheSingleRankCurve) {
  const std::string prefix = prepare_corpus(fresh_dir("data_parallel"));
  // A global batch of 8 in micro-batches of 2: 4 on one rank, 2 on each of two; gradients
  // in buckets of 2000 elements (the model has about 21,000), reduced during backward.
  const std::string args = " train --no-store" + small_run(prefix) +
                           " --set train.global_batch=8 --set train.steps=20"
                           " --set train.log_interval=1 --set train.eval_interval=10";
  const CommandResult single = run_command(kiln + args);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const CommandResult dp2 =
      run_command(mpirun_command(2) + kiln + args + " --set parallel.ddp_bucket_size=2000 --set backend.threads=0");
  ASSERT_EQ(dp2.exit_code, 0) << dp2.output;
  EXPECT_NE(dp2.output.find("2 micro-batches of 2 on each of 2 data-parallel ranks"),
            std::string::npos)
      << dp2.output;
  // The two ranks share the machine's cores.
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_NE(dp2.output.find("cpu (" + std::to_string(std::max(1, cores / 2)) + " threads"),
            std::string::npos)
      << dp2.output;
  const std::vector<double> want = printed_losses(single.output),
                            got = printed_losses(dp2.output);
  ASSERT_EQ(want.size(), 22u) << single.output;  // 20 steps, 2 validations
  ASSERT_EQ(got.size(), want.size()) << dp2.output;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_LE(std::abs(got[i] - want[i]), 1e-4 * want[i] + 5e-5) << "loss " << i;
  // One sample, one header: rank 1 is silent.
  EXPECT_EQ(dp2.output.find("--- sample"), dp2.output.rfind("--- sample")) << dp2.output;
}

// A split model cannot sample at the end of the run: it says where a sample can come from,
// and only names a checkpoint that was written.
TEST_F(DataParallel, ASplitModelPointsToItsCheckpointToSample) {
  const std::string dir = fresh_dir("data_parallel_tp_sample");
  const std::string prefix = prepare_corpus(dir);
  const std::string run = mpirun_command(2) + kiln + " train --no-store --name split" + small_run(prefix) +
                          " --set parallel.tp=2 --set train.checkpoint_dir=" + dir + "/checkpoints";
  // Its final checkpoint cannot be written (the folder would be inside a file): a warning, and
  // nothing to point to.
  const CommandResult without = run_command(run + " --set train.checkpoint_dir=" + dir + "/corpus.txt/checkpoints");
  ASSERT_EQ(without.exit_code, 0) << without.output;
  EXPECT_NE(without.output.find("kiln: no sample: each rank holds 1/2 of the model; its last checkpoint could not be "
                                "written, so there is none to sample from\n"),
            std::string::npos)
      << without.output;
  EXPECT_EQ(without.output.find("next:"), std::string::npos) << without.output;

  const CommandResult with = run_command(run);
  ASSERT_EQ(with.exit_code, 0) << with.output;
  const std::string checkpoint = dir + "/checkpoints/split/step-00000006";
  EXPECT_NE(with.output.find("each rank holds 1/2 of the model; sample its checkpoint with kiln generate "
                             "--checkpoint " + checkpoint + "\n"),
            std::string::npos)
      << with.output;
  EXPECT_NE(with.output.find("next:\n  kiln generate --checkpoint " + checkpoint + " --prompt Doc"),
            std::string::npos)
      << with.output;
}

TEST_F(DataParallel, RankZeroRecordsEveryRanksRowsInOneRun) {
  const std::string dir = fresh_dir("data_parallel_store");
  const std::string prefix = prepare_corpus(dir), store = dir + "/runs.db";
  const CommandResult r = run_command(mpirun_command(2) + kiln + " train --name dp2 --store " +
                                      store + small_run(prefix));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const CommandResult csv = run_command(kiln + " runs export dp2 --format csv --store " + store);
  ASSERT_EQ(csv.exit_code, 0) << csv.output;
  // run,step,rank,...: steps 2, 4 and 6 logged, each by ranks 0 and 1.
  std::vector<std::string> step_rank;
  for (size_t at = csv.output.find('\n') + 1; at < csv.output.size();) {
    const size_t end = csv.output.find('\n', at);
    const std::string line = csv.output.substr(at, end - at);
    const size_t first = line.find(','), second = line.find(',', first + 1),
                 third = line.find(',', second + 1);
    step_rank.push_back(line.substr(first + 1, third - first - 1));
    at = end + 1;
  }
  EXPECT_EQ(step_rank, (std::vector<std::string>{"2,0", "2,1", "4,0", "4,1", "6,0", "6,1"}))
      << csv.output;
  const CommandResult show = run_command(kiln + " runs show dp2 --store " + store);
  EXPECT_NE(show.output.find("tp1.pp1.dp2"), std::string::npos) << show.output;
}

TEST_F(DataParallel, ABatchTheRanksCannotShareIsRefused) {
  const std::string prefix = prepare_corpus(fresh_dir("data_parallel_bad"));
  const CommandResult r =
      run_command(mpirun_command(3) + kiln + " train --no-store" + small_run(prefix));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("kiln: error: rank 0: train.global_batch=4 is not a multiple of "
                          "train.micro_batch=2 x 3 data-parallel ranks = 6"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace kiln::test
