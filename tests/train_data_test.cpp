// End-to-end: kiln train on Megatron-style data options (blends, the index cache,
// end-of-document masking and resets), and bad data refused in one line before step 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

CommandResult train(const std::string& prefix, const std::string& extra) {
  return run_command(kiln + " train --no-store" + small_run(prefix) + extra);
}

bool one_line(const CommandResult& r) {
  return r.exit_code == 1 && r.output.find('\n') == r.output.size() - 1;
}

TEST(TrainData, IndicesAreBuiltOnceThenLoaded) {
  const std::string prefix = prepare_corpus(fresh_dir("train_data_cache"));
  const CommandResult first = train(prefix, "");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("kiln: data train: built indices of "), std::string::npos)
      << first.output;
  EXPECT_NE(first.output.find("kiln: data valid: built indices of "), std::string::npos);
  const CommandResult again = train(prefix, "");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("kiln: data train: loaded indices of "), std::string::npos)
      << again.output;
  // Same indices, same run: the losses agree to the last digit.
  EXPECT_EQ(printed_losses(first.output), printed_losses(again.output));
  EXPECT_EQ(printed_losses(first.output).size(), 5u);  // 3 logged steps, 2 validations
  EXPECT_TRUE(fs::is_directory(fs::path(prefix).parent_path() / "cache"));
}

TEST(TrainData, TrainsOnABlendAndWithDocumentOptions) {
  const std::string dir = fresh_dir("train_data_blend");
  const std::string a = prepare_corpus(fresh_dir("train_data_blend_a")),
                    b = prepare_corpus(fresh_dir("train_data_blend_b"));
  const CommandResult blend =
      run_command(kiln + " train --no-store" + small_run(a) + " --set 'data.paths=[0.7, \"" + a +
                  "\", 0.3, \"" + b + "\"]' --set data.cache_dir=" + dir + "/cache");
  ASSERT_EQ(blend.exit_code, 0) << blend.output;
  EXPECT_NE(blend.output.find("kiln: data blend of 0.7 x " + a + " train: "), std::string::npos)
      << blend.output;
  EXPECT_NE(blend.output.find("; 0.3 x " + b + " train: "), std::string::npos);
  EXPECT_NE(blend.output.find("built the blend of 2 datasets"), std::string::npos);

  const CommandResult masked = train(a, " --set data.eod_mask_loss=true"
                                        " --set data.reset_position_ids=true"
                                        " --set data.reset_attention_mask=true");
  ASSERT_EQ(masked.exit_code, 0) << masked.output;
  EXPECT_NE(masked.output.find("step 6/6 | loss"), std::string::npos) << masked.output;
  // Each option alone changes what the model computes (the corpus's samples hold several
  // documents each), so each changes the losses.
  const std::vector<double> plain = printed_losses(train(a, "").output);
  for (const char* option : {"eod_mask_loss", "reset_position_ids", "reset_attention_mask"}) {
    const CommandResult r = train(a, std::string(" --set data.") + option + "=true");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(printed_losses(r.output), plain) << option;
  }
}

TEST(TrainData, BadDataIsOneLineBeforeTraining) {
  const std::string dir = fresh_dir("train_data_bad");
  const std::string prefix = prepare_corpus(dir);
  // A weight where a prefix belongs.
  CommandResult r = run_command(kiln + " train --no-store" + small_run(prefix) +
                                " --set 'data.paths=[0.5, 0.5]'");
  EXPECT_TRUE(one_line(r)) << r.output;
  EXPECT_NE(r.output.find("data.paths: entry 1 should be a prefix, got the number 0.5"),
            std::string::npos)
      << r.output;
  // A model whose vocabulary cannot hold the data's ids (prepared for 257 byte ids).
  r = train(prefix, " --set model.vocab_size=100");
  EXPECT_TRUE(one_line(r)) << r.output;
  EXPECT_NE(r.output.find("model.vocab_size=100 is smaller than the 257 tokens"), std::string::npos)
      << r.output;
  // A .bin cut short: the index promises tokens that are not there.
  fs::resize_file(prefix + ".bin", fs::file_size(prefix + ".bin") / 2);
  r = train(prefix, "");
  EXPECT_TRUE(one_line(r)) << r.output;
  EXPECT_NE(r.output.find(prefix + ".idx"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("truncated?"), std::string::npos) << r.output;
  // A .bin with no .idx.
  fs::remove(prefix + ".idx");
  r = train(prefix, "");
  EXPECT_TRUE(one_line(r)) << r.output;
  EXPECT_NE(r.output.find("no dataset of data.paths exists (no " + prefix + ".idx)"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace kiln::test
