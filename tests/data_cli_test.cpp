// End-to-end: kiln data prepare and kiln data inspect through the binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/run_command.h"

namespace kiln::test {
namespace {

const std::string kiln = KILN_BINARY;

TEST(DataCli, PreparesBlankLineDocumentsAndInspects) {
  const std::string dir = fresh_dir("data_cli");
  std::ofstream(dir + "/a.txt") << "first doc\n\nsecond doc\nline two\n\n\nthird\n";
  const CommandResult prep =
      run_command(kiln + " data prepare --input " + dir + "/a.txt --tokenizer byte"
                  " --document-boundary blank-line --append-eod --output " + dir + "/out");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  EXPECT_NE(prep.output.find("3 documents"), std::string::npos) << prep.output;
  // 9 + 19 + 5 bytes of text and one end-of-document each: 36 tokens of 2 bytes.
  EXPECT_EQ(std::filesystem::file_size(dir + "/out.bin"), 36u * 2);

  const CommandResult inspect = run_command(kiln + " data inspect " + dir + "/out");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("first doc"), std::string::npos) << inspect.output;
  EXPECT_NE(inspect.output.find("uint16"), std::string::npos) << inspect.output;
}

TEST(DataCli, OneDocumentPerFileByDefault) {
  const std::string dir = fresh_dir("data_cli_files");
  std::ofstream(dir + "/a.txt") << "alpha\n\nbeta\n";
  std::ofstream(dir + "/b.txt") << "gamma\n";
  const CommandResult prep = run_command(kiln + " data prepare --input " + dir + "/a.txt " + dir +
                                         "/b.txt --tokenizer byte --output " + dir + "/out");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  EXPECT_NE(prep.output.find("2 documents"), std::string::npos) << prep.output;
}

TEST(DataCli, BadInputIsOneLineAndNonZero) {
  const std::string dir = fresh_dir("data_cli_bad");
  for (const std::string& args :
       {" --input /nonexistent.txt --tokenizer byte --output " + dir + "/x",
        " --input " + std::string(KILN_SOURCE_DIR) + "/README.md --tokenizer nope --output " + dir +
            "/x"}) {
    const CommandResult r = run_command(kiln + " data prepare" + args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir + "/x.bin"));
  }
  std::ofstream(dir + "/broken.idx") << "not an index";
  std::ofstream(dir + "/broken.bin") << "";
  const CommandResult r = run_command(kiln + " data inspect " + dir + "/broken");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("broken.idx"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::test
