// kiln runs recover FILE: loads a recovery file (the rows a run's store could not take when
// the run ended, store/run_recovery.h) into the store.
#include <fmt/core.h>

#include <memory>
#include <string>

#include "cli/runs_command.h"
#include "store/run_recovery.h"

namespace kiln {
namespace {

struct RecoverOptions {
  std::string file;
  std::string store;
};

void runs_recover(const RecoverOptions& options) {
  const store::RecoveryLoad load = store::load_recovery(options.file, options.store);
  const std::string run = fmt::format("run {} ({})", load.run_id, load.run_name);
  if (load.nothing_new()) {
    fmt::print("{} already holds everything in {}: nothing loaded ({}, last step {})\n", load.store,
               options.file, run, load.last_step);
    return;
  }
  fmt::print("loaded {} into {}: {} metric rows, {} other rows and {} events for {}{}; last step {}\n",
             options.file, load.store, load.metric_rows, load.other_rows, load.events, run,
             load.status.empty() ? "" : ", now " + load.status, load.last_step);
  fmt::print("{} may be deleted: loading it again adds nothing\n", options.file);
}

}  // namespace

void add_runs_recover_command(CLI::App& runs) {
  auto options = std::make_shared<RecoverOptions>();
  CLI::App* recover = runs.add_subcommand(
      "recover", "Load a recovery file (the rows a run's store could not take when it ended) into the store");
  recover->add_option("file", options->file, "The recovery file the run named when it ended")->required();
  recover->add_option("--store", options->store,
                      "Run store to load it into (default: the store the file names)");
  recover->callback([options] { runs_recover(*options); });
}

}  // namespace kiln
