// Runs logged by other tools, read into the rows kiln's store keeps (`kiln runs import`), so
// that they can be compared with kiln's own. What is read:
//   CSV, wide: a step column and a column per metric, a row per step (W&B's run history,
//     pandas' to_csv, kiln's own `runs export`);
//   CSV, long: columns naming the metric, its value and its step, a row per value (MLflow's
//     metric history: key, value, step, timestamp);
//   CSV of TensorBoard's scalars ("Wall time", "Step", "Value"), which holds one metric, named
//     by the caller;
//   JSON lines: an object per step (W&B's history rows).
// A column goes to the kiln metric of its name (store/metric_fields.h) or of a name other tools
// give it (train/loss, learning_rate, _step, _timestamp, eval/loss, ...); a validation loss
// goes to the run's validation rows; any other column is named in `skipped`. Times in
// milliseconds (MLflow's) are told from seconds by their size. Rows of one step merge.
// Bad input is one error naming the line, and nothing is returned.
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "store/types.h"

namespace kiln::store {

struct ImportedRows {
  std::vector<MetricRow> metrics;       // by step, then rank
  std::vector<ValidRow> valid;          // by step
  std::vector<std::string> metric_names;  // the kiln metrics that hold a value
  std::vector<std::string> skipped;     // columns with no kiln metric, in their order
};

// `tensorboard_metric`: the metric of a TensorBoard scalar CSV (needed for one, refused for
// any other shape).
ImportedRows read_import_csv(std::istream& in, const std::string& tensorboard_metric = "");
ImportedRows read_import_jsonl(std::istream& in);

}  // namespace kiln::store
