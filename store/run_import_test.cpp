// Other tools' exports read into kiln's rows: W&B's history CSV (quoted names, a validation
// column half empty, columns kiln keeps no metric for), MLflow's long metric history (times
// in milliseconds), TensorBoard's scalar CSV and W&B's JSON lines; and bad input refused in
// one line that names it.
#include "store/run_import.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tests/error_of.h"

namespace kiln::store {
namespace {

using test::error_of;

ImportedRows csv(const std::string& text, const std::string& metric = "") {
  std::istringstream in(text);
  return read_import_csv(in, metric);
}

TEST(RunImport, WandbHistoryCsv) {
  const ImportedRows r = csv(
      "_step,_runtime,_timestamp,train/loss,learning_rate,\"eval/loss\",\"note, quoted\"\r\n"
      "0,1.5,1700000000.5,10.5,1e-4,,a\r\n"
      "1,2.5,1700000001.5,9.25,2e-4,9.5,\"b, \"\"c\"\"\"\r\n");
  ASSERT_EQ(r.metrics.size(), 2u);
  EXPECT_EQ(r.metrics[1].step, 1);
  EXPECT_EQ(r.metrics[1].rank, 0);
  EXPECT_EQ(r.metrics[1].loss, 9.25);
  EXPECT_EQ(r.metrics[1].lr, 2e-4);
  EXPECT_EQ(r.metrics[1].time, 1700000001.5);
  ASSERT_EQ(r.valid.size(), 1u);
  EXPECT_EQ(r.valid[0].step, 1);
  EXPECT_EQ(r.valid[0].loss, 9.5);
  EXPECT_EQ(r.metric_names, (std::vector<std::string>{"loss", "lr"}));
  EXPECT_EQ(r.skipped, (std::vector<std::string>{"_runtime", "note, quoted"}));
}

TEST(RunImport, MlflowMetricHistoryMergesAStepsValues) {
  const ImportedRows r = csv(
      "key,value,step,timestamp\n"
      "loss,5.5,1,1700000000000\n"
      "loss,5.0,2,1700000001000\n"
      "grad_norm,0.75,2,1700000001000\n"
      "val_loss,5.2,2,1700000001000\n"
      "epoch,1,2,1700000001000\n");
  ASSERT_EQ(r.metrics.size(), 2u);
  EXPECT_EQ(r.metrics[1].loss, 5.0);
  EXPECT_EQ(r.metrics[1].grad_norm, 0.75);
  EXPECT_EQ(r.metrics[1].time, 1700000001.0);  // milliseconds read as seconds
  ASSERT_EQ(r.valid.size(), 1u);
  EXPECT_EQ(r.valid[0].loss, 5.2);
  EXPECT_EQ(r.skipped, (std::vector<std::string>{"epoch"}));
}

TEST(RunImport, TensorBoardScalarsNeedTheirMetricNamed) {
  const std::string text = "Wall time,Step,Value\n1700000000.25,10,3.5\n1700000001.25,20,3.25\n";
  const ImportedRows r = csv(text, "loss");
  ASSERT_EQ(r.metrics.size(), 2u);
  EXPECT_EQ(r.metrics[0].step, 10);
  EXPECT_EQ(r.metrics[0].loss, 3.5);
  EXPECT_EQ(r.metrics[0].time, 1700000000.25);
  EXPECT_EQ(error_of([&] { csv(text); }),
            "import: a TensorBoard scalar CSV holds one metric: name it with --metric (e.g. --metric loss)");
  EXPECT_EQ(error_of([] { csv("step,loss\n1,2\n", "loss"); }),
            "import: --metric names the metric of a TensorBoard scalar CSV (Wall time, Step, Value), which this is not");
}

TEST(RunImport, JsonLinesOfWandbHistory) {
  std::istringstream in(
      "{\"_step\": 0, \"train/loss\": 4.0, \"lr\": 0.1, \"media\": {\"x\": 1}}\n\n"
      "{\"_step\": 1, \"train/loss\": 3.5, \"val/loss\": 3.6, \"rank\": 1, \"tokens\": 4096}\n");
  const ImportedRows r = read_import_jsonl(in);
  ASSERT_EQ(r.metrics.size(), 2u);
  EXPECT_EQ(r.metrics[1].rank, 1);
  EXPECT_EQ(r.metrics[1].tokens, 4096);
  EXPECT_EQ(r.valid.at(0).loss, 3.6);
  EXPECT_EQ(r.skipped, (std::vector<std::string>{"media"}));
}

TEST(RunImport, BadInputIsOneLineNamingIt) {
  EXPECT_EQ(error_of([] { csv(""); }), "import: the file is empty");
  EXPECT_EQ(error_of([] { csv("time,loss\n1,2\n"); }),
            "import: no step column (step, _step, Step, global_step, ...) in the header");
  EXPECT_EQ(error_of([] { csv("step,loss\n1,2\n2,abc\n"); }), "import: line 3: 'abc' in column loss is not a number");
  EXPECT_EQ(error_of([] { csv("step,loss\n1.5,2\n"); }), "import: line 2: step 1.5 is not a whole number >= 0");
  EXPECT_EQ(error_of([] { csv("step,loss\n1,2,3\n"); }), "import: line 2 has 3 fields, the header 2");
  EXPECT_EQ(error_of([] { csv("step,tokens\n1,2.5\n"); }), "import: line 2: tokens 2.5 is not a whole number");
  EXPECT_EQ(error_of([] { csv("step,\"loss\n1,2\n"); }), "import: line 1: a quote is never closed");
  EXPECT_EQ(error_of([] { csv("step,epoch\n1,2\n"); }),
            "import: no step holds a metric kiln keeps (loss, lr, grad_norm, ... or a validation loss)");
  EXPECT_EQ(error_of([] { csv("run,step,loss\na,1,2\nb,1,2\n"); }),
            "import: line 3 starts a second run ('b'): import one run at a time");
  std::istringstream not_json("{\"step\": 1}\n[1, 2]\n");
  EXPECT_EQ(error_of([&] { read_import_jsonl(not_json); }), "import: line 2 is not a JSON object");
}

}  // namespace
}  // namespace kiln::store
