// End-to-end: `kiln runs import` brings another tool's run into a store, where `runs list`
// shows it beside kiln's, and `runs export` writes it back in the shapes import reads: the
// CSV and the JSON lines exported from an imported run import again to the same rows. Bad
// input is one line, a non-zero exit, and no run.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/run_command.h"

namespace kiln::test {
namespace {

void write_export(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

CommandResult runs_in(const std::string& store, const std::string& args) {
  return run_command("TZ=UTC " + kiln_binary() + " runs " + args + " --store " + store);
}

// The text after the first line (the header or the run's name column differs by run).
std::string rows_without_run(const std::string& csv, const std::string& name) {
  std::string out;
  for (size_t at = 0; at < csv.size();) {
    const size_t end = csv.find('\n', at);
    std::string line = csv.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.rfind(name + ",", 0) == 0) line = line.substr(name.size());
    out += line + "\n";
    at = end == std::string::npos ? csv.size() : end + 1;
  }
  return out;
}

TEST(RunsImport, AnotherToolsRunComesInAndGoesBackOutAsItCame) {
  const std::string dir = fresh_dir("runs_import"), store = dir + "/runs.db";
  write_export(dir + "/wandb-run.csv",
        "_step,_runtime,_timestamp,train/loss,learning_rate,eval/loss\n"
        "0,1.5,1700000000.5,10.5,0.0001,\n"
        "1,2.5,1700000001.5,9.25,0.0002,9.5\n");
  const CommandResult imported = runs_in(store, "import " + dir + "/wandb-run.csv --tag baseline");
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_EQ(imported.output, "imported " + dir +
                                 "/wandb-run.csv as run 'wandb-run': 2 metric rows (loss, lr), 1 validation losses\n"
                                 "not imported (no kiln metric): _runtime\n");
  const CommandResult listed = runs_in(store, "list");
  EXPECT_NE(listed.output.find("wandb-run  completed  baseline,imported"), std::string::npos) << listed.output;

  // Out as CSV and as JSON lines, and in again: the same rows.
  for (const std::string format : {"csv", "jsonl"}) {
    const std::string file = dir + "/back." + format;
    ASSERT_EQ(runs_in(store, "export wandb-run --format " + format + " -o " + file).exit_code, 0);
    const CommandResult again = runs_in(store, "import " + file + " --name again-" + format);
    ASSERT_EQ(again.exit_code, 0) << again.output;
    const std::string first = runs_in(store, "export wandb-run --format jsonl").output;
    const std::string second = runs_in(store, "export again-" + format + " --format jsonl").output;
    // CSV carries the metric rows alone; JSON lines the validation losses too.
    EXPECT_EQ(format == "jsonl" ? second : second + first.substr(first.find("{\"step\":1,\"time\"")), first)
        << format;
    EXPECT_EQ(rows_without_run(runs_in(store, "export again-" + format).output, "again-" + format),
              rows_without_run(runs_in(store, "export wandb-run").output, "wandb-run"));
  }
}

TEST(RunsImport, BadInputWritesNothing) {
  const std::string dir = fresh_dir("runs_import_bad"), store = dir + "/runs.db";
  write_export(dir + "/ok.csv", "step,loss\n1,2\n");
  ASSERT_EQ(runs_in(store, "import " + dir + "/ok.csv").exit_code, 0);
  write_export(dir + "/bad.csv", "step,loss\n1,2\n2,abc\n");
  const CommandResult bad = runs_in(store, "import " + dir + "/bad.csv");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(bad.output, "kiln: error: import: line 3: 'abc' in column loss is not a number\n");
  const CommandResult taken = runs_in(store, "import " + dir + "/ok.csv");
  EXPECT_NE(taken.exit_code, 0);
  EXPECT_TRUE(is_one_line(taken.output)) << taken.output;
  EXPECT_EQ(runs_in(store, "import " + dir + "/missing.csv").output,
            "kiln: error: import: cannot read " + dir + "/missing.csv\n");
  const CommandResult listed = runs_in(store, "list");
  EXPECT_NE(listed.output.find(" ok "), std::string::npos) << listed.output;
  EXPECT_EQ(listed.output.find("bad"), std::string::npos) << listed.output;
}

}  // namespace
}  // namespace kiln::test
