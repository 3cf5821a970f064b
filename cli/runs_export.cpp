// kiln runs export: every raw row of a run, as CSV (metrics, or the expert loads), JSON lines
// (metrics and validation losses) or JSON (everything).
#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "cli/runs_command.h"
#include "cli/runs_store.h"
#include "base/check.h"
#include "store/export.h"
#include "store/run_queries.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct RunsExportOptions {
  std::string store;
  std::string run;
  std::string format = "csv";  // a spreadsheet's, pandas' and every plotting tool's first choice
  std::string output;
};

using Writer = std::function<void(store::Database&, int64_t, std::ostream&)>;

Writer writer_for(const std::string& format) {
  if (format == "csv") return store::write_metrics_csv;
  if (format == "json") return store::write_run_json;
  if (format == "jsonl") return store::write_metrics_jsonl;
  if (format == "experts-csv") return store::write_experts_csv;
  fail("export: unknown --format '" + format + "' (csv, jsonl, json or experts-csv)");
}

// Writes FILE.tmp and renames it over FILE only once it is complete, so a failure (a full
// disk, a store error half-way) never leaves a truncated export behind.
void write_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) fail("export: cannot write " + tmp + ": " + std::strerror(errno));
  try {
    write(out);
    out.close();
    if (!out) fail("export: writing " + tmp + " failed: " + std::strerror(errno));
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) fail("export: cannot rename " + tmp + " to " + path + ": " + ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
}

void runs_export(const RunsExportOptions& options) {
  const Writer write = writer_for(options.format);
  const auto db = open_store_for_reading(options.store);
  const int64_t id = store::resolve_run(*db, options.run);
  if (options.output.empty() || options.output == "-") {
    write(*db, id, std::cout);
    std::cout.flush();
    if (!std::cout) fail("export: writing to stdout failed");
    return;
  }
  write_file(options.output, [&](std::ostream& out) { write(*db, id, out); });
}

}  // namespace

void add_runs_export_command(CLI::App& runs) {
  auto options = std::make_shared<RunsExportOptions>();
  CLI::App* cmd = runs.add_subcommand(
      "export",
      "Export a run's raw rows: csv (every metric row), jsonl (a metric row or validation loss a line), json (the "
      "whole run) or experts-csv (every expert load)");
  cmd->add_option("run", options->run, "Run id, name, or unambiguous name prefix")->required();
  add_store_option(cmd, options->store);
  cmd->add_option("-f,--format", options->format, "csv, jsonl, json or experts-csv")->capture_default_str();
  cmd->add_option("-o,--output", options->output, "Write to this file instead of stdout");
  cmd->callback([options] { runs_export(*options); });
}

}  // namespace kiln
