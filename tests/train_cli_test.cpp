// End-to-end: the kiln binary prepares data, trains, and refuses bad input with one
// line and a non-zero exit.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "kernels/ops.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

const std::string kiln = KILN_BINARY;

// A small corpus of many short documents, prepared with kiln data prepare.
std::string prepare_corpus(const std::string& dir) {
  const std::string text = dir + "/corpus.txt";
  std::ofstream out(text);
  for (int d = 0; d < 200; ++d)
    out << "Document " << d << ": the quick brown fox jumps over the lazy dog.\n\n";
  out.close();
  const CommandResult r = run_command(kiln + " data prepare --input " + text +
                                      " --tokenizer byte --document-boundary blank-line --append-eod --output " +
                                      dir + "/corpus");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir + "/corpus";
}

std::string small_run(const std::string& prefix) {
  return " --set 'data.paths=[\"" + prefix + "\"]' --set model.n_layer=1 --set model.d_model=32"
         " --set model.n_head=2 --set model.seq_len=16 --set train.global_batch=4"
         " --set train.micro_batch=2 --set train.steps=6 --set train.warmup=2 --set train.log_interval=2"
         " --set train.eval_interval=3 --set train.eval_iters=2 --set data.split=90,10,0"
         " --set train.sample_tokens=20 --set train.sample_prompt=Doc";
}

TEST(TrainCli, TrainsAndSamples) {
  const std::string prefix = prepare_corpus(fresh_dir("train_cli"));
  const CommandResult r = run_command(kiln + " train" + small_run(prefix));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 6/6 | loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eval step 6 | valid loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--- sample"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kiln: memory parameters"), std::string::npos) << r.output;
}

TEST(TrainCli, BadConfigValueIsOneLineAndNonZero) {
  const CommandResult r = run_command(kiln + " train --set model.n_head=5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("model.n_head"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
}

TEST(TrainCli, MissingDataIsOneLineAndNonZero) {
  const CommandResult r = run_command(kiln + " train --set 'data.paths=[\"/nonexistent/corpus\"]'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent/corpus"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
}

TEST(TrainCli, DataShorterThanOneSampleIsRefused) {
  const std::string prefix = prepare_corpus(fresh_dir("short_data"));
  const CommandResult r = run_command(kiln + " train" + small_run(prefix) +
                                      " --set model.seq_len=4096");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("fewer than one sample"), std::string::npos) << r.output;
}

TEST(TrainCli, CudaWithoutGpuIsRefused) {
#ifdef KILN_HAVE_CUDA
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
#endif
  const CommandResult r = run_command(kiln + " train --set backend.device=cuda");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("backend.device=cuda"), std::string::npos) << r.output;
}

TEST(TrainCli, PrintConfigShowsEmbeddedDefaults) {
  const CommandResult r = run_command(kiln + " train --print-config --set train.lr=0.001");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"lr\": 0.001"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"arch\": \"gpt2\""), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// Ctrl-C stops at the next step boundary: a final progress line, a message, exit 130.
TEST(TrainCli, InterruptStopsCleanly) {
  const std::string dir = fresh_dir("interrupt");
  const std::string prefix = prepare_corpus(dir);
  const std::string log = dir + "/train.log";
  const std::string script =
      kiln + " train" + small_run(prefix) + " --set train.steps=100000 --set train.log_interval=1"
      " >" + log + " 2>&1 & pid=$!; "
      "for i in $(seq 200); do grep -q '^step' " + log + " && break; sleep 0.1; done; "
      "kill -INT $pid; wait $pid; echo exit=$?";
  std::ofstream(dir + "/interrupt.sh") << script << "\n";
  const CommandResult r = run_command("sh " + dir + "/interrupt.sh");
  EXPECT_NE(r.output.find("exit=130"), std::string::npos) << r.output;
  const CommandResult logged = run_command("cat " + log);
  EXPECT_NE(logged.output.find("interrupted; stopped cleanly after step"), std::string::npos)
      << logged.output;
}

}  // namespace
}  // namespace kiln::test
