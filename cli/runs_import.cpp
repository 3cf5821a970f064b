// kiln runs import: a run logged by another tool (W&B, MLflow, TensorBoard, a CSV or JSON lines
// of one's own) into the run store, beside kiln's runs, to compare with them.
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/check.h"
#include "cli/runs_command.h"
#include "cli/runs_store.h"
#include "cli/store_path.h"
#include "monitor/format/figures.h"
#include "store/run_import.h"
#include "store/run_writer.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct RunsImportOptions {
  std::string file;
  std::string store;
  std::string format;  // csv or jsonl; empty: from the file's extension
  std::string name;    // empty: the file's name without its extension
  std::string metric;  // a TensorBoard scalar CSV's metric
  std::vector<std::string> tags;
};

void runs_import(const RunsImportOptions& o) {
  const std::string format = !o.format.empty() ? o.format : fs::path(o.file).extension() == ".jsonl" ? "jsonl" : "csv";
  if (format != "csv" && format != "jsonl") fail("import: unknown --format '" + format + "' (csv or jsonl)");
  std::ifstream in(o.file, std::ios::binary);
  if (!in) fail("import: cannot read " + o.file);
  // Everything is read and checked before the store is touched: bad input writes nothing.
  const store::ImportedRows rows = format == "csv" ? store::read_import_csv(in, o.metric) : store::read_import_jsonl(in);
  store::RunInfo info;
  info.name = o.name.empty() ? fs::path(o.file).stem().string() : o.name;
  info.tags = o.tags;
  info.tags.push_back("imported");
  info.notes = "imported from " + fs::path(o.file).filename().string() + " (" + format + ")";
  info.world_size = 1;
  for (const store::MetricRow& r : rows.metrics) info.world_size = std::max<int64_t>(*info.world_size, r.rank + 1);
  store::RunWriter writer(resolve_store_path(o.store));
  writer.create_run(info);
  // In pieces, each committed before the next: the writer thins what queues past its bound,
  // and an import keeps every row.
  constexpr size_t kPiece = 16384;
  for (size_t first = 0; first < rows.metrics.size(); first += kPiece) {
    const auto begin = rows.metrics.begin() + static_cast<std::ptrdiff_t>(first);
    writer.log_metrics({begin, begin + static_cast<std::ptrdiff_t>(std::min(kPiece, rows.metrics.size() - first))});
    writer.flush();
  }
  for (const store::ValidRow& v : rows.valid) writer.log_valid(v);
  writer.finish(store::RunStatus::Completed);
  writer.flush();
  const store::WriterClose closed = writer.close();
  if (closed.items_left > 0) fail(fmt::format("import: the store did not take {} of the rows", closed.items_left));
  fmt::print("imported {} as run '{}': {} metric rows ({}), {} validation losses\n", o.file, info.name,
             rows.metrics.size(), join(rows.metric_names, ", "), rows.valid.size());
  if (!rows.skipped.empty()) fmt::print("not imported (no kiln metric): {}\n", join(rows.skipped, ", "));
}

}  // namespace

void add_runs_import_command(CLI::App& runs) {
  auto options = std::make_shared<RunsImportOptions>();
  CLI::App* cmd = runs.add_subcommand(
      "import", "Bring a run logged by another tool (a CSV or JSON lines of its metrics) into the store");
  cmd->add_option("file", options->file,
                  "W&B history, MLflow metric history, TensorBoard scalars (CSV) or JSON lines")
      ->required();
  add_store_option(cmd, options->store);
  cmd->add_option("-f,--format", options->format, "csv or jsonl (default: from the file's extension)");
  cmd->add_option("-n,--name", options->name, "The run's name (default: the file's name)");
  cmd->add_option("--metric", options->metric, "The metric of a TensorBoard scalar CSV (e.g. loss)");
  cmd->add_option("--tag", options->tags, "A tag for the run (repeatable; 'imported' is always added)");
  cmd->callback([options] { runs_import(*options); });
}

}  // namespace kiln
